package motoserver

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// bound is how long a test waits for something that should happen at once
// before it fails; it never waits this long when the code is right.
const bound = 5 * time.Second

const ordersARN = "arn:aws:dynamodb:us-east-1:123456789012:table/orders"

// labelKey carries a write's name through the wrapper to the fake.
type labelKey struct{}

// fakeDynamo is the inner API: it knows some tables' key schemas, and holds
// each write inside until the test lets it out, so that a test can see which
// writes are inside at once.
type fakeDynamo struct {
	// passThrough lets writes through without holding them.
	passThrough bool
	writeErr    error

	entered chan string   // a write's label, as it gets inside
	release chan struct{} // one token lets one write out

	mu        sync.Mutex
	describes int
}

func newFake(t *testing.T) *fakeDynamo {
	f := &fakeDynamo{entered: make(chan string, 4), release: make(chan struct{})}
	// A failed test may leave writes inside; let them all out.
	t.Cleanup(func() { close(f.release) })
	return f
}

func (f *fakeDynamo) DescribeTable(_ context.Context, in *dynamodb.DescribeTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	f.mu.Lock()
	f.describes++
	f.mu.Unlock()
	name := aws.ToString(in.TableName)
	if name == ordersARN {
		name = "orders"
	}
	keys := map[string][]string{"orders": {"id"}, "archive": {"id"}, "numbers": {"n"}, "events": {"pk", "sk"}}[name]
	if keys == nil {
		return nil, &types.ResourceNotFoundException{Message: aws.String("Requested resource not found")}
	}
	td := &types.TableDescription{TableName: aws.String(name)}
	for i, k := range keys {
		kt := types.KeyTypeHash
		if i > 0 {
			kt = types.KeyTypeRange
		}
		td.KeySchema = append(td.KeySchema, types.KeySchemaElement{AttributeName: aws.String(k), KeyType: kt})
	}
	return &dynamodb.DescribeTableOutput{Table: td}, nil
}

func (f *fakeDynamo) PutItem(ctx context.Context, _ *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return &dynamodb.PutItemOutput{}, f.write(ctx)
}

func (f *fakeDynamo) UpdateItem(ctx context.Context, _ *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return &dynamodb.UpdateItemOutput{}, f.write(ctx)
}

func (f *fakeDynamo) DeleteItem(ctx context.Context, _ *dynamodb.DeleteItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return &dynamodb.DeleteItemOutput{}, f.write(ctx)
}

func (f *fakeDynamo) write(ctx context.Context) error {
	if f.passThrough {
		return f.writeErr
	}
	label, _ := ctx.Value(labelKey{}).(string)
	f.entered <- label
	<-f.release
	return f.writeErr
}

func (f *fakeDynamo) describeCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.describes
}

// expectInside fails unless the write labelled want gets inside in time.
func (f *fakeDynamo) expectInside(t *testing.T, want string) {
	t.Helper()
	select {
	case got := <-f.entered:
		if got != want {
			t.Fatalf("write %s got inside, want %s", got, want)
		}
	case <-time.After(bound):
		t.Fatalf("write %s never got inside", want)
	}
}

// letOneOut lets one write that is inside return.
func (f *fakeDynamo) letOneOut(t *testing.T) {
	t.Helper()
	select {
	case f.release <- struct{}{}:
	case <-time.After(bound):
		t.Fatal("no write inside to let out")
	}
}

// write is one call through the wrapper.
type write func(ctx context.Context, w DynamoWriter) error

func put(table string, item map[string]types.AttributeValue) write {
	return func(ctx context.Context, w DynamoWriter) error {
		_, err := w.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item, ConditionExpression: aws.String("attribute_not_exists(id)")})
		return err
	}
}

func update(table string, key map[string]types.AttributeValue) write {
	return func(ctx context.Context, w DynamoWriter) error {
		_, err := w.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key, UpdateExpression: aws.String("SET s = :s")})
		return err
	}
}

func del(table string, key map[string]types.AttributeValue) write {
	return func(ctx context.Context, w DynamoWriter) error {
		_, err := w.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: key})
		return err
	}
}

