package dynamostore_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
	"github.com/sqs-once/sqs-once/sqsonce/store/memstore"
)

// fakeTx is a TxAPI that answers TransactWriteItems with txErr and
// GetItem with item, recording the calls.
type fakeTx struct {
	mu       sync.Mutex
	txErr    error
	item     map[string]types.AttributeValue
	calls    []string
	commits  []*dynamodb.TransactWriteItemsInput
	getItems int
}

func (f *fakeTx) UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "UpdateItem")
	return &dynamodb.UpdateItemOutput{}, nil
}

func (f *fakeTx) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "GetItem")
	return &dynamodb.GetItemOutput{Item: f.item}, nil
}

func (f *fakeTx) TransactWriteItems(_ context.Context, in *dynamodb.TransactWriteItemsInput, _ ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "TransactWriteItems")
	f.commits = append(f.commits, in)
	if f.txErr != nil {
		return nil, f.txErr
	}
	return &dynamodb.TransactWriteItemsOutput{}, nil
}

var testLease = store.Lease{ID: "orders#o-1", Owner: "owner-a", Fence: 1700000000001, LockExpiresAt: time.Unix(1700000100, 0)}

func orderPut(id string, extra int) types.TransactWriteItem {
	item := map[string]types.AttributeValue{"orderId": &types.AttributeValueMemberS{Value: id}}
	if extra > 0 {
		item["blob"] = &types.AttributeValueMemberB{Value: make([]byte, extra)}
	}
	return types.TransactWriteItem{Put: &types.Put{TableName: aws.String("orders"), Item: item}}
}

func record(status store.Status, owner string, fence int64) map[string]types.AttributeValue {
	item := map[string]types.AttributeValue{
		"id": &types.AttributeValueMemberS{Value: testLease.ID}, "status": &types.AttributeValueMemberS{Value: string(status)},
		"owner": &types.AttributeValueMemberS{Value: owner}, "fence": &types.AttributeValueMemberN{Value: strconv.FormatInt(fence, 10)},
		"expiresAt": &types.AttributeValueMemberN{Value: "1700009999"}, "lockExpiresAt": &types.AttributeValueMemberN{Value: "1700000100000"},
	}
	return item
}

// begin is a transaction of testLease on a transactional store through f,
// and a context carrying it.
func begin(f *fakeTx) (store.Tx, context.Context) {
	tx := dynamostore.NewTransactional(f, "idem").Begin(testLease)
	return tx, store.ContextWithTx(context.Background(), tx)
}

