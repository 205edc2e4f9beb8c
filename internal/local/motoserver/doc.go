// Package motoserver starts and stops a local moto_server, the emulator of the
// SQS, DynamoDB, CloudFormation, S3 and IAM APIs that the tests and the local
// demo run against instead of AWS.
package motoserver
