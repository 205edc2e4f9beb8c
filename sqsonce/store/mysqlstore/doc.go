// Package mysqlstore is the store.Store on a MySQL or MariaDB table (Aurora
// MySQL, RDS for MySQL), through database/sql and
// github.com/go-sql-driver/mysql with a *sql.DB the caller opens, with
// transactional completion: the work's own writes commit in one
// transaction with the record's completion, exactly once.
//
// Every method of store.Store is one conditional statement on the pool
// (an INSERT, or an UPDATE or DELETE … WHERE), under the DynamoDB store's
// conditions; a refusal reads the record to say what refused it, and an
// Acquire of a key that has a record reads it and writes it back only if
// it is still that version (a compare-and-set). A new key costs an INSERT
// and an UPDATE, a duplicate a failed INSERT and a read. The table is
// TableDDL's (CreateTable applies it); Check verifies its engine, columns,
// types, primary key and privileges. MySQL has no TTL: Sweep deletes the
// records past their ExpiresAt, which Acquire and Read already treat as
// absent (Read by the database's clock).
//
// What the user's DSN says does not matter to the store: every UPDATE
// moves the row's version column on, so a statement that matched a row
// changed it, and rows-affected counts it whether or not the connection
// set clientFoundRows; times are BIGINT epoch milliseconds and seconds,
// whatever parseTime, loc and the session's time zone; keys are
// VARBINARY, compared byte for byte ("Order-1" and "order-1", "k" and
// "k " are distinct records, as on the other stores).
//
// The Store is a store.Transactor. A work that calls Tx(ctx) gets a
// *sql.Tx on a connection of the pool, begun on that first call; when the
// work returns nil, sqsonce completes the record in that transaction (an
// UPDATE conditioned on the lease's owner, fence and PROCESSING, which must
// match one row) and commits it: the work's writes and the completion
// commit together or not at all. A work whose statement failed (MySQL
// rolls back the statement alone, or the whole transaction on a deadlock)
// has its transaction refused as a whole at the commit, a
// *store.EffectError, even if it went on: the store reads the session's
// Handler_rollback when the transaction begins and before the completion,
// and runs the transaction with autocommit off so that statements after a
// deadlock are not committed one by one. Its cost: on the transaction's
// connection, the BEGIN, a SET and a SHOW when the work first calls Tx,
// then a SHOW, the completion's UPDATE, the COMMIT and a SET; the Acquire
// before is the same. A holder whose lock was taken over commits nothing;
// a COMMIT whose answer was lost is settled by reading the record. A work
// that never calls Tx costs and holds nothing more.
//
// The business tables must be on the same server as the record table: a
// write elsewhere (another server, an HTTP call, an e-mail) is outside the
// transaction and keeps the windows docs/guarantees.md describes.
//
// The lock itself is taken and renewed outside the transaction, on the
// pool, so that a long work holds no row lock that blocks others: the
// record's row is locked only from the completion's UPDATE to the COMMIT.
// A work in a transaction holds one of the pool's connections until it
// ends, while the lock's renewals and the next keys' acquisitions need
// others: do not cap the pool (SetMaxOpenConns) at the number of works
// that run at once.
//
// Errors: a missing table, column, database or privilege (MySQL errors
// 1146, 1054, 1049, 1142, 1143, 1044, 1045, …) matches
// store.ErrMisconfigured and says what to run; the rest (a connection
// refused or dropped, a timeout, a deadlock 1213 or lock wait timeout
// 1205, a server read-only in a failover) store.ErrUnavailable; each
// unwraps to the driver's error (*mysql.MySQLError, with its Number).
package mysqlstore
