// Package dynamostore is the store.Store on a DynamoDB table: partition key
// "id" (String), TTL on "expiresAt", every operation one conditional call.
//
// New takes any client with the calls of API (the hot path); FromEnv builds
// the store as the deployed processor does, from IDEMPOTENCY_TABLE and an
// AWS configuration. The store also implements store.Checker (Check reads
// the table's schema and TTL) and store.Admin (Forget and Locks, for the
// operator's CLI, through a client that also has AdminAPI's calls). It
// sorts its own errors: a missing table, denied access or a schema that
// refuses the key match store.ErrMisconfigured, the rest
// store.ErrUnavailable, and every one unwraps to the SDK's error.
//
// NewTransactional builds the store whose locks' work may add its own
// writes (Add: Put, Update, Delete, ConditionCheck, on any table of the
// same account and region) to commit with the record's completion in one
// TransactWriteItems: exactly-once effects (store.Transactor). A test of
// such a work runs it on memstore, where Add stages the writes and
// memstore's Committed shows those committed.
package dynamostore
