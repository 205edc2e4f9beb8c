// Package sqsoncetest helps test code that uses package sqsonce, with no
// AWS anywhere: NewStore is an in-memory sqsonce.Store with a clock the
// test controls, Context gives a handler's unit test the key and fencing
// token sqsonce.Key and sqsonce.Fence read, and TestStore is the
// conformance suite every Store must pass (the DynamoDB store, the memory
// store, and a store of your own).
package sqsoncetest
