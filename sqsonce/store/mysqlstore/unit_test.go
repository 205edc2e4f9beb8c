package mysqlstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqs-once/sqs-once/sqsonce/store"
)

// TestErrorClasses: what no retry fixes matches ErrMisconfigured alone,
// with the fix; the rest (a deadlock, a lock wait timeout, a server
// read-only in a failover, a connection lost) ErrUnavailable alone; both
// unwrap to the driver's error.
func TestErrorClasses(t *testing.T) {
	s := New(nil, "app.records")
	for n, fix := range map[uint16]string{
		1146: "mysqlstore.CreateTable", 1054: "CREATE TABLE IF NOT EXISTS `app`.`records`", 1142: "grant the store's user SELECT, INSERT, UPDATE, DELETE ON `app`.`records`",
		1143: "grant", 1044: "grant", 1045: "user or password", 1049: "CREATE DATABASE", 1364: "not the store's", 1406: "not the store's", 1064: "MariaDB 10.6",
	} {
		my := &mysql.MySQLError{Number: n, Message: "m"}
		err := s.fail("acquire", "p#k", fmt.Errorf("wrapped: %w", my))
		var got *mysql.MySQLError
		if !errors.Is(err, store.ErrMisconfigured) || errors.Is(err, store.ErrUnavailable) || !errors.As(err, &got) || got.Number != n || !strings.Contains(err.Error(), fix) {
			t.Errorf("%d: %v; want ErrMisconfigured alone, unwrapping to the MySQLError, saying %q", n, err, fix)
		}
	}
	for _, cause := range []error{
		&mysql.MySQLError{Number: 1213}, &mysql.MySQLError{Number: 1205}, &mysql.MySQLError{Number: 1290}, &mysql.MySQLError{Number: 1062},
		mysql.ErrInvalidConn, context.DeadlineExceeded, errors.New("dial tcp: connection refused"),
	} {
		err := s.fail("acquire", "p#k", cause)
		if errors.Is(err, store.ErrMisconfigured) || !errors.Is(err, store.ErrUnavailable) || !errors.Is(err, cause) {
			t.Errorf("%v: %v; want ErrUnavailable alone, unwrapping to the cause", cause, err)
		}
	}
	// The user's own constraints, which a transaction's commit reports as
	// an EffectError; the store's own, retryable, conflicts.
	for _, n := range []uint16{1062, 1451, 1452, 1216, 1217, 1048, 3819, 4025} {
		if !effect(n) || misconfigured(n) || retryable(n) {
			t.Errorf("%d: want a constraint of the user's own alone", n)
		}
	}
	for _, n := range []uint16{1213, 1205} {
		if !retryable(n) || effect(n) || misconfigured(n) {
			t.Errorf("%d: want a retryable conflict alone", n)
		}
	}
	if err := s.fail("acquire", "p#k", &mysql.MySQLError{Number: 1290}); !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "cluster endpoint") {
		t.Errorf("a read-only server: %v; want ErrUnavailable naming the writer endpoint", err)
	}
	if code(errors.New("x")) != 0 || code(fmt.Errorf("w: %w", &mysql.MySQLError{Number: 1213})) != 1213 {
		t.Error("code does not read the MySQL error number through wrapping")
	}
}

// TestTableDDLQuotes: the table name is quoted, a database kept apart,
// and a name that is not an identifier cannot break out of it; the key
// is VARBINARY, the engine InnoDB, the charset utf8mb4, the sweep's index
// there.
func TestTableDDLQuotes(t *testing.T) {
	ddl := TableDDL("x`; DROP TABLE y; --")
	if !strings.Contains(ddl, "CREATE TABLE IF NOT EXISTS `x``; DROP TABLE y; --` (") {
		t.Errorf("TableDDL of a hostile name:\n%s", ddl)
	}
	ddl = TableDDL("app.records")
	for _, want := range []string{"CREATE TABLE IF NOT EXISTS `app`.`records` (", "\n  id              VARBINARY(2048) NOT NULL,", "PRIMARY KEY (id)", "KEY expires_at (expires_at)", "ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;\n"} {
		if !strings.Contains(ddl, want) {
			t.Errorf("TableDDL(%q) lacks %q:\n%s", "app.records", want, ddl)
		}
	}
}

// TestTxWithoutSqsonce: a context without a transaction of this package's
// is ErrNoTx, for Tx and BeginTx; a transaction begun stays Empty,
// holding nothing, until the work asks for it.
func TestTxWithoutSqsonce(t *testing.T) {
	if _, err := Tx(context.Background()); !errors.Is(err, ErrNoTx) {
		t.Errorf("Tx(background) = %v; want ErrNoTx", err)
	}
	if _, err := BeginTx(context.Background(), nil); !errors.Is(err, ErrNoTx) {
		t.Errorf("BeginTx(background) = %v; want ErrNoTx", err)
	}
	tx := New(nil, "t").Begin(store.Lease{ID: "p#k", Owner: "o", Fence: 2})
	if !tx.Empty() {
		t.Error("Begin's transaction is not Empty")
	}
	if err := tx.Rollback(context.Background()); err != nil {
		t.Errorf("Rollback of a transaction never begun: %v", err)
	}
	if _, err := Tx(store.ContextWithTx(context.Background(), tx)); !errors.Is(err, store.ErrTxEnded) {
		t.Errorf("Tx after the Rollback = %v; want ErrTxEnded", err)
	}
}

// TestIDTooLong: an id longer than the key column is refused before any
// statement (a server without strict mode would truncate it into another
// key's), matching ErrMisconfigured and saying to hash the keys.
func TestIDTooLong(t *testing.T) {
	now := time.Now()
	_, err := New(nil, "t").Acquire(context.Background(), store.AcquireRequest{ID: "p#" + strings.Repeat("k", MaxIDBytes), Owner: "o", Now: now, LockUntil: now.Add(time.Minute)})
	if !errors.Is(err, store.ErrMisconfigured) || !strings.Contains(err.Error(), "HashKeys") {
		t.Errorf("Acquire of a %d-byte id: %v; want ErrMisconfigured saying to hash the keys", MaxIDBytes+2, err)
	}
}
