// Command txorders records each order exactly once, however often it is
// run for the same order id and wherever a run dies: sqsonce's Do runs the
// order's handler under a lock per order id, and the handler's write, an
// order row, commits in one transaction with the lock's completion. On
// DynamoDB the row is a Put the handler adds with dynamostore.Add (the
// store from dynamostore.NewTransactional commits it with the record's
// COMPLETED update in one TransactWriteItems); on PostgreSQL an INSERT
// through pgstore.Tx, and on MySQL or MariaDB one through mysqlstore.Tx
// (the store's transaction, committed with the record's completion). A
// run killed before the commit leaves neither, so the next run writes the
// row; a run whose commit applied leaves both, so the next one finds the
// order done.
//
// With -plain the handler writes the row outside the transaction, as a
// handler must on a store without transactions: a run killed between its
// write and its completion leaves the row, and the next run writes another.
// The example's test shows both.
//
// With -emit QUEUE_URL the handler also emits an OrderAccepted message to
// the next stage's queue with sqsonce.Emit: it commits with the order's
// completion and is sent after it (Config.Sender), with a stable id, the
// sqs-once-emit-id attribute. A run that dies after the commit and before
// the send leaves the order "completed, message pending", and the next run
// for the order sends it before it answers "already recorded": the
// redelivery is the relay. -ship QUEUE_URL is the next stage: it receives
// the queue's messages and records one shipment per message under Do keyed
// on the emit id, so a message sent twice ships once. -emit-inline
// QUEUE_URL is the control: the handler sends the message itself, as a
// handler must without Emit, so a run that dies after the send sends it
// again.
//
//	txorders -store dynamodb -setup                    # create the tables
//	txorders -store dynamodb -order A-1001 -amount 1250
//	txorders -store dynamodb -order A-1001 -count      # prints 1
//	txorders -store dynamodb -order A-1001 -amount 1250 -emit "$QUEUE"
//	txorders -store dynamodb -ship "$QUEUE"            # stage 2
//	txorders -store dynamodb -order A-1001 -count-shipments
//	export MYSQL_DSN='user:password@tcp(host:3306)/shop'
//	txorders -store mysql -setup
//	txorders -store mysql -order A-1001 -amount 1250
//
// DynamoDB and SQS are reached with the SDK's default configuration
// (AWS_REGION, credentials, AWS_ENDPOINT_URL for a local emulator);
// PostgreSQL with the connection string in -database (default:
// DATABASE_URL); MySQL and MariaDB with the go-sql-driver/mysql DSN in
// -database (user:password@tcp(host:port)/database; default: MYSQL_DSN).
package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	_ "github.com/go-sql-driver/mysql" // database/sql's "mysql" driver
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
	"github.com/sqs-once/sqs-once/sqsonce/store/mysqlstore"
	"github.com/sqs-once/sqs-once/sqsonce/store/pgstore"
	"github.com/sqs-once/sqs-once/sqsonce/targets"
)

