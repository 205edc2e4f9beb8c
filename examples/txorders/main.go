// Command txorders records each order exactly once, however often it is
// run for the same order id and wherever a run dies: sqsonce's Do runs the
// order's handler under a lock per order id, and the handler's write, an
// order row, commits in one transaction with the lock's completion. On
// DynamoDB the row is a Put the handler adds with dynamostore.Add (the
// store from dynamostore.NewTransactional commits it with the record's
// COMPLETED update in one TransactWriteItems); on PostgreSQL an INSERT
// through pgstore.Tx (the store's transaction, committed with the record's
// completion). A run killed before the commit leaves neither, so the next
// run writes the row; a run whose commit applied leaves both, so the next
// one finds the order done.
//
// With -plain the handler writes the row outside the transaction, as a
// handler must on a store without transactions: a run killed between its
// write and its completion leaves the row, and the next run writes another.
// The example's test shows both.
//
//	txorders -store dynamodb -setup                    # create the tables
//	txorders -store dynamodb -order A-1001 -amount 1250
//	txorders -store dynamodb -order A-1001 -count      # prints 1
//
// DynamoDB is reached with the SDK's default configuration (AWS_REGION,
// credentials, AWS_ENDPOINT_URL for a local emulator); PostgreSQL with the
// connection string in -database (default: DATABASE_URL).
package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
	"github.com/sqs-once/sqs-once/sqsonce/store/pgstore"
)

// Exit statuses.
const (
	exitOK       = 0 // the order recorded, by this run or an earlier one
	exitFailed   = 1 // the handler or its commit failed: run again
	exitUsage    = 2
	exitLockLost = 3 // the lock was taken over while the handler ran: nothing of this run was committed
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// options are the command line's.
type options struct {
	store, records, orders, database string
	order                            string
	amount                           int64
	lockTimeout, wait                time.Duration
	plain, hold, setup, count, state bool
	// receipt, leak and fail are the transaction's edges: a receipt
	// written under a nested Do on a store without transactions, a write
	// by a goroutine after the handler returned, and a handler failing
	// after its writes.
	receipt, leak, fail bool
}

func parse(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("txorders", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.store, "store", "dynamodb", `"dynamodb" or "postgres"`)
	fs.StringVar(&o.records, "records", "txorders_records", "the idempotency records' table")
	fs.StringVar(&o.orders, "orders", "txorders_orders", "the orders' table")
	fs.StringVar(&o.database, "database", os.Getenv("DATABASE_URL"), "PostgreSQL connection string (-store postgres)")
	fs.StringVar(&o.order, "order", "", "the order id: the idempotency key")
	fs.Int64Var(&o.amount, "amount", 0, "the order's amount in cents")
	fs.DurationVar(&o.lockTimeout, "lock-timeout", 30*time.Second, "how long the lock lasts unless renewed (renewed every third of it while the handler runs)")
	fs.DurationVar(&o.wait, "wait", 0, "how long to wait for another holder of the order's lock (its lock expiring or its order done) before giving up")
	fs.BoolVar(&o.plain, "plain", false, "write the order row outside the transaction, as on a store without transactions")
	fs.BoolVar(&o.hold, "hold", false, `after writing the order row, print "holding" and wait for a line on stdin before returning: a handler its test pauses`)
	fs.BoolVar(&o.setup, "setup", false, "create the tables if they do not exist, and exit")
	fs.BoolVar(&o.count, "count", false, "print the number of rows of -order in the orders table, and exit")
	fs.BoolVar(&o.state, "status", false, "print the status of -order's record and of its receipt's (none, PROCESSING, COMPLETED, RELEASED), and exit")
	fs.BoolVar(&o.receipt, "receipt", false, `also write a receipt row (order "<order>/receipt") under a nested Do on a second processor whose store is an instrumented wrapper with no transactions: the receipt's write is refused, since it would join the order's transaction and be lost if that rolled back after the receipt's key completed`)
	fs.BoolVar(&o.leak, "leak", false, "write a second order row from a goroutine after the handler returned, and say whether the write was refused (it must be: the transaction has ended)")
	fs.BoolVar(&o.fail, "fail", false, "make the handler fail after its writes (a later step failing): nothing of it commits")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case o.store != "dynamodb" && o.store != "postgres":
		return o, fmt.Errorf(`-store %q: "dynamodb" or "postgres"`, o.store)
	case o.order == "" && !o.setup:
		return o, errors.New("-order: required")
	}
	return o, nil
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	o, err := parse(args, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "txorders:", err)
		return exitUsage
	}
	b, closeBackend, err := newBackend(ctx, o)
	if err != nil {
		fmt.Fprintln(stderr, "txorders:", err)
		return exitUsage
	}
	defer closeBackend()
	switch {
	case o.setup:
		if err := b.setup(ctx); err != nil {
			fmt.Fprintln(stderr, "txorders: create the tables:", err)
			return exitUsage
		}
		return exitOK
	case o.count:
		n, err := b.count(ctx, o.order)
		if err != nil {
			fmt.Fprintln(stderr, "txorders: count:", err)
			return exitUsage
		}
		fmt.Fprintln(stdout, n)
		return exitOK
	case o.state:
		for _, prefix := range []string{"txorders", "txorders-receipts"} {
			status := "none"
			rec, err := b.store.Read(ctx, store.RecordID(prefix, o.order))
			switch {
			case err == nil:
				status = string(rec.Status)
			case !errors.Is(err, store.ErrNotFound):
				fmt.Fprintln(stderr, "txorders: status:", err)
				return exitUsage
			}
			fmt.Fprintf(stdout, "%s: %s\n", prefix, status)
		}
		return exitOK
	}
	return process(ctx, b, o, stdin, stdout, stderr)
}

