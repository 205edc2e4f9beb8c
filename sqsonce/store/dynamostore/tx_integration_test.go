//go:build integration

package dynamostore_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqs-once/sqs-once/internal/local/faultproxy"
	"github.com/sqs-once/sqs-once/internal/local/motoserver"
	"github.com/sqs-once/sqs-once/internal/local/mototest"
	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
	"github.com/sqs-once/sqs-once/sqsonce/store/storetest"
)

// newKeyTable creates a business table with partition key attr (String)
// on cfg's endpoint and returns its name.
func newKeyTable(t testing.TB, cfg aws.Config, prefix, attr string) string {
	t.Helper()
	name := mototest.Name(prefix)
	_, err := dynamodb.NewFromConfig(cfg).CreateTable(context.Background(), &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(attr), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(attr), KeyType: types.KeyTypeHash}},
	})
	// The name is this test's alone: a table that exists is this call's
	// own first attempt, applied and retried by the SDK.
	if err != nil && !errors.As(err, new(*types.ResourceInUseException)) {
		t.Fatalf("create table %s: %v", name, err)
	}
	return name
}

// counterEffects is the DynamoDB store's storetest.Effects: one counter
// item per name in a table of its own, incremented by an Update with ADD
// that the work adds with dynamostore.Add; a refused one is that Update
// under a condition no item meets.
type counterEffects struct {
	api   dynamostore.API
	table string
}

func (e counterEffects) increment(name string, refused bool) types.TransactWriteItem {
	u := &types.Update{
		TableName:                 aws.String(e.table),
		Key:                       map[string]types.AttributeValue{"name": &types.AttributeValueMemberS{Value: name}},
		UpdateExpression:          aws.String("ADD #n :one"),
		ExpressionAttributeNames:  map[string]string{"#n": "n"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":one": &types.AttributeValueMemberN{Value: "1"}},
	}
	if refused {
		u.ConditionExpression = aws.String("#n = :minus")
		u.ExpressionAttributeValues[":minus"] = &types.AttributeValueMemberN{Value: "-1"}
	}
	return types.TransactWriteItem{Update: u}
}

// Add adds one increment of name's counter to tx.
func (e counterEffects) Add(ctx context.Context, tx store.Tx, name string, refused bool) error {
	return dynamostore.Add(store.ContextWithTx(ctx, tx), e.increment(name, refused))
}

// Count reads name's counter, consistently.
func (e counterEffects) Count(ctx context.Context, name string) (int, error) {
	out, err := e.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(e.table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"name": &types.AttributeValueMemberS{Value: name}},
	})
	if err != nil {
		return 0, err
	}
	n, ok := out.Item["n"].(*types.AttributeValueMemberN)
	if !ok {
		return 0, nil
	}
	return strconv.Atoi(n.Value)
}

// counting is a TxAPI that counts its calls by operation.
type counting struct {
	dynamostore.TxAPI
	mu    sync.Mutex
	calls map[string]int
}

func newCounting(api dynamostore.TxAPI) *counting {
	return &counting{TxAPI: api, calls: map[string]int{}}
}

func (c *counting) count(op string) {
	c.mu.Lock()
	c.calls[op]++
	c.mu.Unlock()
}

// take returns the calls counted since the last take.
func (c *counting) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.calls
	c.calls = map[string]int{}
	return out
}

func (c *counting) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	c.count("UpdateItem")
	return c.TxAPI.UpdateItem(ctx, in, o...)
}

func (c *counting) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	c.count("GetItem")
	return c.TxAPI.GetItem(ctx, in, o...)
}

func (c *counting) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	c.count("TransactWriteItems")
	return c.TxAPI.TransactWriteItems(ctx, in, o...)
}

func total(calls map[string]int) int {
	n := 0
	for _, c := range calls {
		n += c
	}
	return n
}

