package pgstore_test

import (
	"context"
	"errors"
	"log"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/store/pgstore"
)

// An order written exactly once: the work inserts it through pgstore.Tx,
// and sqsonce commits that insert with the key's completion, in one
// transaction. A delivery that finds the key completed runs nothing; a
// holder that crashed, or lost its lock, committed nothing. The orders
// table is in the same database as the record table. (Compiled, not run:
// it needs a PostgreSQL.)
func ExampleTx() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	if err := pgstore.CreateTable(ctx, pool, "idempotency"); err != nil {
		log.Fatal(err)
	}
	s := pgstore.New(pool, "idempotency")
	p, err := sqsonce.New(sqsonce.Config{Store: s, KeyPrefix: "orders", LockTimeout: time.Minute})
	if err != nil {
		log.Fatal(err)
	}
	if err := p.Check(ctx); err != nil {
		log.Fatal(err) // the table missing or different: says what to run
	}
	err = p.Do(ctx, "order-1234", func(ctx context.Context) error {
		tx, err := pgstore.Tx(ctx)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO orders (id, amount) VALUES ($1, $2)`, "order-1234", 42)
		return err
	})
	if err != nil {
		log.Print(err) // sqsonce.ErrDuplicate: the order was written before
	}
}

// The expiry sweep: PostgreSQL has no TTL, so a process deletes the
// records past their window now and then, a thousand rows per statement.
// (Compiled, not run.)
func ExampleStore_Sweep() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	s := pgstore.New(pool, "idempotency")
	for range time.Tick(time.Hour) {
		n, err := s.Sweep(ctx, time.Now(), 100_000)
		if err != nil {
			log.Print(err)
			continue
		}
		log.Printf("swept %d expired records", n)
	}
}

// The work's transaction under REPEATABLE READ: begun with the options
// given, as pgx's BeginTx. The lock is not renewed while the work runs
// (LockTimeout zero under a deadline: it lasts to the deadline), since a
// renewal changes the record's row after the work's snapshot and the
// completion then fails (not committed; the work runs again). (Compiled,
// not run.)
func ExampleBeginTx() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	p, err := sqsonce.New(sqsonce.Config{Store: pgstore.New(pool, "idempotency"), KeyPrefix: "stock"})
	if err != nil {
		log.Fatal(err)
	}
	err = p.Do(ctx, "reserve-1234", func(ctx context.Context) error {
		tx, err := pgstore.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
		if err != nil {
			return err
		}
		var left int
		if err := tx.QueryRow(ctx, `SELECT left FROM stock WHERE sku = $1`, "sku-1").Scan(&left); err != nil {
			return err
		}
		if left == 0 {
			return sqsonce.Permanent(errors.New("sku-1 is out of stock"))
		}
		_, err = tx.Exec(ctx, `UPDATE stock SET left = left - 1 WHERE sku = $1`, "sku-1")
		return err
	})
	if err != nil {
		log.Print(err)
	}
}
