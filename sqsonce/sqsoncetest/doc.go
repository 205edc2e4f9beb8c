// Package sqsoncetest helps test code that uses package sqsonce, with no
// AWS anywhere: NewStore is an in-memory store to hand to sqsonce.New, with
// a clock the test controls, and Context gives a handler's unit test the
// key and fencing token sqsonce.Key and sqsonce.Fence read. The store
// conformance suite is storetest.TestStore.
package sqsoncetest
