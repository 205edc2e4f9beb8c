// Package store is the contract between sqsonce's lock and the stores that
// keep its records: the Store interface, the records it holds and the
// errors it returns, with the standard library alone, so that a store's
// package and the lock depend on it and not on each other.
//
// The stores that ship are packages of their own beside it: dynamostore
// (a DynamoDB table), redisstore (Redis or Valkey), pgstore (a PostgreSQL
// table) and memstore (in memory, for tests). storetest.TestStore is the
// conformance suite every one of them passes, and a store of your own must
// too. A store may implement the optional interfaces Checker (its set-up,
// which Processor.Check reads) and Admin (what the operator's CLI calls
// off the hot path), and Transactor: its completion commits the work's own
// writes with it (exactly-once effects; dynamostore.NewTransactional,
// pgstore and memstore), which storetest.TestTransactions checks.
package store
