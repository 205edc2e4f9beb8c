// Package storetest is the conformance suite every store.Store must pass
// (TestStore): the rules of the Store's documentation that sqsonce's lock
// relies on, one subtest per rule, and the rules of store.Admin where a
// store implements it. The stores that ship pass it, and so must a store
// of your own.
package storetest
