// Package envconfig reads a Lambda function's configuration from environment
// variables, so that every bad value fails start-up with an error that names
// the variable and says what was expected.
package envconfig