// txClock is a test's clock, moved by hand.
type txClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *txClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *txClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// orderPut is the Put of an order row, ok its own condition (no such
// order yet).
func orderRow(table, id, by string) types.TransactWriteItem {
	return types.TransactWriteItem{Put: &types.Put{
		TableName: aws.String(table),
		Item: map[string]types.AttributeValue{
			"orderId": &types.AttributeValueMemberS{Value: id},
			"by":      &types.AttributeValueMemberS{Value: by},
		},
		ConditionExpression:      aws.String("attribute_not_exists(#o)"),
		ExpressionAttributeNames: map[string]string{"#o": "orderId"},
	}}
}

// orders returns every row of table, by order id.
func orders(t testing.TB, api dynamostore.TxAPI, table string) map[string]string {
	t.Helper()
	out, err := api.(interface {
		Scan(context.Context, *dynamodb.ScanInput, ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
	}).Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatalf("scan %s: %v", table, err)
	}
	rows := map[string]string{}
	for _, item := range out.Items {
		rows[item["orderId"].(*types.AttributeValueMemberS).Value] = item["by"].(*types.AttributeValueMemberS).Value
	}
	return rows
}

// txClient is a client a txEnv's store is given, with Scan for the
// orders' rows: moto's (motoserver.AtomicClient) or DynamoDB Local's.
type txClient interface {
	dynamostore.TxAPI
	Scan(context.Context, *dynamodb.ScanInput, ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

// txEnv is a transactional store with an orders table, on moto
// (newTxEnv) or DynamoDB Local (newLocalTxEnv).
type txEnv struct {
	api          txClient
	table        string
	orders       string
	counted      *counting
	store        *dynamostore.Store
	clock        *txClock
	outcomesMu   sync.Mutex
	outcomesList []sqsonce.Outcome
}

func newTxEnv(t *testing.T) *txEnv {
	t.Helper()
	cfg := mototest.Config(t)
	e := &txEnv{table: mototest.NewIdempotencyTable(t, cfg), orders: newKeyTable(t, cfg, "orders", "orderId"), clock: &txClock{now: time.Now()}}
	e.use(motoserver.Atomic(dynamodb.NewFromConfig(cfg)))
	return e
}

// use makes api the client of e's store, counted.
func (e *txEnv) use(api txClient) {
	e.api = api
	e.counted = newCounting(api)
	e.store = dynamostore.NewTransactional(e.counted, e.table)
}

func (e *txEnv) processor(t *testing.T, cfg sqsonce.Config) *sqsonce.Processor {
	t.Helper()
	cfg.Store, cfg.KeyPrefix, cfg.Logger = e.store, "orders", slog.New(slog.DiscardHandler)
	cfg.Test.Now = e.clock.Now
	cfg.OnOutcome = func(_ context.Context, o sqsonce.Outcome) {
		e.outcomesMu.Lock()
		e.outcomesList = append(e.outcomesList, o)
		e.outcomesMu.Unlock()
	}
	p, err := sqsonce.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (e *txEnv) lastOutcome() sqsonce.Outcome {
	e.outcomesMu.Lock()
	defer e.outcomesMu.Unlock()
	return e.outcomesList[len(e.outcomesList)-1]
}

func (e *txEnv) record(t *testing.T, key string) store.Record {
	t.Helper()
	rec, err := e.store.Read(context.Background(), "orders#"+key)
	if err != nil {
		t.Fatalf("read record of %s: %v", key, err)
	}
	return rec
}

// TestDoTransactionalCallsPerRecord: a work that adds a Put of an order
// row commits it with its completion: a new key costs the acquire and one
// TransactWriteItems, a duplicate the refused acquire, a warm duplicate
// nothing; the row and the COMPLETED record are both there. On DynamoDB
// Local, whose refusal carries the record as DynamoDB's does.
func TestDoTransactionalCallsPerRecord(t *testing.T) {
	t.Parallel()
	e := newLocalTxEnv(t, nil)
	ctx := context.Background()
	for _, c := range []struct {
		name      string
		cache     int
		duplicate map[string]int
	}{
		{"no cache", 0, map[string]int{"UpdateItem": 1}},
		{"local cache", 10, map[string]int{}},
	} {
		p := e.processor(t, sqsonce.Config{LocalCache: c.cache})
		key := "order-" + c.name
		runs := 0
		fn := func(ctx context.Context) error {
			runs++
			return dynamostore.Add(ctx, orderRow(e.orders, key, "first"))
		}
		e.counted.take()
		if err := p.Do(ctx, key, fn); err != nil {
			t.Fatalf("%s: Do: %v", c.name, err)
		}
		if got := e.counted.take(); total(got) != 2 || got["UpdateItem"] != 1 || got["TransactWriteItems"] != 1 {
			t.Errorf("%s: new key's calls %v, want UpdateItem 1 (acquire) and TransactWriteItems 1", c.name, got)
		}
		if err := p.Do(ctx, key, fn); !errors.Is(err, sqsonce.ErrDuplicate) {
			t.Errorf("%s: second Do: %v, want ErrDuplicate", c.name, err)
		}
		if got := e.counted.take(); total(got) != total(c.duplicate) || got["UpdateItem"] != c.duplicate["UpdateItem"] {
			t.Errorf("%s: duplicate's calls %v, want %v", c.name, got, c.duplicate)
		}
		if runs != 1 {
			t.Errorf("%s: fn ran %d times", c.name, runs)
		}
		if rows := orders(t, e.api, e.orders); rows[key] != "first" {
			t.Errorf("%s: order rows %v, want %s", c.name, rows, key)
		}
		if rec := e.record(t, key); rec.Status != store.StatusCompleted || !rec.LockExpiresAt.IsZero() {
			t.Errorf("%s: record %v, want COMPLETED without a lock expiry", c.name, rec)
		}
	}
}

// TestDoTransactionalUserConditionFails: a condition of the work's own
// that fails is the work's failure: Do's error is a *store.EffectError
// with the SDK's cancellation, the order is absent and the key released.
// On DynamoDB Local, whose CancellationReasons are DynamoDB's: one per
// write, in the order sent.
func TestDoTransactionalUserConditionFails(t *testing.T) {
	t.Parallel()
	e := newLocalTxEnv(t, nil)
	p := e.processor(t, sqsonce.Config{})
	err := p.Do(context.Background(), "order-9", func(ctx context.Context) error {
		return dynamostore.Add(ctx, orderRow(e.orders, "order-9", "first"), types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
			TableName: aws.String(e.orders), Key: map[string]types.AttributeValue{"orderId": &types.AttributeValueMemberS{Value: "customer-absent"}},
			ConditionExpression: aws.String("attribute_exists(orderId)"),
		}})
	})
	var effect *store.EffectError
	var canceled *types.TransactionCanceledException
	if !errors.As(err, &effect) || !errors.As(err, &canceled) {
		t.Fatalf("Do: %v (%T), want a *store.EffectError around a *types.TransactionCanceledException", err, err)
	}
	if r := canceled.CancellationReasons; len(r) != 3 || aws.ToString(r[1].Code) != "ConditionalCheckFailed" {
		t.Errorf("cancellation reasons %+v, want the second write's ConditionalCheckFailed", r)
	}
	if rows := orders(t, e.api, e.orders); len(rows) != 0 {
		t.Errorf("order rows %v, want none", rows)
	}
	if rec := e.record(t, "order-9"); rec.Status != store.StatusReleased {
		t.Errorf("record %v, want RELEASED", rec)
	}
	if o := e.lastOutcome(); o.Kind != sqsonce.KindFailed || o.LockLost {
		t.Errorf("outcome %+v, want failed, lock not lost", o)
	}
}

// TestDoTransactionalTakenOver: a holder paused past its lock, whose key a
// second holder took over and completed, commits none of its effect: its
// lock is lost, and the one order row is the second holder's. On DynamoDB
// Local.
func TestDoTransactionalTakenOver(t *testing.T) {
	t.Parallel()
	e := newLocalTxEnv(t, nil)
	// An hour's lock: renewed every 20 minutes of real time, never within
	// the test; the clock jumps past it.
	first := e.processor(t, sqsonce.Config{LockTimeout: time.Hour})
	second := e.processor(t, sqsonce.Config{LockTimeout: time.Hour})
	ctx := context.Background()
	var secondErr error
	err := first.Do(ctx, "order-5", func(ctx context.Context) error {
		e.clock.advance(2 * time.Hour)
		secondErr = second.Do(ctx, "order-5", func(ctx context.Context) error {
			return dynamostore.Add(ctx, orderRow(e.orders, "order-5/second", "second"))
		})
		return dynamostore.Add(ctx, orderRow(e.orders, "order-5/first", "first"))
	})
	if secondErr != nil {
		t.Fatalf("second holder's Do: %v", secondErr)
	}
	if !errors.Is(err, sqsonce.ErrLockLost) {
		t.Errorf("first holder's Do: %v, want ErrLockLost", err)
	}
	if o := e.lastOutcome(); o.Kind != sqsonce.KindFailed || !o.LockLost || o.Reason != sqsonce.ReasonLockLost {
		t.Errorf("first holder's outcome %+v, want failed, lock lost", o)
	}
	if rows := orders(t, e.api, e.orders); len(rows) != 1 || rows["order-5/second"] != "second" {
		t.Errorf("order rows %v, want the second holder's alone", rows)
	}
}

// TestDoTransactionalLostAnswer: moto applies the commit and its answer
// is lost (500, or the connection reset); the SDK's retry is refused by
// the record's condition (moto ignores the token), and the read after it
// recognises the commit: processed, one order row.
func TestDoTransactionalLostAnswer(t *testing.T) {
	t.Parallel()
	for _, fault := range []faultproxy.Kind{faultproxy.FailAfter, faultproxy.ResetAfter} {
		t.Run(fault.String(), func(t *testing.T) {
			t.Parallel()
			cfg := mototest.Config(t)
			proxy, err := faultproxy.Start(mototest.URL(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = proxy.Close() })
			e := newTxEnv(t)
			e.use(motoserver.Atomic(dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(proxy.URL) }, noBackoff)))
			// The read after the refused repeat.
			lostAnswer(t, e, proxy, fault, 1)
		})
	}
}