func wantErr(t *testing.T, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("error nil, want one saying %q", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
}

// TestAddRefusesBeyondTheLimits: what DynamoDB would refuse at the commit
// is refused by Add, naming the limit, adding nothing and calling nothing.
func TestAddRefusesBeyondTheLimits(t *testing.T) {
	t.Parallel()
	many := func(n, extra int) []types.TransactWriteItem {
		w := make([]types.TransactWriteItem, n)
		for i := range w {
			w[i] = orderPut("o-"+strconv.Itoa(i), extra)
		}
		return w
	}
	for _, c := range []struct {
		name   string
		before []types.TransactWriteItem
		add    []types.TransactWriteItem
		want   []string
	}{
		{"100 writes at once", nil, many(100, 0), []string{"100 writes in one transaction, over the limit of 99", "100 actions"}},
		{"the 100th write", many(99, 0), many(1, 0), []string{"100 writes in one transaction, over the limit of 99"}},
		{"over 4 MB at once", nil, many(11, 390_000), []string{"over DynamoDB's aggregate limit of 4 MB (4194304 bytes)"}},
		{"over 4 MB in two", many(10, 390_000), many(1, 390_000), []string{"over DynamoDB's aggregate limit of 4 MB"}},
		{"no action", nil, []types.TransactWriteItem{{}}, []string{"write 1 of 1: no action"}},
		{"two actions", nil, []types.TransactWriteItem{{Put: orderPut("a", 0).Put, Delete: &types.Delete{TableName: aws.String("orders")}}}, []string{"2 actions ([Put Delete])", "exactly one"}},
		{"no table", nil, []types.TransactWriteItem{{Delete: &types.Delete{}}}, []string{"a Delete without a TableName"}},
		{"the record itself", nil, []types.TransactWriteItem{{ConditionCheck: &types.ConditionCheck{TableName: aws.String("idem"), Key: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: testLease.ID}}}}}, []string{"the lock's own record"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeTx{}
			tx, ctx := begin(f)
			if len(c.before) > 0 {
				if err := dynamostore.Add(ctx, c.before...); err != nil {
					t.Fatalf("Add within the limits: %v", err)
				}
			}
			wantErr(t, dynamostore.Add(ctx, c.add...), c.want...)
			if err := tx.Commit(ctx, store.Completion{Until: time.Unix(1700009999, 0)}); err != nil {
				t.Fatal(err)
			}
			if len(f.commits) != 1 || len(f.commits[0].TransactItems) != len(c.before)+1 {
				t.Errorf("commit sent %d calls; want 1 of %d items (the refused writes none)", len(f.commits), len(c.before)+1)
			}

			// The same limits on the in-memory store, where a test runs.
			mem := memstore.New()
			mtx := mem.Begin(testLease)
			mctx := store.ContextWithTx(context.Background(), mtx)
			if len(c.before) > 0 {
				if err := dynamostore.Add(mctx, c.before...); err != nil {
					t.Fatalf("Add on memstore within the limits: %v", err)
				}
			}
			if c.name == "the record itself" {
				return // memstore has no record table to name
			}
			wantErr(t, dynamostore.Add(mctx, c.add...), c.want...)
			if got := len(mtx.(*memstore.Tx).Writes()); got != len(c.before) {
				t.Errorf("memstore transaction holds %d writes, want %d", got, len(c.before))
			}
		})
	}
}

// TestAddNeedsATransactionalStore: no transaction in the context, and a
// plain store's, are refused with what to do.
func TestAddNeedsATransactionalStore(t *testing.T) {
	t.Parallel()
	wantErr(t, dynamostore.Add(context.Background(), orderPut("a", 0)), "no transaction in the context", "NewTransactional")
	f := &fakeTx{}
	tx := dynamostore.New(f, "idem").Begin(testLease)
	wantErr(t, dynamostore.Add(store.ContextWithTx(context.Background(), tx), orderPut("a", 0)), "build it with dynamostore.NewTransactional")
	if !tx.Empty() {
		t.Error("a plain store's transaction is not empty after a refused Add")
	}
	if len(f.calls) != 0 {
		t.Errorf("calls %v, want none", f.calls)
	}
}

