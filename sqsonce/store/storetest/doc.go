// Package storetest is the conformance suite every store.Store must pass
// (TestStore): the rules of the Store's documentation that sqsonce's lock
// relies on, one subtest per rule, and the rules of store.Admin where a
// store implements it. A store.Transactor passes TestTransactions too: the
// rules of exactly-once effects. The stores that ship pass them, and so
// must a store of your own.
package storetest
