package mysqlstore

import (
	"errors"
	"fmt"

	"github.com/go-sql-driver/mysql"

	"github.com/sqs-once/sqs-once/sqsonce/store"
)

// MySQL's error numbers the store sorts (MariaDB's are the same for all
// of them but CHECK's).
const (
	errDupEntry           = 1062 // ER_DUP_ENTRY
	errNoSuchTable        = 1146 // ER_NO_SUCH_TABLE
	errBadField           = 1054 // ER_BAD_FIELD_ERROR
	errTableAccessDenied  = 1142 // ER_TABLEACCESS_DENIED_ERROR
	errColumnAccessDenied = 1143 // ER_COLUMNACCESS_DENIED_ERROR
	errDBAccessDenied     = 1044 // ER_DBACCESS_DENIED_ERROR
	errAccessDenied       = 1045 // ER_ACCESS_DENIED_ERROR
	errBadDB              = 1049 // ER_BAD_DB_ERROR
	errSpecificAccess     = 1227 // ER_SPECIFIC_ACCESS_DENIED_ERROR
	errNoDefault          = 1364 // ER_NO_DEFAULT_FOR_FIELD: a column the store does not write
	errDataTooLong        = 1406 // ER_DATA_TOO_LONG: a column narrower than the store's
	errParse              = 1064 // ER_PARSE_ERROR: a server that does not take the store's SQL
	errLockWaitTimeout    = 1205 // ER_LOCK_WAIT_TIMEOUT
	errDeadlock           = 1213 // ER_LOCK_DEADLOCK
	errReadOnlyServer     = 1290 // ER_OPTION_PREVENTS_STATEMENT: --read-only (MySQL, Aurora)
	errReadOnlyMode       = 1836 // ER_READ_ONLY_MODE (MariaDB)
)

// code is the MySQL error number of err, 0 when it is not the server's.
func code(err error) uint16 {
	var my *mysql.MySQLError
	if errors.As(err, &my) {
		return my.Number
	}
	return 0
}

// misconfigured reports whether a MySQL error number is one no retry
// fixes: the table, a column, the database or a privilege missing, a
// table whose columns refuse the store's rows, SQL the server does not
// take.
func misconfigured(n uint16) bool {
	switch n {
	case errNoSuchTable, errBadField, errTableAccessDenied, errColumnAccessDenied, errDBAccessDenied,
		errAccessDenied, errBadDB, errSpecificAccess, errNoDefault, errDataTooLong, errParse:
		return true
	}
	return false
}

// effect reports whether a MySQL error number is a constraint of the
// user's own tables refusing a write: a duplicate key, a foreign key, a
// CHECK constraint (3819 on MySQL, 4025 on MariaDB), a NOT NULL column.
func effect(n uint16) bool {
	switch n {
	case errDupEntry,
		1451, // ER_ROW_IS_REFERENCED_2: a parent row still referenced
		1452, // ER_NO_REFERENCED_ROW_2: a child row without its parent
		1216, // ER_NO_REFERENCED_ROW
		1217, // ER_ROW_IS_REFERENCED
		1048, // ER_BAD_NULL_ERROR
		3819, // ER_CHECK_CONSTRAINT_VIOLATED (MySQL 8)
		4025: // ER_CONSTRAINT_FAILED (MariaDB)
		return true
	}
	return false
}

// retryable reports whether a MySQL error number is a transaction lost to
// a concurrent one, which a new transaction may win: a deadlock (InnoDB
// rolled the whole transaction back) or a lock wait timeout (the
// statement, or with innodb_rollback_on_timeout the transaction).
func retryable(n uint16) bool { return n == errDeadlock || n == errLockWaitTimeout }

// fail is a failed statement as the store's error: a *store.StoreError
// matching store.ErrMisconfigured for what no retry fixes (the table or a
// column missing, access denied, a database that does not exist),
// store.ErrUnavailable otherwise (a connection refused or dropped, a
// timeout, a deadlock, a server shutting down or read-only during a
// failover), unwrapping to the driver's error (*mysql.MySQLError, with
// its Number).
func (s *Store) fail(op, id string, err error) error {
	return &store.StoreError{Op: op, ID: id, Err: s.sort(err)}
}

// sort wraps a *mysql.MySQLError that no retry fixes with
// store.ErrMisconfigured and what to do about it; any other error is
// returned as it is (a retry may fix it).
func (s *Store) sort(err error) error {
	n := code(err)
	switch n {
	case errReadOnlyServer, errReadOnlyMode:
		// A failover in progress (the old writer turned reader): a retry
		// reaches the new writer. A reader endpoint never does.
		return fmt.Errorf("%w (the server is read-only: a failover in progress, which a retry outlives; if it lasts, the DSN names a replica or Aurora's reader endpoint: name the writer, the cluster endpoint)", err)
	}
	if !misconfigured(n) {
		return err
	}
	fix := ""
	switch n {
	case errNoSuchTable:
		fix = fmt.Sprintf("; the table %s does not exist: create it with mysqlstore.CreateTable or this SQL:\n%s", s.t, TableDDL(s.name))
	case errBadField, errNoDefault, errDataTooLong:
		fix = fmt.Sprintf("; the table %s is not the store's (Check says how): the store's is\n%s", s.t, TableDDL(s.name))
	case errTableAccessDenied, errColumnAccessDenied, errDBAccessDenied, errSpecificAccess:
		fix = fmt.Sprintf("; grant the store's user SELECT, INSERT, UPDATE, DELETE ON %s", s.t)
	case errAccessDenied:
		fix = "; the DSN's user or password is refused"
	case errBadDB:
		fix = "; the DSN's database does not exist: CREATE DATABASE it"
	case errParse:
		fix = "; the server does not take the store's SQL: MariaDB 10.6 or later, or MySQL 8, is needed"
	}
	return fmt.Errorf("%w: %w%s", store.ErrMisconfigured, err, fix)
}
