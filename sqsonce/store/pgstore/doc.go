// Package pgstore is the store.Store on a PostgreSQL table, through pgx v5
// (a *pgxpool.Pool the caller makes), with transactional completion: the
// work's own writes commit in one transaction with the record's
// completion, exactly once.
//
// Every method of store.Store is one statement on the pool (an INSERT …
// ON CONFLICT DO UPDATE … WHERE, or an UPDATE … WHERE), conditioned as the
// DynamoDB store's calls are. The table is TableDDL's (CreateTable applies
// it); Check verifies it. PostgreSQL has no TTL: Sweep deletes the records
// past their ExpiresAt, which Acquire and Read already treat as absent.
//
// The Store is a store.Transactor. A work that calls Tx(ctx) gets a pgx.Tx
// on the store's pool, begun on that first call; when the work returns
// nil, sqsonce completes the record in that transaction (an UPDATE
// conditioned on the lease's owner and fence, which must touch one row)
// and commits it: the work's writes and the completion commit together or
// not at all. A holder whose lock was taken over commits nothing; a COMMIT
// whose answer was lost is settled by reading the record. The lock itself
// is taken and renewed outside that transaction, on the pool, so that a
// long work holds no row lock that blocks others. The business tables must
// be in the same database as the record table: a write elsewhere (another
// database, an HTTP call, an e-mail) is outside the transaction.
//
// Errors: a missing table, column or privilege (SQLSTATE class 42, 28,
// 3D000, 3F000) matches store.ErrMisconfigured and says what to run; the
// rest (a connection refused or dropped, a timeout) store.ErrUnavailable;
// each unwraps to pgx's error (*pgconn.PgError, with its Code).
package pgstore
