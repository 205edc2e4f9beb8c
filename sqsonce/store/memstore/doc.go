// Package memstore is an in-memory store.Store with the DynamoDB store's
// semantics and a clock the test controls: for tests of code that uses
// package sqsonce, with no AWS and no server anywhere.
package memstore
