package motoserver

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// DynamoWriter is the set of conditional writes the idempotency store makes.
type DynamoWriter interface {
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
}

// DynamoTableWriter is a DynamoWriter that can also describe a table, which
// SerializeWrites needs to learn which attributes of a PutItem's Item are its
// primary key. *dynamodb.Client is one.
type DynamoTableWriter interface {
	DynamoWriter
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
}

var _ DynamoTableWriter = (*dynamodb.Client)(nil)

// SerializeWrites makes moto's conditional writes atomic per item, as
// DynamoDB's are. moto_server serves requests on several threads and checks a
// write's condition and applies the write without a lock between the two, so
// two racing writers of one item can both pass a condition that DynamoDB
// would let only one pass. The wrapper lets one write at a time reach moto
// for each item (table and primary key) and lets writes to different items
// run concurrently, as they do in DynamoDB, so that tests and the local demo
// keep the parallelism they race on. Every condition is still evaluated by
// moto; the wrapper only stops two writes of one item from interleaving.
//
// A table's key schema is read with DescribeTable the first time the table is
// written, and again after a write fails as if the table had changed. A write
// waiting for its item's turn gives up when its context ends. Use it for
// anything that races writers against moto_server, never against AWS.
func SerializeWrites(api DynamoTableWriter) DynamoWriter {
	return serializeWith(api, &itemLocks{held: map[string]*itemLock{}})
}

func serializeWith(api DynamoTableWriter, locks locker) *serialized {
	return &serialized{api: api, locks: locks, schemas: map[string]tableSchema{}}
}

// locker hands out the right to write one item.
type locker interface {
	lock(ctx context.Context, key string) (unlock func(), err error)
}

type serialized struct {
	api   DynamoTableWriter
	locks locker

	mu      sync.Mutex
	schemas map[string]tableSchema // by the TableName callers pass
	// tables are the tables' locks, by canonical name: a write holds its
	// table's shared, a TransactWriteItems each of its tables' exclusive.
	tables map[string]*sync.RWMutex
}

// table is the lock of the table canonically named name.
func (s *serialized) table(name string) *sync.RWMutex {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tables == nil {
		s.tables = map[string]*sync.RWMutex{}
	}
	l := s.tables[name]
	if l == nil {
		l = new(sync.RWMutex)
		s.tables[name] = l
	}
	return l
}

// tableSchema is what names an item of a table: its canonical name (callers
// may pass a name or an ARN) and its key attributes.
type tableSchema struct {
	name string
	keys []string
}

func (s *serialized) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return withItemLock(ctx, s, in.TableName, in.Item, func() (*dynamodb.PutItemOutput, error) { return s.api.PutItem(ctx, in, o...) })
}

func (s *serialized) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return withItemLock(ctx, s, in.TableName, in.Key, func() (*dynamodb.UpdateItemOutput, error) { return s.api.UpdateItem(ctx, in, o...) })
}

func (s *serialized) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return withItemLock(ctx, s, in.TableName, in.Key, func() (*dynamodb.DeleteItemOutput, error) { return s.api.DeleteItem(ctx, in, o...) })
}

// withItemLock runs write while holding the lock of the item that attrs (an
// Item or a Key) names in table.
func withItemLock[T any](ctx context.Context, s *serialized, table *string, attrs map[string]types.AttributeValue, write func() (T, error)) (T, error) {
	var zero T
	schema, err := s.schema(ctx, aws.ToString(table))
	if err != nil {
		return zero, err
	}
	unlock, err := s.locks.lock(ctx, itemKey(schema, attrs))
	if err != nil {
		return zero, err
	}
	defer unlock()
	tl := s.table(schema.name)
	tl.RLock()
	defer tl.RUnlock()
	out, err := write()
	if tableMayHaveChanged(err) {
		s.forget(aws.ToString(table))
	}
	return out, err
}

// schema is table's key schema, described once and then cached.
func (s *serialized) schema(ctx context.Context, table string) (tableSchema, error) {
	s.mu.Lock()
	ts, ok := s.schemas[table]
	s.mu.Unlock()
	if ok {
		return ts, nil
	}
	// Racing first writers may each describe the table; that is harmless,
	// and holding s.mu across a call to moto would serialize every table.
	out, err := s.api.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		return tableSchema{}, fmt.Errorf("motoserver: learn the key of table %s: %w", table, err)
	}
	if out.Table == nil || len(out.Table.KeySchema) == 0 {
		return tableSchema{}, fmt.Errorf("motoserver: table %s has no key schema", table)
	}
	ts = tableSchema{name: aws.ToString(out.Table.TableName)}
	if ts.name == "" {
		ts.name = table
	}
	for _, k := range out.Table.KeySchema {
		ts.keys = append(ts.keys, aws.ToString(k.AttributeName))
	}
	slices.Sort(ts.keys)
	s.mu.Lock()
	s.schemas[table] = ts
	s.mu.Unlock()
	return ts, nil
}

func (s *serialized) forget(table string) {
	s.mu.Lock()
	delete(s.schemas, table)
	s.mu.Unlock()
}