// TestCommitRequest: one TransactWriteItems: the work's writes in order,
// then the record's completion conditioned on owner, fence and PROCESSING,
// with a token that is the same on every attempt and differs by fence.
func TestCommitRequest(t *testing.T) {
	t.Parallel()
	f := &fakeTx{}
	tx, ctx := begin(f)
	if !tx.Empty() {
		t.Fatal("new transaction not empty")
	}
	if err := dynamostore.Add(ctx, orderPut("a", 0), orderPut("b", 0)); err != nil {
		t.Fatal(err)
	}
	until := time.Unix(1700009999, 0)
	for range 2 {
		if err := tx.Commit(ctx, store.Completion{Until: until, Result: []byte("r")}); err != nil {
			t.Fatal(err)
		}
	}
	if len(f.calls) != 2 || f.calls[0] != "TransactWriteItems" {
		t.Fatalf("calls %v, want two TransactWriteItems", f.calls)
	}
	in := f.commits[0]
	if len(in.TransactItems) != 3 || in.TransactItems[0].Put.Item["orderId"].(*types.AttributeValueMemberS).Value != "a" {
		t.Fatalf("items %+v, want a, b, then the record", in.TransactItems)
	}
	u := in.TransactItems[2].Update
	if u == nil || aws.ToString(u.TableName) != "idem" || u.Key["id"].(*types.AttributeValueMemberS).Value != testLease.ID {
		t.Fatalf("last item %+v, want the record's Update", in.TransactItems[2])
	}
	cond := aws.ToString(u.ConditionExpression)
	for _, want := range []string{"#owner = :owner", "#fence = :fence", "#status = :processing"} {
		if !strings.Contains(cond, want) {
			t.Errorf("condition %q lacks %q", cond, want)
		}
	}
	if v, _ := u.ExpressionAttributeValues[":fence"].(*types.AttributeValueMemberN); v == nil || v.Value != strconv.FormatInt(testLease.Fence, 10) {
		t.Errorf(":fence %v, want %d", v, testLease.Fence)
	}
	if v, _ := u.ExpressionAttributeValues[":owner"].(*types.AttributeValueMemberS); v == nil || v.Value != testLease.Owner {
		t.Errorf(":owner %v, want %s", v, testLease.Owner)
	}
	if !strings.Contains(aws.ToString(u.UpdateExpression), "REMOVE #lockexp") || u.ReturnValuesOnConditionCheckFailure != types.ReturnValuesOnConditionCheckFailureAllOld {
		t.Errorf("update %q, return %q", aws.ToString(u.UpdateExpression), u.ReturnValuesOnConditionCheckFailure)
	}
	token := aws.ToString(in.ClientRequestToken)
	if token == "" || len(token) > 36 || token != aws.ToString(f.commits[1].ClientRequestToken) {
		t.Errorf("tokens %q, %q: want equal, non-empty, at most 36", token, aws.ToString(f.commits[1].ClientRequestToken))
	}
	next := testLease
	next.Fence++
	g := &fakeTx{}
	tx2 := dynamostore.NewTransactional(g, "idem").Begin(next)
	_ = dynamostore.Add(store.ContextWithTx(context.Background(), tx2), orderPut("a", 0))
	_ = tx2.Commit(context.Background(), store.Completion{Until: until, Result: []byte("r")})
	if aws.ToString(g.commits[0].ClientRequestToken) == token {
		t.Error("the next fence's commit has the same token")
	}
}

func canceled(codes ...string) error {
	e := &types.TransactionCanceledException{Message: aws.String("Transaction cancelled")}
	for _, c := range codes {
		e.CancellationReasons = append(e.CancellationReasons, types.CancellationReason{Code: aws.String(c)})
	}
	return e
}