// Exit statuses.
const (
	exitOK       = 0 // the order recorded (and its message sent), by this run or an earlier one
	exitFailed   = 1 // the handler or its commit failed, or its message is not sent yet: run again
	exitUsage    = 2
	exitLockLost = 3 // the lock was taken over while the handler ran: nothing of this run was committed
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// options are the command line's.
type options struct {
	store, records, orders, database string
	shipments                        string
	order                            string
	amount                           int64
	lockTimeout, wait                time.Duration
	plain, hold, setup, count, state bool
	// receipt, leak and fail are the transaction's edges: a receipt
	// written under a nested Do on a store without transactions, a write
	// by a goroutine after the handler returned, and a handler failing
	// after its writes.
	receipt, leak, fail bool
	// emit and emitInline are the queue URL the handler sends
	// OrderAccepted to, with sqsonce.Emit or itself; ship the queue stage
	// 2 receives from.
	emit, emitInline, ship string
	countShipments         bool
}

func parse(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("txorders", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.store, "store", "dynamodb", `"dynamodb", "postgres" or "mysql" (MySQL or MariaDB)`)
	fs.StringVar(&o.records, "records", "txorders_records", "the idempotency records' table")
	fs.StringVar(&o.orders, "orders", "txorders_orders", "the orders' table")
	fs.StringVar(&o.shipments, "shipments", "txorders_shipments", "the shipments' table (stage 2, -ship)")
	fs.StringVar(&o.database, "database", "", "-store postgres: the PostgreSQL connection string (default: $DATABASE_URL); -store mysql: the go-sql-driver/mysql DSN, user:password@tcp(host:port)/database (default: $MYSQL_DSN)")
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
	fs.StringVar(&o.emit, "emit", "", "the queue URL of stage 2: the handler emits OrderAccepted there with sqsonce.Emit (committed with the order, sent after the commit, with a stable emit id)")
	fs.StringVar(&o.emitInline, "emit-inline", "", "the control: the handler sends OrderAccepted to this queue URL itself, inside the handler, as a handler must without Emit")
	fs.StringVar(&o.ship, "ship", "", "stage 2: receive the messages of this queue URL until it is empty, record one shipment per message under Do keyed on its emit id, delete it, and exit")
	fs.BoolVar(&o.countShipments, "count-shipments", false, "print the number of shipment rows of -order, and exit")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if env := databaseEnv(o.store); o.database == "" && env != "" {
		o.database = os.Getenv(env)
	}
	switch {
	case o.store != "dynamodb" && sqlBackend(o.store) == nil:
		return o, fmt.Errorf(`-store %q: "dynamodb", "postgres" or "mysql"`, o.store)
	case o.order == "" && !o.setup && o.ship == "":
		return o, errors.New("-order: required")
	case o.emit != "" && o.emitInline != "":
		return o, errors.New("-emit and -emit-inline: one or the other")
	}
	return o, nil
}

// databaseEnv is the environment variable -database defaults to on
// -store store: a connection string carries a password, better kept off
// the command line (which ps shows).
func databaseEnv(store string) string {
	switch store {
	case "postgres":
		return "DATABASE_URL"
	case "mysql":
		return "MYSQL_DSN"
	}
	return ""
}

// sqlBackend opens the backend of -store store on a SQL database (the
// records' table and the business tables in the one database -database
// names), or is nil when store is not on one.
func sqlBackend(store string) func(context.Context, options) (*backend, func(), error) {
	switch store {
	case "postgres":
		return newPostgres
	case "mysql":
		return newMySQL
	}
	return nil
}

// needsSQS says whether the run sends or receives messages.
func (o options) needsSQS() bool { return o.emit != "" || o.emitInline != "" || o.ship != "" }

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
	case o.count, o.countShipments:
		table := o.orders
		if o.countShipments {
			table = o.shipments
		}
		n, err := b.count(ctx, table, o.order)
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
			// The messages its completion committed and nobody has
			// marked sent yet: the next run for the order sends them.
			if pending, err := sqsonce.Pending(rec); err != nil {
				status += fmt.Sprintf(", messages unreadable: %v", err)
			} else if len(pending) > 0 {
				status += fmt.Sprintf(", %d message(s) pending", len(pending))
			}
			fmt.Fprintf(stdout, "%s: %s\n", prefix, status)
		}
		return exitOK
	case o.ship != "":
		return ship(ctx, b, o, stdout, stderr)
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
		// Set whenever there is one, not only with -emit: a run that
		// finds the order completed with its message pending sends it.
		Sender: b.sender,
		Logger: slog.New(slog.NewTextHandler(stderr, nil)),
	})
	if err != nil {
		fmt.Fprintln(stderr, "txorders:", err)
		return exitUsage
	}
	if o.emitInline != "" && b.sqs == nil {
		fmt.Fprintln(stderr, "txorders: -emit-inline: no SQS client")
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
		write := func(ctx context.Context, row orderRow) error { return b.add(ctx, o.orders, row) }
		if o.plain {
			write = func(ctx context.Context, row orderRow) error { return b.write(ctx, o.orders, row) }
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
		if o.emit != "" {
			// Staged, not sent: it commits with the order row and the
			// completion, and Do sends it once they are committed.
			if err := sqsonce.Emit(ctx, accepted(row).message(o.emit)); err != nil {
				return err
			}
		}
		if o.emitInline != "" {
			// Sent now, before the commit: a run that dies after this
			// line sends it again on the retry.
			if err := accepted(row).send(ctx, b.sqs, o.emitInline); err != nil {
				return fmt.Errorf("send OrderAccepted: %w", err)
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
	case errors.Is(err, sqsonce.ErrEmitPending):
		fmt.Fprintf(stdout, "order %s: recorded, its message not sent yet (run again to send it): %v\n", o.order, err)
		return exitFailed
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
// INSERT with a generated key or a counter's increment would be. A
// shipment, stage 2's effect, is the same row in the shipments table.
type orderRow struct {
	OrderID     string
	AmountCents int64
	Run         string
}

func newRunID() string { return rand.Text() }

// orderAccepted is the message stage 1 sends stage 2 for an order.
type orderAccepted struct {
	Type        string `json:"type"`
	OrderID     string `json:"orderId"`
	AmountCents int64  `json:"amountCents"`
}

func accepted(row orderRow) orderAccepted {
	return orderAccepted{Type: "OrderAccepted", OrderID: row.OrderID, AmountCents: row.AmountCents}
}

func (m orderAccepted) body() string {
	b, _ := json.Marshal(m) // strings and an integer: it cannot fail
	return string(b)
}

// message is m as sqsonce.Emit stages it for the queue at queueURL.
func (m orderAccepted) message(queueURL string) sqsonce.Message {
	return sqsonce.Message{To: "sqs:" + queueURL, Body: m.body(), Attributes: map[string]string{"type": m.Type}}
}

// send sends m to the queue at queueURL now, as a handler without Emit
// does: the message carries no emit id.
func (m orderAccepted) send(ctx context.Context, api sqsAPI, queueURL string) error {
	_, err := api.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl:    aws.String(queueURL),
		MessageBody: aws.String(m.body()),
		MessageAttributes: map[string]sqstypes.MessageAttributeValue{
			"type": {DataType: aws.String("String"), StringValue: aws.String(m.Type)},
		},
	})
	return err
}

// sqsAPI is the SQS calls the control's send and stage 2 make.
type sqsAPI interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
}

// shipmentKey is the idempotency key of a message at stage 2: its emit id,
// the same on every send of one emitted message. A message without one
// (the control's, sent by the handler itself) has nothing stable to key
// on but its SQS message id, new on every send.
func shipmentKey(m sqstypes.Message) string {
	if a, ok := m.MessageAttributes[sqsonce.AttrEmitID]; ok && aws.ToString(a.StringValue) != "" {
		return aws.ToString(a.StringValue)
	}
	return "message-id:" + aws.ToString(m.MessageId)
}

// ship is stage 2: it receives o.ship's messages until a receive finds
// none, and for each records one shipment row under Do keyed on the
// message's shipmentKey (in the lock's transaction, as stage 1 records its
// order), then deletes the message: a copy of a message already shipped is
// a duplicate, deleted without a second row. A message whose shipment
// fails is left for SQS to deliver again.
func ship(ctx context.Context, b *backend, o options, stdout, stderr io.Writer) int {
	if b.sqs == nil {
		fmt.Fprintln(stderr, "txorders: -ship: no SQS client")
		return exitUsage
	}
	p, err := sqsonce.New(sqsonce.Config{
		Store:          b.store,
		KeyPrefix:      "txorders-shipments",
		LockTimeout:    o.lockTimeout,
		WaitInProgress: o.wait,
		Logger:         slog.New(slog.NewTextHandler(stderr, nil)),
	})
	if err != nil {
		fmt.Fprintln(stderr, "txorders:", err)
		return exitUsage
	}
	var received, shipped, dropped, failed int
	for {
		out, err := b.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl:              aws.String(o.ship),
			MaxNumberOfMessages:   10,
			WaitTimeSeconds:       1,
			MessageAttributeNames: []string{"All"},
		})
		if err != nil {
			fmt.Fprintln(stderr, "txorders: -ship: receive:", err)
			return exitFailed
		}
		if len(out.Messages) == 0 {
			break
		}
		for _, m := range out.Messages {
			received++
			key := shipmentKey(m)
			var msg orderAccepted
			if err := json.Unmarshal([]byte(aws.ToString(m.Body)), &msg); err != nil || msg.OrderID == "" {
				failed++
				fmt.Fprintf(stdout, "message %s: not an order's message, left in the queue: %q\n", aws.ToString(m.MessageId), aws.ToString(m.Body))
				continue
			}
			row := orderRow{OrderID: msg.OrderID, AmountCents: msg.AmountCents, Run: newRunID()}
			err := p.Do(ctx, key, func(ctx context.Context) error { return b.add(ctx, o.shipments, row) })
			switch {
			case err == nil:
				shipped++
				fmt.Fprintf(stdout, "message %s (key %s): order %s shipped by run %s\n", aws.ToString(m.MessageId), key, msg.OrderID, row.Run)
			case errors.Is(err, sqsonce.ErrDuplicate):
				dropped++
				fmt.Fprintf(stdout, "message %s (key %s): order %s already shipped, a copy dropped\n", aws.ToString(m.MessageId), key, msg.OrderID)
			default:
				failed++
				fmt.Fprintf(stdout, "message %s (key %s): order %s not shipped, left in the queue: %v\n", aws.ToString(m.MessageId), key, msg.OrderID, err)
				continue
			}
			if _, err := b.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(o.ship), ReceiptHandle: m.ReceiptHandle}); err != nil {
				// Delivered again later: a duplicate by then.
				fmt.Fprintf(stderr, "txorders: -ship: delete message %s: %v\n", aws.ToString(m.MessageId), err)
			}
		}
	}
	fmt.Fprintf(stdout, "received %d messages: %d shipped, %d duplicates dropped, %d failed\n", received, shipped, dropped, failed)
	if failed > 0 {
		return exitFailed
	}
	return exitOK
}

