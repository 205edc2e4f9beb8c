package mysqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"log"
	"os"
	"time"

	_ "github.com/go-sql-driver/mysql" // the "mysql" driver of database/sql

	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/store/mysqlstore"
)

// An order written exactly once: the work inserts it through
// mysqlstore.Tx, and sqsonce commits that insert with the key's
// completion, in one transaction. A delivery that finds the key completed
// runs nothing; a holder that crashed, or lost its lock, committed
// nothing. The orders table is on the same server as the record table.
// The DSN is go-sql-driver's ("user:password@tcp(host:3306)/db"): the
// store needs none of its parameters. (Compiled, not run: it needs a
// MySQL.)
func ExampleTx() {
	ctx := context.Background()
	db, err := sql.Open("mysql", os.Getenv("MYSQL_DSN"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if err := mysqlstore.CreateTable(ctx, db, "idempotency"); err != nil {
		log.Fatal(err)
	}
	s := mysqlstore.New(db, "idempotency")
	p, err := sqsonce.New(sqsonce.Config{Store: s, KeyPrefix: "orders", LockTimeout: time.Minute})
	if err != nil {
		log.Fatal(err)
	}
	if err := p.Check(ctx); err != nil {
		log.Fatal(err) // the table missing or different: says what to run
	}
	err = p.Do(ctx, "order-1234", func(ctx context.Context) error {
		tx, err := mysqlstore.Tx(ctx) // never tx.Commit or tx.Rollback: sqsonce ends it
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO orders (id, amount) VALUES (?, ?)`, "order-1234", 42)
		return err // a failed statement: return it (the transaction is refused anyway)
	})
	if err != nil {
		log.Print(err) // sqsonce.ErrDuplicate: the order was written before
	}
}

// Do without a transaction: the store is the lock alone, as DynamoDB's
// is, and the work's effect is outside it (an HTTP call, another
// database): at least once, deduplicated. (Compiled, not run.)
func ExampleNew() {
	ctx := context.Background()
	db, err := sql.Open("mysql", os.Getenv("MYSQL_DSN"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	p, err := sqsonce.New(sqsonce.Config{Store: mysqlstore.New(db, "idempotency"), KeyPrefix: "emails"})
	if err != nil {
		log.Fatal(err)
	}
	err = p.Do(ctx, "welcome-42", func(ctx context.Context) error {
		return sendWelcomeEmail(ctx, 42)
	})
	if err != nil && !errors.Is(err, sqsonce.ErrDuplicate) {
		log.Print(err)
	}
}

// sendWelcomeEmail stands for a work whose effect is outside the database.
func sendWelcomeEmail(context.Context, int) error { return nil }

// The expiry sweep: MySQL has no TTL, so a process deletes the records
// past their window now and then, a thousand rows per statement.
// (Compiled, not run.)
func ExampleStore_Sweep() {
	ctx := context.Background()
	db, err := sql.Open("mysql", os.Getenv("MYSQL_DSN"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	s := mysqlstore.New(db, "idempotency")
	for range time.Tick(time.Hour) {
		n, err := s.Sweep(ctx, time.Now(), 100_000)
		if err != nil {
			log.Print(err)
			continue
		}
		log.Printf("swept %d expired records", n)
	}
}

// The work's transaction under READ COMMITTED: begun with the options
// given, as database/sql's BeginTx. On InnoDB the completion reads the
// record's latest version at every level, so a renewal of the lock while
// the work runs does not refuse it. (Compiled, not run.)
func ExampleBeginTx() {
	ctx := context.Background()
	db, err := sql.Open("mysql", os.Getenv("MYSQL_DSN"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	p, err := sqsonce.New(sqsonce.Config{Store: mysqlstore.New(db, "idempotency"), KeyPrefix: "stock", LockTimeout: time.Minute})
	if err != nil {
		log.Fatal(err)
	}
	err = p.Do(ctx, "reserve-1234", func(ctx context.Context) error {
		tx, err := mysqlstore.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
		if err != nil {
			return err
		}
		var left int
		if err := tx.QueryRowContext(ctx, `SELECT qty FROM stock WHERE sku = ? FOR UPDATE`, "sku-1").Scan(&left); err != nil {
			return err
		}
		if left == 0 {
			return sqsonce.Permanent(errors.New("sku-1 is out of stock"))
		}
		_, err = tx.ExecContext(ctx, `UPDATE stock SET qty = qty - 1 WHERE sku = ?`, "sku-1")
		return err
	})
	if err != nil {
		log.Print(err)
	}
}