// lostAnswer runs TestDoTransactionalLostAnswer's delivery on e, whose
// client goes through proxy: the commit applied and its answer lost by
// fault, the SDK's repeat within the one TransactWriteItems, and gets
// reads of the record after it.
func lostAnswer(t *testing.T, e *txEnv, proxy *faultproxy.Proxy, fault faultproxy.Kind, gets int) {
	t.Helper()
	p := e.processor(t, sqsonce.Config{})
	proxy.Script("TransactWriteItems", fault)
	if err := p.Do(context.Background(), "order-3", func(ctx context.Context) error {
		return dynamostore.Add(ctx, orderRow(e.orders, "order-3", "first"))
	}); err != nil {
		t.Fatalf("Do: %v", err)
	}
	if proxy.Pending() != 0 {
		t.Fatal("the fault was not used")
	}
	if got := e.counted.take(); got["GetItem"] != gets || got["TransactWriteItems"] != 1 {
		t.Errorf("calls %v, want one TransactWriteItems (the SDK retries within it) and %d reads of the record after it", got, gets)
	}
	if o := e.lastOutcome(); o.Kind != sqsonce.KindProcessed {
		t.Errorf("outcome %+v, want processed", o)
	}
	if rows := orders(t, e.api, e.orders); len(rows) != 1 || rows["order-3"] != "first" {
		t.Errorf("order rows %v, want one", rows)
	}
	if rec := e.record(t, "order-3"); rec.Status != store.StatusCompleted {
		t.Errorf("record %v, want COMPLETED", rec)
	}
}