func str(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func num(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }

// race starts write a and waits until it is inside the inner API, then starts
// write b while a is still inside, and reports whether b got inside too (true)
// or waited for a lock (false). Either way it then lets both finish.
func race(t *testing.T, w DynamoWriter, f *fakeDynamo, contended <-chan string, a, b write) (bothInside bool) {
	t.Helper()
	done := make(chan error, 2)
	go func() { done <- a(context.WithValue(context.Background(), labelKey{}, "a"), w) }()
	f.expectInside(t, "a")
	go func() { done <- b(context.WithValue(context.Background(), labelKey{}, "b"), w) }()
	select {
	case got := <-f.entered:
		if got != "b" {
			t.Fatalf("write %s got inside, want b", got)
		}
		bothInside = true
	case <-contended:
	case <-time.After(bound):
		t.Fatal("write b neither got inside nor waited for a lock")
	}
	f.letOneOut(t)
	if !bothInside {
		f.expectInside(t, "b") // b's turn comes once a is out
	}
	f.letOneOut(t)
	for range 2 {
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("write: %v", err)
			}
		case <-time.After(bound):
			t.Fatal("a write never returned")
		}
	}
	return bothInside
}

// perItem is SerializeWrites's lock, reporting on contended when a write waits.
func perItem(contended chan<- string) *itemLocks {
	return &itemLocks{held: map[string]*itemLock{}, contended: func(k string) { contended <- k }}
}

func TestSerializeWritesLocksPerItem(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		a, b     write
		sameItem bool
	}{
		{"one key, PutItem twice", put("orders", map[string]types.AttributeValue{"id": str("k1")}), put("orders", map[string]types.AttributeValue{"id": str("k1")}), true},
		{"one key, other attributes differ", put("orders", map[string]types.AttributeValue{"id": str("k1"), "status": str("PROCESSING")}), put("orders", map[string]types.AttributeValue{"id": str("k1"), "status": str("COMPLETED")}), true},
		{"one key, PutItem and UpdateItem", put("orders", map[string]types.AttributeValue{"id": str("k1")}), update("orders", map[string]types.AttributeValue{"id": str("k1")}), true},
		{"one key, UpdateItem and DeleteItem", update("orders", map[string]types.AttributeValue{"id": str("k1")}), del("orders", map[string]types.AttributeValue{"id": str("k1")}), true},
		{"one key, by table name and by ARN", put("orders", map[string]types.AttributeValue{"id": str("k1")}), update(ordersARN, map[string]types.AttributeValue{"id": str("k1")}), true},
		{"one number written two ways", put("numbers", map[string]types.AttributeValue{"n": num("1")}), update("numbers", map[string]types.AttributeValue{"n": num("10E-1")}), true},
		{"one composite key", put("events", map[string]types.AttributeValue{"pk": str("p"), "sk": str("s"), "x": str("1")}), del("events", map[string]types.AttributeValue{"sk": str("s"), "pk": str("p")}), true},
		{"two keys", put("orders", map[string]types.AttributeValue{"id": str("k1")}), put("orders", map[string]types.AttributeValue{"id": str("k2")}), false},
		{"one key in two tables", put("orders", map[string]types.AttributeValue{"id": str("k1")}), put("archive", map[string]types.AttributeValue{"id": str("k1")}), false},
		{"one partition, two sort keys", put("events", map[string]types.AttributeValue{"pk": str("p"), "sk": str("s1")}), update("events", map[string]types.AttributeValue{"pk": str("p"), "sk": str("s2")}), false},
		{"a string and a number of the same digits", put("orders", map[string]types.AttributeValue{"id": str("1")}), put("orders", map[string]types.AttributeValue{"id": num("1")}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t)
			contended := make(chan string, 2)
			w := serializeWith(f, perItem(contended))
			both := race(t, w, f, contended, tc.a, tc.b)
			switch {
			case tc.sameItem && both:
				t.Error("two writes of one item were inside moto at once: its conditions would race")
			case !tc.sameItem && !both:
				t.Error("a write of another item waited: writes of different items must run concurrently")
			}
			if k := w.locks.(*itemLocks).size(); k != 0 {
				t.Errorf("%d item locks left after every write returned", k)
			}
		})
	}
}