// backend is one store, its tables, and the SQS clients.
type backend struct {
	store store.Store
	// add writes a row to a table in the work's transaction; write
	// outside it.
	add, write func(ctx context.Context, table string, row orderRow) error
	setup      func(ctx context.Context) error
	count      func(ctx context.Context, table, orderID string) (int, error)
	// sqs sends the control's messages and receives stage 2's; sender
	// sends the emitted ones (Config.Sender). Nil on PostgreSQL and MySQL
	// unless a flag needs SQS.
	sqs    sqsAPI
	sender sqsonce.Sender
}

func newBackend(ctx context.Context, o options) (*backend, func(), error) {
	onSQL := sqlBackend(o.store)
	if onSQL != nil && !o.needsSQS() {
		return onSQL(ctx, o)
	}
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("load the AWS configuration: %w", err)
	}
	b, closeBackend := newDynamo(dynamodb.NewFromConfig(awsCfg), o), func() {}
	if onSQL != nil {
		if b, closeBackend, err = onSQL(ctx, o); err != nil {
			return nil, nil, err
		}
	}
	b.sqs, b.sender = sqs.NewFromConfig(awsCfg), targets.NewSender(awsCfg)
	return b, closeBackend, nil
}

// newDynamo is the DynamoDB backend: the transactional store, and the
// order and shipment rows as items keyed by order id and run.
func newDynamo(client *dynamodb.Client, o options) *backend {
	item := func(row orderRow) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{
			"orderId":     &types.AttributeValueMemberS{Value: row.OrderID},
			"run":         &types.AttributeValueMemberS{Value: row.Run},
			"amountCents": &types.AttributeValueMemberN{Value: strconv.FormatInt(row.AmountCents, 10)},
		}
	}
	rowsTable := func(name string) *dynamodb.CreateTableInput {
		return &dynamodb.CreateTableInput{
			TableName: aws.String(name),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String("orderId"), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String("run"), KeyType: types.KeyTypeRange},
			},
			AttributeDefinitions: []types.AttributeDefinition{
				{AttributeName: aws.String("orderId"), AttributeType: types.ScalarAttributeTypeS},
				{AttributeName: aws.String("run"), AttributeType: types.ScalarAttributeTypeS},
			},
			BillingMode: types.BillingModePayPerRequest,
		}
	}
	return &backend{
		store: dynamostore.NewTransactional(client, o.records),
		add: func(ctx context.Context, table string, row orderRow) error {
			return dynamostore.Add(ctx, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(table), Item: item(row)}})
		},
		write: func(ctx context.Context, table string, row orderRow) error {
			_, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item(row)})
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
				rowsTable(o.orders),
				rowsTable(o.shipments),
			} {
				_, err := client.CreateTable(ctx, t)
				var exists *types.ResourceInUseException
				if err != nil && !errors.As(err, &exists) {
					return err
				}
			}
			return nil
		},
		count: func(ctx context.Context, table, orderID string) (int, error) {
			out, err := client.Query(ctx, &dynamodb.QueryInput{
				TableName:                 aws.String(table),
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
// and shipment rows as rows of their tables, in the same database.
func newPostgres(ctx context.Context, o options) (*backend, func(), error) {
	pool, err := pgxpool.New(ctx, o.database)
	if err != nil {
		return nil, nil, fmt.Errorf("-database: %w", err)
	}
	insert := func(table string) string {
		return "INSERT INTO " + pgx.Identifier{table}.Sanitize() + " (order_id, run, amount_cents) VALUES ($1, $2, $3)"
	}
	b := &backend{
		store: pgstore.New(pool, o.records),
		add: func(ctx context.Context, table string, row orderRow) error {
			tx, err := pgstore.Tx(ctx)
			if err != nil {
				return err
			}
			_, err = tx.Exec(ctx, insert(table), row.OrderID, row.Run, row.AmountCents)
			return err
		},
		write: func(ctx context.Context, table string, row orderRow) error {
			_, err := pool.Exec(ctx, insert(table), row.OrderID, row.Run, row.AmountCents)
			return err
		},
		setup: func(ctx context.Context) error {
			if err := pgstore.CreateTable(ctx, pool, o.records); err != nil {
				return err
			}
			for _, table := range []string{o.orders, o.shipments} {
				if _, err := pool.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+pgx.Identifier{table}.Sanitize()+" (order_id text NOT NULL, run text NOT NULL, amount_cents bigint NOT NULL, PRIMARY KEY (order_id, run))"); err != nil {
					return err
				}
			}
			return nil
		},
		count: func(ctx context.Context, table, orderID string) (int, error) {
			var n int
			err := pool.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{table}.Sanitize()+" WHERE order_id = $1", orderID).Scan(&n)
			return n, err
		},
	}
	return b, pool.Close, nil
}

// newMySQL is the MySQL (or MariaDB) backend: mysqlstore on a *sql.DB, and
// the order and shipment rows as rows of their tables, in the same
// database server.
func newMySQL(_ context.Context, o options) (*backend, func(), error) {
	db, err := sql.Open("mysql", o.database)
	if err != nil {
		return nil, nil, fmt.Errorf("-database: %w", err)
	}
	insert := func(table string) string {
		return "INSERT INTO " + mysqlIdent(table) + " (order_id, run, amount_cents) VALUES (?, ?, ?)"
	}
	b := &backend{
		store: mysqlstore.New(db, o.records),
		add: func(ctx context.Context, table string, row orderRow) error {
			tx, err := mysqlstore.Tx(ctx)
			if err != nil {
				return err
			}
			_, err = tx.ExecContext(ctx, insert(table), row.OrderID, row.Run, row.AmountCents)
			return err
		},
		write: func(ctx context.Context, table string, row orderRow) error {
			_, err := db.ExecContext(ctx, insert(table), row.OrderID, row.Run, row.AmountCents)
			return err
		},
		setup: func(ctx context.Context) error {
			if err := mysqlstore.CreateTable(ctx, db, o.records); err != nil {
				return err
			}
			for _, table := range []string{o.orders, o.shipments} {
				// InnoDB: the engine with transactions, which the order
				// row commits in; utf8mb4_bin: order ids compared byte
				// for byte, as the store compares its keys.
				if _, err := db.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS "+mysqlIdent(table)+" (order_id VARCHAR(255) NOT NULL, run VARCHAR(64) NOT NULL, amount_cents BIGINT NOT NULL, PRIMARY KEY (order_id, run)) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin"); err != nil {
					return err
				}
			}
			return nil
		},
		count: func(ctx context.Context, table, orderID string) (int, error) {
			var n int
			err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+mysqlIdent(table)+" WHERE order_id = ?", orderID).Scan(&n)
			return n, err
		},
	}
	return b, func() { db.Close() }, nil
}

// mysqlIdent is a table name as a MySQL identifier, in backquotes, a
// backquote in it doubled.
func mysqlIdent(name string) string {
	return "`" + strings.ReplaceAll(name, "`", "``") + "`"
}