// tableMayHaveChanged reports an error that a table deleted, or recreated
// with another key, would cause; the cached key schema is then not trusted.
func tableMayHaveChanged(err error) bool {
	var notFound *types.ResourceNotFoundException
	var api smithy.APIError
	return errors.As(err, &notFound) || (errors.As(err, &api) && api.ErrorCode() == "ValidationException")
}

// itemKey names one item: the table and the values of its key attributes.
// Values are written with their type and length, so that no two keys share a
// name, and numbers in canonical form, since DynamoDB treats 1, 1.0 and 10E-1
// as one key.
func itemKey(ts tableSchema, attrs map[string]types.AttributeValue) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d:%s", len(ts.name), ts.name)
	for _, k := range ts.keys {
		var v string
		switch a := attrs[k].(type) {
		case *types.AttributeValueMemberS:
			v = "S" + a.Value
		case *types.AttributeValueMemberN:
			v = "N" + canonicalNumber(a.Value)
		case *types.AttributeValueMemberB:
			v = "B" + string(a.Value)
		default:
			// Not a valid key: moto rejects the write, so which lock it
			// holds meanwhile does not matter.
			v = "?"
		}
		fmt.Fprintf(&b, "|%d:%s%d:%s", len(k), k, len(v), v)
	}
	return b.String()
}

func canonicalNumber(s string) string {
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return s
	}
	return r.RatString()
}

// itemLocks is a lock per item key. An entry lives while some write holds or
// waits for it, so the map never holds more than the writes in flight.
type itemLocks struct {
	mu   sync.Mutex
	held map[string]*itemLock
	// contended, when set, is called when a write finds its item locked and
	// is about to wait; tests use it to know that the write is blocked.
	contended func(key string)
}

type itemLock struct {
	// turn holds a token while a write holds the lock; a channel rather than
	// a sync.Mutex so that a waiter can give up when its context ends.
	turn chan struct{}
	refs int
}

func (l *itemLocks) lock(ctx context.Context, key string) (func(), error) {
	l.mu.Lock()
	e := l.held[key]
	if e == nil {
		e = &itemLock{turn: make(chan struct{}, 1)}
		l.held[key] = e
	}
	e.refs++
	l.mu.Unlock()

	select {
	case e.turn <- struct{}{}:
	default:
		if l.contended != nil {
			l.contended(key)
		}
		select {
		case e.turn <- struct{}{}:
		case <-ctx.Done():
			l.release(key, e)
			return nil, ctx.Err()
		}
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			<-e.turn
			l.release(key, e)
		})
	}, nil
}

// release drops one reference, and the entry with the last.
func (l *itemLocks) release(key string, e *itemLock) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e.refs--; e.refs == 0 {
		delete(l.held, key)
	}
}

// size is the number of items locked or waited for.
func (l *itemLocks) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.held)
}

// AtomicClient is a DynamoDB client of moto_server whose writes are atomic
// per item, as DynamoDB's are (SerializeWrites), a TransactWriteItems under
// the locks of all its items; reads and scans go straight to moto. It is what a store under test is given: the one wrapper every
// test on moto uses.
type AtomicClient struct {
	*dynamodb.Client
	writes *serialized
}

// Atomic wraps c, a client of moto_server, in an AtomicClient.
func Atomic(c *dynamodb.Client) AtomicClient {
	return AtomicClient{Client: c, writes: serializeWith(c, &itemLocks{held: map[string]*itemLock{}})}
}

// TransactWriteItems is c's TransactWriteItems holding each of its tables
// alone, taken in one order (so two transactions cannot deadlock): moto
// backs a transaction up by copying each of its tables whole, and a
// transaction that fails puts the copies back, undoing every other write
// to those tables made meanwhile; and it applies a transaction's items one
// by one, without a lock against other writes of the same items.
func (a AtomicClient) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	var tables []string
	for _, w := range in.TransactItems {
		var table *string
		switch {
		case w.Put != nil:
			table = w.Put.TableName
		case w.Update != nil:
			table = w.Update.TableName
		case w.Delete != nil:
			table = w.Delete.TableName
		case w.ConditionCheck != nil:
			table = w.ConditionCheck.TableName
		default:
			continue // moto refuses it
		}
		schema, err := a.writes.schema(ctx, aws.ToString(table))
		if err != nil {
			return nil, err
		}
		tables = append(tables, schema.name)
	}
	slices.Sort(tables)
	for _, name := range slices.Compact(tables) {
		l := a.writes.table(name)
		l.Lock()
		defer l.Unlock()
	}
	return a.Client.TransactWriteItems(ctx, in, o...)
}

// PutItem is c's PutItem under the item's lock.
func (a AtomicClient) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return a.writes.PutItem(ctx, in, o...)
}

// UpdateItem is c's UpdateItem under the item's lock.
func (a AtomicClient) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return a.writes.UpdateItem(ctx, in, o...)
}

// DeleteItem is c's DeleteItem under the item's lock.
func (a AtomicClient) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return a.writes.DeleteItem(ctx, in, o...)
}