// process runs the order's handler under sqsonce's lock on b's store and
// says how it ended.
func process(ctx context.Context, b *backend, o options, stdin io.Reader, stdout, stderr io.Writer) int {
	p, err := sqsonce.New(sqsonce.Config{
		Store:          b.store,
		KeyPrefix:      "txorders",
		LockTimeout:    o.lockTimeout,
		WaitInProgress: o.wait,
		Logger:         slog.New(slog.NewTextHandler(stderr, nil)),
	})
	if err != nil {
		fmt.Fprintln(stderr, "txorders:", err)
		return exitUsage
	}
	receipts, err := sqsonce.New(sqsonce.Config{
		Store:     instrumented{b.store},
		KeyPrefix: "txorders-receipts",
		Logger:    slog.New(slog.NewTextHandler(stderr, nil)),
	})
	if err != nil {
		fmt.Fprintln(stderr, "txorders:", err)
		return exitUsage
	}
	row := orderRow{OrderID: o.order, AmountCents: o.amount, Run: newRunID()}
	returned := make(chan struct{})
	late := make(chan error, 1)
	err = p.Do(ctx, o.order, func(ctx context.Context) error {
		write := b.addOrder
		if o.plain {
			write = b.writeOrder
		}
		if err := write(ctx, row); err != nil {
			return err
		}
		if o.receipt {
			receipt := orderRow{OrderID: o.order + "/receipt", AmountCents: o.amount, Run: row.Run}
			if err := receipts.Do(ctx, o.order, func(ctx context.Context) error { return write(ctx, receipt) }); err != nil {
				return fmt.Errorf("receipt: %w", err)
			}
		}
		if o.leak {
			go func() {
				<-returned
				late <- write(ctx, orderRow{OrderID: o.order, AmountCents: o.amount, Run: row.Run + "-late"})
			}()
		}
		if o.hold {
			if err := hold(ctx, stdin, stdout); err != nil {
				return err
			}
		}
		if o.fail {
			return errors.New("a later step of the handler failed")
		}
		return nil
	})
	close(returned)
	if o.leak {
		if lerr := <-late; lerr != nil {
			fmt.Fprintf(stdout, "late write refused: %v\n", lerr)
		} else {
			fmt.Fprintln(stdout, "late write accepted")
		}
	}
	switch {
	case err == nil:
		fmt.Fprintf(stdout, "order %s: recorded by run %s\n", o.order, row.Run)
		return exitOK
	case errors.Is(err, sqsonce.ErrDuplicate):
		fmt.Fprintf(stdout, "order %s: already recorded\n", o.order)
		return exitOK
	case errors.Is(err, sqsonce.ErrLockLost):
		fmt.Fprintf(stdout, "order %s: lock lost, nothing of run %s committed: %v\n", o.order, row.Run, err)
		return exitLockLost
	}
	fmt.Fprintf(stdout, "order %s: not recorded: %v\n", o.order, err)
	return exitFailed
}

// instrumented is a store wrapped as a program wraps one to count or log
// its calls: it has store.Store's methods only, so its locks have no
// transaction (it is no store.Transactor), and a work under them cannot
// write transactionally, even when it runs inside the work of another
// lock that can.
type instrumented struct{ store.Store }

