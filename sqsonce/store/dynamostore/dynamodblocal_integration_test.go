//go:build integration

package dynamostore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqs-once/sqs-once/internal/local/dynamodblocal"
	"github.com/sqs-once/sqs-once/internal/local/faultproxy"
	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
	"github.com/sqs-once/sqs-once/sqsonce/store/storetest"
)

// The store on DynamoDB Local, Amazon's own engine: its transactions honour
// the ClientRequestToken (moto ignores it, dynalite has no transactions),
// name each write's cancellation reason and return the old item of a
// refused write (ReturnValuesOnConditionCheckFailure). The package's tests
// share the test binary's one server (dynamodblocal.Shared), each with
// tables of its own.

// localTable is a new table on the package's DynamoDB Local with partition
// key attr (String).
func localTable(t *testing.T, prefix, attr string) string {
	t.Helper()
	return dynamodblocal.NewTable(t, dynamodblocal.Config(t), prefix, attr)
}

// newLocalTxEnv is a txEnv on DynamoDB Local; proxy, when set, is in
// front of the server for the store's client.
func newLocalTxEnv(t *testing.T, proxy *faultproxy.Proxy) *txEnv {
	t.Helper()
	cfg := dynamodblocal.Config(t)
	e := &txEnv{table: dynamodblocal.NewIdempotencyTable(t, cfg), orders: localTable(t, "orders", "orderId"), clock: &txClock{now: time.Now()}}
	if proxy != nil {
		cfg.BaseEndpoint = aws.String(proxy.URL)
		e.use(dynamodblocal.NewClient(cfg, noBackoff))
		return e
	}
	e.use(dynamodblocal.NewClient(cfg))
	return e
}