// TestRaceCatchesAMissingOrGlobalLock shows that race tells the per-item lock
// from the two wrong ones: no lock lets one item's writes overlap, and one
// lock for everything makes different items' writes wait.
func TestRaceCatchesAMissingOrGlobalLock(t *testing.T) {
	t.Parallel()
	k1 := map[string]types.AttributeValue{"id": str("k1")}
	k2 := map[string]types.AttributeValue{"id": str("k2")}
	for _, tc := range []struct {
		name     string
		locks    func(contended chan<- string) locker
		a, b     write
		wantBoth bool
	}{
		{"no lock, one item: overlap", func(chan<- string) locker { return noLock{} }, put("orders", k1), update("orders", k1), true},
		{"one global lock, two items: wait", func(c chan<- string) locker { return newOneLock(func(k string) { c <- k }) }, put("orders", k1), put("orders", k2), false},
		{"one global lock, one item: wait (right, but too wide)", func(c chan<- string) locker { return newOneLock(func(k string) { c <- k }) }, put("orders", k1), put("orders", k1), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t)
			contended := make(chan string, 2)
			if got := race(t, serializeWith(f, tc.locks(contended)), f, contended, tc.a, tc.b); got != tc.wantBoth {
				t.Errorf("both inside = %v, want %v", got, tc.wantBoth)
			}
		})
	}
}

func TestWaitingWriteGivesUpWithItsContext(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	contended := make(chan string, 1)
	w := serializeWith(f, perItem(contended))
	key := map[string]types.AttributeValue{"id": str("k1")}

	first := make(chan error, 1)
	go func() { first <- put("orders", key)(context.WithValue(context.Background(), labelKey{}, "a"), w) }()
	f.expectInside(t, "a")

	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), labelKey{}, "b"))
	defer cancel()
	second := make(chan error, 1)
	go func() { second <- update("orders", key)(ctx, w) }()
	select {
	case <-contended:
	case <-time.After(bound):
		t.Fatal("the second write did not wait for the first")
	}
	cancel()
	select {
	case err := <-second:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("waiting write returned %v, want context.Canceled", err)
		}
	case <-time.After(bound):
		t.Fatal("the waiting write ignored its context")
	}
	if k := w.locks.(*itemLocks).size(); k != 1 {
		t.Errorf("%d item locks while one write holds one, want 1", k)
	}
	f.letOneOut(t)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	select {
	case l := <-f.entered:
		t.Errorf("write %s got inside after giving up", l)
	default:
	}
	if k := w.locks.(*itemLocks).size(); k != 0 {
		t.Errorf("%d item locks left", k)
	}
}

func TestKeySchemaIsDescribedOncePerTable(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	f.passThrough = true
	w := SerializeWrites(f)
	ctx := context.Background()
	for i := range 10 {
		id := str(string(rune('a' + i)))
		if err := put("orders", map[string]types.AttributeValue{"id": id})(ctx, w); err != nil {
			t.Fatal(err)
		}
		if err := del("events", map[string]types.AttributeValue{"pk": id, "sk": id})(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	if got := f.describeCount(); got != 2 {
		t.Errorf("DescribeTable called %d times for 20 writes to 2 tables, want 2", got)
	}

	// A write failing as if its table had gone makes the next one look again.
	f.writeErr = &types.ResourceNotFoundException{Message: aws.String("gone")}
	if err := put("orders", map[string]types.AttributeValue{"id": str("x")})(ctx, w); !errors.As(err, new(*types.ResourceNotFoundException)) {
		t.Fatalf("write error = %v, want the inner API's", err)
	}
	f.writeErr = nil
	if err := put("orders", map[string]types.AttributeValue{"id": str("x")})(ctx, w); err != nil {
		t.Fatal(err)
	}
	if got := f.describeCount(); got != 3 {
		t.Errorf("DescribeTable called %d times, want 3: once more after the table seemed to go", got)
	}

	// A table that does not exist fails the write with DynamoDB's error.
	err := update("missing", map[string]types.AttributeValue{"id": str("x")})(ctx, w)
	if !errors.As(err, new(*types.ResourceNotFoundException)) {
		t.Errorf("write to a missing table: %v, want ResourceNotFoundException", err)
	}
	if k := lockedItems(w); k != 0 {
		t.Errorf("%d item locks left", k)
	}
}