// hold says the handler has written and waits for a line on stdin (or the
// end of ctx: a renewal that found the lock lost ends it).
func hold(ctx context.Context, stdin io.Reader, stdout io.Writer) error {
	fmt.Fprintln(stdout, "holding")
	line := make(chan error, 1)
	go func() {
		_, err := fmt.Fscanln(stdin)
		line <- err
	}()
	select {
	case <-line:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// orderRow is the handler's effect: one row per run of the handler (Run
// tells them apart), so a second run's row is a second row, as a charge, an
// INSERT with a generated key or a counter's increment would be.
type orderRow struct {
	OrderID     string
	AmountCents int64
	Run         string
}

func newRunID() string { return rand.Text() }

// backend is one store and its orders table.
type backend struct {
	store store.Store
	// addOrder writes the row in the work's transaction; writeOrder
	// outside it.
	addOrder, writeOrder func(ctx context.Context, row orderRow) error
	setup                func(ctx context.Context) error
	count                func(ctx context.Context, orderID string) (int, error)
}

func newBackend(ctx context.Context, o options) (*backend, func(), error) {
	if o.store == "postgres" {
		return newPostgres(ctx, o)
	}
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("load the AWS configuration: %w", err)
	}
	return newDynamo(dynamodb.NewFromConfig(awsCfg), o), func() {}, nil
}

// newDynamo is the DynamoDB backend: the transactional store, and the
// order row as an item keyed by order id and run.
func newDynamo(client *dynamodb.Client, o options) *backend {
	item := func(row orderRow) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{
			"orderId":     &types.AttributeValueMemberS{Value: row.OrderID},
			"run":         &types.AttributeValueMemberS{Value: row.Run},
			"amountCents": &types.AttributeValueMemberN{Value: strconv.FormatInt(row.AmountCents, 10)},
		}
	}
	return &backend{
		store: dynamostore.NewTransactional(client, o.records),
		addOrder: func(ctx context.Context, row orderRow) error {
			return dynamostore.Add(ctx, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(o.orders), Item: item(row)}})
		},
		writeOrder: func(ctx context.Context, row orderRow) error {
			_, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(o.orders), Item: item(row)})
			return err
		},
		setup: func(ctx context.Context) error {
			for _, t := range []*dynamodb.CreateTableInput{
				{
					TableName:            aws.String(o.records),
					KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(dynamostore.AttrID), KeyType: types.KeyTypeHash}},
					AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(dynamostore.AttrID), AttributeType: types.ScalarAttributeTypeS}},
					BillingMode:          types.BillingModePayPerRequest,
				},
				{
					TableName: aws.String(o.orders),
					KeySchema: []types.KeySchemaElement{
						{AttributeName: aws.String("orderId"), KeyType: types.KeyTypeHash},
						{AttributeName: aws.String("run"), KeyType: types.KeyTypeRange},
					},
					AttributeDefinitions: []types.AttributeDefinition{
						{AttributeName: aws.String("orderId"), AttributeType: types.ScalarAttributeTypeS},
						{AttributeName: aws.String("run"), AttributeType: types.ScalarAttributeTypeS},
					},
					BillingMode: types.BillingModePayPerRequest,
				},
			} {
				_, err := client.CreateTable(ctx, t)
				var exists *types.ResourceInUseException
				if err != nil && !errors.As(err, &exists) {
					return err
				}
			}
			return nil
		},
		count: func(ctx context.Context, orderID string) (int, error) {
			out, err := client.Query(ctx, &dynamodb.QueryInput{
				TableName:                 aws.String(o.orders),
				KeyConditionExpression:    aws.String("orderId = :o"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":o": &types.AttributeValueMemberS{Value: orderID}},
				Select:                    types.SelectCount,
				ConsistentRead:            aws.Bool(true),
			})
			if err != nil {
				return 0, err
			}
			return int(out.Count), nil
		},
	}
}

// newPostgres is the PostgreSQL backend: pgstore on a pool, and the order
// row as a row of the orders table, in the same database.
func newPostgres(ctx context.Context, o options) (*backend, func(), error) {
	pool, err := pgxpool.New(ctx, o.database)
	if err != nil {
		return nil, nil, fmt.Errorf("-database: %w", err)
	}
	orders := pgx.Identifier{o.orders}.Sanitize()
	insert := "INSERT INTO " + orders + " (order_id, run, amount_cents) VALUES ($1, $2, $3)"
	b := &backend{
		store: pgstore.New(pool, o.records),
		addOrder: func(ctx context.Context, row orderRow) error {
			tx, err := pgstore.Tx(ctx)
			if err != nil {
				return err
			}
			_, err = tx.Exec(ctx, insert, row.OrderID, row.Run, row.AmountCents)
			return err
		},
		writeOrder: func(ctx context.Context, row orderRow) error {
			_, err := pool.Exec(ctx, insert, row.OrderID, row.Run, row.AmountCents)
			return err
		},
		setup: func(ctx context.Context) error {
			if err := pgstore.CreateTable(ctx, pool, o.records); err != nil {
				return err
			}
			_, err := pool.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+orders+" (order_id text NOT NULL, run text NOT NULL, amount_cents bigint NOT NULL, PRIMARY KEY (order_id, run))")
			return err
		},
		count: func(ctx context.Context, orderID string) (int, error) {
			var n int
			err := pool.QueryRow(ctx, "SELECT count(*) FROM "+orders+" WHERE order_id = $1", orderID).Scan(&n)
			return n, err
		},
	}
	return b, pool.Close, nil
}
