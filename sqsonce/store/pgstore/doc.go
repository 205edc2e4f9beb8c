// Package pgstore is the store.Store on a PostgreSQL table, through pgx v5
// (a *pgxpool.Pool the caller makes), with transactional completion: the
// work's own writes commit in one transaction with the record's
// completion, exactly once.
//
// Every method of store.Store is one statement on the pool (an INSERT …
// ON CONFLICT DO UPDATE … WHERE, or an UPDATE or DELETE … WHERE), under
// the DynamoDB store's conditions, so a record costs what it costs there:
// a new key an Acquire and a Complete, a duplicate one Acquire. The
// completion's UPDATE writes the work's outbox (its staged messages) with
// the status; MarkSent, one more UPDATE, removes it once they are sent.
// The table is TableDDL's (CreateTable applies it, idempotently, and adds
// the outbox column to a table an earlier version created); Check verifies
// its columns, types, primary key and privileges, and gives the ALTER
// TABLE a table without the outbox column needs. PostgreSQL has no TTL: Sweep
// deletes the records past their ExpiresAt, which Acquire and Read already
// treat as absent (Read by the database's clock).
//
// The Store is a store.Transactor. A work that calls Tx(ctx) gets a pgx.Tx
// on the store's pool, begun on that first call; when the work returns
// nil, sqsonce completes the record in that transaction (an UPDATE
// conditioned on the lease's owner and fence, which must touch one row)
// and commits it: the work's writes and the completion commit together or
// not at all. Its cost is the transaction's: a BEGIN when the work first
// calls Tx, then the completion's UPDATE and the COMMIT on the
// transaction's connection, where a plain completion is one statement on
// the pool; the Acquire before is the same. A holder whose lock was
// taken over commits nothing; a COMMIT whose answer was lost is settled by
// reading the record. A work that never calls Tx costs and holds nothing
// more.
//
// The business tables must be in the same database as the record table:
// a write elsewhere (another database, an HTTP call, an e-mail) is outside
// the transaction and keeps the windows docs/guarantees.md describes.
//
// The lock itself is taken and renewed outside the transaction, on the
// pool, so that a long work holds no row lock that blocks others: the
// record's row is locked only from the completion's UPDATE to the COMMIT.
// A work in a transaction holds one of the pool's connections until it
// ends, while the lock's renewals and the next keys' acquisitions need
// others: size the pool (MaxConns) above the number of works that run at
// once. A client that dies between that UPDATE and its COMMIT leaves a
// session idle in its transaction, holding the record's row, until the
// server notices: set idle_in_transaction_session_timeout (a few times the
// longest COMMIT) so that the next holder is not kept waiting.
//
// Errors: a missing table, column or privilege (SQLSTATE class 42, 28,
// 3D000, 3F000) matches store.ErrMisconfigured and says what to run; the
// rest (a connection refused or dropped, a timeout) store.ErrUnavailable;
// each unwraps to pgx's error (*pgconn.PgError, with its Code).
package pgstore