// TestTxRulesOnMoto: the store's transaction on moto, call by call: a
// commit applies both; its repeat is recognised and applies nothing more;
// a commit under a lost lock applies nothing; a refused condition of the
// work's own applies nothing and leaves the lock releasable.
func TestTxRulesOnMoto(t *testing.T) {
	t.Parallel()
	cfg := mototest.Config(t)
	api := motoserver.Atomic(dynamodb.NewFromConfig(cfg))
	txRules(t, dynamostore.NewTransactional(api, mototest.NewIdempotencyTable(t, cfg)), counterEffects{api: api, table: newKeyTable(t, cfg, "counters", "name")})
}

// txRules are TestTxRulesOnMoto's steps, on s with fx's counters.
func txRules(t *testing.T, s *dynamostore.Store, fx counterEffects) {
	t.Helper()
	ctx := context.Background()
	now := time.Now()
	acquire := func(id, owner string, at time.Time) store.Lease {
		t.Helper()
		lease, err := s.Acquire(ctx, store.AcquireRequest{ID: id, Owner: owner, Now: at, LockUntil: at.Add(time.Minute)})
		if err != nil {
			t.Fatalf("acquire %s: %v", id, err)
		}
		return lease
	}
	count := func(name string) int {
		t.Helper()
		n, err := fx.Count(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	lease := acquire("p#commit", "a", now)
	tx := s.Begin(lease)
	if err := fx.Add(ctx, tx, "commit", false); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := tx.Commit(ctx, store.Completion{Until: now.Add(time.Hour), Result: []byte("r")}); err != nil {
			t.Fatalf("commit %d: %v", i+1, err)
		}
	}
	if n := count("commit"); n != 1 {
		t.Errorf("counter after a commit and its repeat: %d, want 1", n)
	}
	if rec, _ := s.Read(ctx, "p#commit"); rec.Status != store.StatusCompleted || string(rec.Result) != "r" {
		t.Errorf("record %v, want COMPLETED with result r", rec)
	}

	lease = acquire("p#lost", "a", now)
	tx = s.Begin(lease)
	_ = fx.Add(ctx, tx, "lost", false)
	acquire("p#lost", "b", now.Add(2*time.Minute))
	if err := tx.Commit(ctx, store.Completion{Until: now.Add(time.Hour)}); !errors.Is(err, store.ErrLockLost) {
		t.Errorf("commit under a lost lock: %v, want ErrLockLost", err)
	}
	if n := count("lost"); n != 0 {
		t.Errorf("counter after a commit under a lost lock: %d, want 0", n)
	}

	lease = acquire("p#refused", "a", now)
	tx = s.Begin(lease)
	_ = fx.Add(ctx, tx, "refused-ok", false)
	_ = fx.Add(ctx, tx, "refused", true)
	err := tx.Commit(ctx, store.Completion{Until: now.Add(time.Hour)})
	var effect *store.EffectError
	if !errors.As(err, &effect) || !errors.As(err, new(*types.TransactionCanceledException)) {
		t.Errorf("commit refused by the work's own condition: %v, want a *store.EffectError", err)
	}
	if n := count("refused-ok"); n != 0 {
		t.Errorf("counter beside a refused write: %d, want 0", n)
	}
	_ = tx.Rollback(ctx)
	if err := s.Release(ctx, lease, now); err != nil {
		t.Errorf("release after the refusal: %v", err)
	}
}

// TestTransactionsOnMoto: the transactional store passes the conformance
// suite's transaction rules on moto_server, the work's writes counters in
// a table of their own.
func TestTransactionsOnMoto(t *testing.T) {
	t.Parallel()
	cfg := mototest.Config(t)
	api := motoserver.Atomic(dynamodb.NewFromConfig(cfg))
	table := mototest.NewIdempotencyTable(t, cfg)
	fx := counterEffects{api: api, table: newKeyTable(t, cfg, "counters", "name")}
	storetest.TestTransactions(t, func(t *testing.T) (store.Transactor, storetest.Effects) {
		return dynamostore.NewTransactional(api, table), fx
	})
}