// localProxy is a fault proxy in front of the package's DynamoDB Local,
// closed when t ends; observe, when set, sees each request.
func localProxy(t *testing.T, observe func(op string, body []byte)) *faultproxy.Proxy {
	t.Helper()
	var opts []faultproxy.Option
	if observe != nil {
		opts = append(opts, faultproxy.WithObserver(func(op string, body []byte, _ http.Header, _ faultproxy.Fault) { observe(op, body) }))
	}
	proxy, err := faultproxy.Start(dynamodblocal.Shared(t).URL, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	return proxy
}

// TestTransactionsOnLocal: the transactional store passes the conformance
// suite's transaction rules on DynamoDB Local, the work's writes counters
// in a table of their own. Its CommitRepeatRecognised is settled there by
// the token: the repeat succeeds without a read.
func TestTransactionsOnLocal(t *testing.T) {
	t.Parallel()
	client := dynamodblocal.NewClient(dynamodblocal.Config(t))
	table := localTable(t, "idem", "id")
	fx := counterEffects{api: client, table: localTable(t, "counters", "name")}
	storetest.TestTransactions(t, func(t *testing.T) (store.Transactor, storetest.Effects) {
		return dynamostore.NewTransactional(client, table), fx
	})
}

// TestTxRulesOnLocal: TestTxRulesOnMoto's steps on DynamoDB Local, whose
// refusals of a transaction name the record's reason as DynamoDB does.
func TestTxRulesOnLocal(t *testing.T) {
	t.Parallel()
	client := dynamodblocal.NewClient(dynamodblocal.Config(t))
	txRules(t, dynamostore.NewTransactional(client, localTable(t, "idem", "id")), counterEffects{api: client, table: localTable(t, "counters", "name")})
}

// TestDoTransactionalLostAnswerOnLocal: DynamoDB Local applies the commit
// and its answer is lost (500, or the connection reset); the SDK's repeat
// carries the same ClientRequestToken, which DynamoDB Local answers with
// success: processed, one order row, and no read of the record (on moto,
// which ignores the token, the record's condition refuses the repeat and a
// read settles it).
func TestDoTransactionalLostAnswerOnLocal(t *testing.T) {
	t.Parallel()
	for _, fault := range []faultproxy.Kind{faultproxy.FailAfter, faultproxy.ResetAfter} {
		t.Run(fault.String(), func(t *testing.T) {
			t.Parallel()
			proxy := localProxy(t, nil)
			lostAnswer(t, newLocalTxEnv(t, proxy), proxy, fault, 0)
		})
	}
}

// TestCommitTokenAppliesOnce: the commit's ClientRequestToken alone makes a
// repeated TransactWriteItems apply once. The proxy lets DynamoDB Local
// apply the commit and answers 500; the SDK sends it again, with the same
// token, and DynamoDB Local answers success without applying it again (the
// record's condition would have refused a second application: the record
// is no longer the lease's PROCESSING lock). Commit returns nil without the
// read that settles a refused repeat, the counter is 1, the record
// COMPLETED with the commit's result.
func TestCommitTokenAppliesOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var mu sync.Mutex
	var tokens []string
	proxy := localProxy(t, func(op string, body []byte) {
		if op != "TransactWriteItems" {
			return
		}
		var in struct{ ClientRequestToken string }
		_ = json.Unmarshal(body, &in)
		mu.Lock()
		tokens = append(tokens, in.ClientRequestToken)
		mu.Unlock()
	})
	cfg := dynamodblocal.Config(t)
	table := dynamodblocal.NewIdempotencyTable(t, cfg)
	fx := counterEffects{api: dynamodblocal.NewClient(cfg), table: localTable(t, "counters", "name")}
	cfg.BaseEndpoint = aws.String(proxy.URL)
	api := newCounting(dynamodblocal.NewClient(cfg, noBackoff))
	s := dynamostore.NewTransactional(api, table)

	now := time.Now()
	lease, err := s.Acquire(ctx, store.AcquireRequest{ID: "p#token", Owner: "a", Now: now, LockUntil: now.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	tx := s.Begin(lease)
	if err := fx.Add(ctx, tx, "token", false); err != nil {
		t.Fatal(err)
	}
	proxy.Script("TransactWriteItems", faultproxy.FailAfter)
	api.take()
	if err := tx.Commit(ctx, store.Completion{Until: now.Add(time.Hour), Result: []byte("r")}); err != nil {
		t.Fatalf("commit whose first answer was lost: %v", err)
	}
	if proxy.Pending() != 0 {
		t.Fatal("the fault was not used")
	}
	if got := api.take(); total(got) != 1 || got["TransactWriteItems"] != 1 {
		t.Errorf("calls %v, want the one TransactWriteItems (the SDK's repeat within it) and no GetItem: the token settled it", got)
	}
	mu.Lock()
	sent := tokens
	mu.Unlock()
	if len(sent) != 2 || sent[0] == "" || sent[0] != sent[1] {
		t.Errorf("TransactWriteItems requests' tokens %q, want two with the same token (the SDK's repeat)", sent)
	}
	if n, err := fx.Count(ctx, "token"); err != nil || n != 1 {
		t.Errorf("counter after a commit sent twice: %d (%v), want 1", n, err)
	}
	if rec, err := s.Read(ctx, "p#token"); err != nil || rec.Status != store.StatusCompleted || string(rec.Result) != "r" {
		t.Errorf("record %+v (%v), want COMPLETED with result r", rec, err)
	}
}

// TestCommitTokenOtherWrites: two transactions of the same lease (same
// record, owner and fence, so the same ClientRequestToken) with other
// writes. The first commits; DynamoDB refuses the second, within the
// token's 10 minutes, with IdempotentParameterMismatchException and applies
// nothing of it. Its Commit must say so (store.ErrNotCommitted), not take
// the first one's commit, which the record shows, for its own.
func TestCommitTokenOtherWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := dynamodblocal.Config(t)
	client := dynamodblocal.NewClient(cfg)
	api := newCounting(client)
	s := dynamostore.NewTransactional(api, dynamodblocal.NewIdempotencyTable(t, cfg))
	fx := counterEffects{api: client, table: localTable(t, "counters", "name")}

	now := time.Now()
	lease, err := s.Acquire(ctx, store.AcquireRequest{ID: "p#twice", Owner: "a", Now: now, LockUntil: now.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	first, second := s.Begin(lease), s.Begin(lease)
	if err := fx.Add(ctx, first, "first", false); err != nil {
		t.Fatal(err)
	}
	if err := fx.Add(ctx, second, "second", false); err != nil {
		t.Fatal(err)
	}
	if err := first.Commit(ctx, store.Completion{Until: now.Add(time.Hour), Result: []byte("first")}); err != nil {
		t.Fatalf("first commit: %v", err)
	}
	api.take()
	err = second.Commit(ctx, store.Completion{Until: now.Add(time.Hour), Result: []byte("second")})
	calls := api.take()
	t.Logf("second commit: %v (calls %v)", err, calls)
	if !errors.Is(err, store.ErrNotCommitted) {
		t.Errorf("second commit under the same token with other writes: %v, want an error matching store.ErrNotCommitted", err)
	}
	if errors.Is(err, store.ErrLockLost) {
		t.Errorf("second commit: %v matches ErrLockLost: the lock is the lease's, completed by the first", err)
	}
	if n, err := fx.Count(ctx, "second"); err != nil || n != 0 {
		t.Errorf("the second transaction's counter: %d (%v), want 0: nothing of it applied", n, err)
	}
	if n, err := fx.Count(ctx, "first"); err != nil || n != 1 {
		t.Errorf("the first transaction's counter: %d (%v), want 1", n, err)
	}
	if rec, err := s.Read(ctx, "p#twice"); err != nil || rec.Status != store.StatusCompleted || !bytes.Equal(rec.Result, []byte("first")) {
		t.Errorf("record %+v (%v), want COMPLETED with the first commit's result", rec, err)
	}
}

// TestCheckTransactionalOnLocal: DynamoDB Local has TransactWriteItems and
// TTL, so a transactional store's Check passes on a table set up as the
// docs say.
func TestCheckTransactionalOnLocal(t *testing.T) {
	t.Parallel()
	cfg := dynamodblocal.Config(t)
	client := dynamodblocal.NewClient(cfg)
	table := dynamodblocal.NewIdempotencyTable(t, cfg)
	_, err := client.UpdateTimeToLive(context.Background(), &dynamodb.UpdateTimeToLiveInput{
		TableName:               aws.String(table),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(dynamostore.AttrExpiresAt), Enabled: aws.Bool(true)},
	})
	if err != nil {
		t.Fatalf("enable TTL: %v", err)
	}
	if err := dynamostore.NewTransactional(client, table).Check(context.Background()); err != nil {
		t.Errorf("Check of the transactional store: %v", err)
	}
}

// localFaults is the package's DynamoDB Local, for runUnderFaults.
func localFaults(t *testing.T) faultEngine {
	cfg := dynamodblocal.Config(t)
	return faultEngine{
		url: dynamodblocal.Shared(t).URL,
		client: func(proxyURL string) dynamostore.TxAPI {
			return dynamodblocal.NewClient(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(proxyURL) }, noBackoff)
		},
		newTable:    func(t *testing.T) string { return dynamodblocal.NewIdempotencyTable(t, cfg) },
		newKeyTable: func(t *testing.T, prefix, attr string) string { return dynamodblocal.NewTable(t, cfg, prefix, attr) },
	}
}

// TestTransactionAtAddsSizeLimitOnLocal: Add's estimate of the 4 MB a
// transaction may carry is not looser than the engine's: the largest
// transaction Add takes (items just under MaxTransactionBytes by its
// estimate) commits on DynamoDB Local, which refuses a payload over 4 MB.
func TestTransactionAtAddsSizeLimitOnLocal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := dynamodblocal.Config(t)
	client := dynamodblocal.NewClient(cfg)
	s := dynamostore.NewTransactional(client, dynamodblocal.NewIdempotencyTable(t, cfg))
	rows := localTable(t, "rows", "k")
	put := func(k string, size int) types.TransactWriteItem {
		return types.TransactWriteItem{Put: &types.Put{TableName: aws.String(rows), Item: map[string]types.AttributeValue{
			"k": &types.AttributeValueMemberS{Value: k},
			"v": &types.AttributeValueMemberS{Value: string(bytes.Repeat([]byte("x"), size))},
		}}}
	}
	now := time.Now()
	lease, err := s.Acquire(ctx, store.AcquireRequest{ID: "p#big", Owner: "a", Now: now, LockUntil: now.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	tx := s.Begin(lease)
	txCtx := store.ContextWithTx(ctx, tx)
	// Ten items of 399,000 bytes (each under DynamoDB's 400 KB), and one
	// that brings the estimate to 1 KB under the limit: each item counts
	// its attributes' names ("k", "v") and values.
	const big = 399_000
	for i := range 10 {
		if err := dynamostore.Add(txCtx, put(fmt.Sprintf("r%02d", i), big)); err != nil {
			t.Fatalf("Add of item %d: %v", i+1, err)
		}
	}
	last := dynamostore.MaxTransactionBytes - 10*(big+2+3) - 1024
	if err := dynamostore.Add(txCtx, put("r10", last)); err != nil {
		t.Fatalf("Add of the last item (%d bytes): %v", last, err)
	}
	// One byte past the limit is refused by Add, before any call.
	if err := dynamostore.Add(txCtx, put("r11", 1024-2-3+1)); err == nil || !strings.Contains(err.Error(), "4 MB") {
		t.Fatalf("Add past the limit: %v, want the 4 MB refusal", err)
	}
	if err := tx.Commit(ctx, store.Completion{Until: now.Add(time.Hour)}); err != nil {
		t.Fatalf("commit of a transaction at Add's limit: %v", err)
	}
	// A scan's page holds 1 MB of items: the count is the pages' sum.
	n := int32(0)
	in := &dynamodb.ScanInput{TableName: aws.String(rows), Select: types.SelectCount, ConsistentRead: aws.Bool(true)}
	for {
		out, err := client.Scan(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		n += out.Count
		if len(out.LastEvaluatedKey) == 0 {
			break
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
	if n != 11 {
		t.Errorf("rows after the commit: %d, want 11", n)
	}
}