// TestCommitSettles: each refusal and failure of the commit, and the
// record read after it, give the error store.Tx.Commit promises.
func TestCommitSettles(t *testing.T) {
	t.Parallel()
	ours := record(store.StatusProcessing, testLease.Owner, testLease.Fence)
	oursDone := record(store.StatusCompleted, testLease.Owner, testLease.Fence)
	takenOver := record(store.StatusProcessing, "owner-b", testLease.Fence+1)
	otherDone := record(store.StatusCompleted, "owner-b", testLease.Fence+1)
	transport := errors.New("connection reset by peer")
	for _, c := range []struct {
		name  string
		err   error
		item  map[string]types.AttributeValue
		check func(error) bool
		reads int
	}{
		{"our repeat, record refused", canceled("None", "ConditionalCheckFailed"), oursDone, isNil, 1},
		{"taken over", canceled("None", "ConditionalCheckFailed"), takenOver, isLost, 1},
		{"taken over and completed", canceled("None", "ConditionalCheckFailed"), otherDone, isLost, 1},
		{"record gone", canceled("None", "ConditionalCheckFailed"), nil, isLost, 1},
		{"user condition", canceled("ConditionalCheckFailed", "None"), ours, isEffect, 1},
		{"our repeat, user condition refused first", canceled("ConditionalCheckFailed", "None"), oursDone, isNil, 1},
		{"conflict, still ours", canceled("TransactionConflict", "None"), ours, isUnavailable, 1},
		{"conflict, ours applied", canceled("None", "TransactionConflict"), oursDone, isNil, 1},
		{"conflict, taken over", canceled("None", "TransactionConflict"), takenOver, isLost, 1},
		{"transport, still ours", transport, ours, isUnavailable, 1},
		{"transport, applied", transport, oursDone, isNil, 1},
		{"transport, taken over", transport, takenOver, isLost, 1},
		{"unknown operation", &smithy.GenericAPIError{Code: "UnknownOperationException", Message: "UnknownError"}, ours, isMisconfigured, 0},
		{"token mismatch", &smithy.GenericAPIError{Code: "IdempotentParameterMismatchException"}, ours, isNotCommitted, 0},
		{"token mismatch, typed", &types.IdempotentParameterMismatchException{}, oursDone, isNotCommitted, 0},
		{"invalid", &smithy.GenericAPIError{Code: "ValidationException"}, ours, isMisconfigured, 0},
		{"invalid item", canceled("ValidationError", "None"), ours, isMisconfigured, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeTx{txErr: c.err, item: c.item}
			tx, ctx := begin(f)
			if err := dynamostore.Add(ctx, orderPut("a", 0)); err != nil {
				t.Fatal(err)
			}
			err := tx.Commit(ctx, store.Completion{Until: time.Unix(1700009999, 0)})
			if !c.check(err) {
				t.Errorf("Commit: %v (%T)", err, err)
			}
			reads := 0
			for _, call := range f.calls {
				if call == "GetItem" {
					reads++
				}
			}
			if reads != c.reads {
				t.Errorf("calls %v: %d reads of the record, want %d", f.calls, reads, c.reads)
			}
		})
	}
}

func isNil(err error) bool { return err == nil }

// isNotCommitted: nothing applied, and the transaction cannot commit as
// it is (not read as our own commit, even where the record is completed
// by the lease: another transaction of it used the token).
func isNotCommitted(err error) bool {
	return errors.Is(err, store.ErrNotCommitted) && !errors.Is(err, store.ErrMisconfigured)
}
func isLost(err error) bool {
	return errors.Is(err, store.ErrLockLost) && !errors.Is(err, store.ErrUnavailable)
}
func isUnavailable(err error) bool {
	return errors.Is(err, store.ErrUnavailable) && !errors.Is(err, store.ErrLockLost) && !errors.As(err, new(*store.EffectError))
}
func isMisconfigured(err error) bool { return errors.Is(err, store.ErrMisconfigured) }
func isEffect(err error) bool {
	var e *store.EffectError
	var c *types.TransactionCanceledException
	return errors.As(err, &e) && errors.As(err, &c) && e.ID == testLease.ID && !errors.Is(err, store.ErrLockLost)
}

// TestRolledBackIsNotCommitted: a rolled-back transaction commits nothing
// and takes no more writes.
func TestRolledBackIsNotCommitted(t *testing.T) {
	t.Parallel()
	f := &fakeTx{}
	tx, ctx := begin(f)
	_ = dynamostore.Add(ctx, orderPut("a", 0))
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if !tx.Empty() {
		t.Error("not empty after Rollback")
	}
	if err := dynamostore.Add(ctx, orderPut("b", 0)); !errors.Is(err, store.ErrTxEnded) {
		t.Errorf("Add after Rollback: %v; want an error matching store.ErrTxEnded", err)
	}
	if err := tx.Commit(ctx, store.Completion{Until: time.Unix(1700009999, 0)}); !errors.Is(err, store.ErrNotCommitted) {
		t.Errorf("Commit after Rollback: %v", err)
	}
	if len(f.calls) != 0 {
		t.Errorf("calls %v, want none", f.calls)
	}
}
