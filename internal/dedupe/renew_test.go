package dedupe_test

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqs-once/sqs-once/internal/dedupe"
)

// countingWriter counts the table calls the store makes.
type countingWriter struct {
	dedupe.DynamoAPI
	calls atomic.Int32
}

func (c *countingWriter) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	c.calls.Add(1)
	return c.DynamoAPI.UpdateItem(ctx, in, o...)
}

// renewing is a guard with a 30 s lock renewed on the test's clock, and a
// function that runs until the test lets it finish.
type renewing struct {
	bundle
	guard   *dedupe.Guard
	calls   *countingWriter
	started chan struct{}
	finish  chan error
}

func setupRenewing(t *testing.T) renewing {
	t.Helper()
	b := setup(t)
	calls := &countingWriter{DynamoAPI: b.writer}
	r := newRenewing(b, b.newGuard(dedupe.NewStore(calls, b.table, "orders-fn")))
	r.calls = calls
	return r
}

// newRenewing makes g renew a 30 s lock on b's clock.
func newRenewing(b bundle, g *dedupe.Guard) renewing {
	g.LockTimeout = 30 * time.Second
	g.After = b.clock.After
	return renewing{bundle: b, guard: g, started: make(chan struct{}), finish: make(chan error)}
}

// slow runs until the test sends its result, or its context ends.
func (r renewing) slow(ctx context.Context) error {
	close(r.started)
	select {
	case err := <-r.finish:
		return err
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// tick moves the clock a renewal interval on, once the renewal is waiting,
// and returns once the renewal has run and waits again.
func (r renewing) tick(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := r.clock.WaitForWaiters(ctx, 1); err != nil {
		t.Fatalf("renewal not waiting: %v", err)
	}
	r.clock.Advance(10 * time.Second)
	if err := r.clock.WaitForWaiters(ctx, 1); err != nil {
		t.Fatalf("renewal did not come back: %v", err)
	}
}

func (r renewing) lockExpiresAt(t *testing.T, id string) int64 {
	t.Helper()
	n, _ := strconv.ParseInt(r.item(t, id)["lockExpiresAt"].(*types.AttributeValueMemberN).Value, 10, 64)
	return n
}

func TestRenewalKeepsASlowHandlersLock(t *testing.T) {
	t.Parallel()
	r := setupRenewing(t)
	done := make(chan dedupe.Result)
	go func() { done <- r.guard.Do(context.Background(), "k", r.slow) }()
	<-r.started

	for range 4 { // 40 s of work under a 30 s lock
		r.tick(t)
		if got, want := r.lockExpiresAt(t, "orders-fn#k"), r.clock.Now().Add(30*time.Second).UnixMilli(); got != want {
			t.Fatalf("lockExpiresAt %d after a renewal, want now + 30 s = %d", got, want)
		}
	}
	// Past the first lock's 30 s, another instance still finds it held.
	other := r.newGuard(dedupe.NewStore(r.writer, r.table, "orders-fn")).Do(context.Background(), "k", succeed)
	if other.Outcome != dedupe.InProgress {
		t.Fatalf("another holder at 40 s: %v, want in-progress: the renewed lock is live", other.Outcome)
	}
	r.finish <- nil
	res := <-done
	if res.Outcome != dedupe.Processed || res.LockLost || res.Fence == 0 {
		t.Fatalf("slow handler: %+v, want processed with its lock", res)
	}
	if got := r.calls.calls.Load(); got != 6 {
		t.Errorf("%d table calls, want 6: acquire, 4 renewals, complete", got)
	}
}

func TestAHandlerShorterThanTheRenewalIntervalMakesNoExtraCall(t *testing.T) {
	t.Parallel()
	r := setupRenewing(t)
	if res := r.guard.Do(context.Background(), "k", succeed); res.Outcome != dedupe.Processed {
		t.Fatal(res.Err)
	}
	if res := r.guard.Do(context.Background(), "k", succeed); res.Outcome != dedupe.Duplicate {
		t.Fatal(res.Err)
	}
	if res := r.guard.Do(context.Background(), "f", func(context.Context) error { return errors.New("no") }); res.Outcome != dedupe.Failed {
		t.Fatal(res.Err)
	}
	if got := r.calls.calls.Load(); got != 5 {
		t.Errorf("%d table calls, want 5: new 2, duplicate 1, failure 2", got)
	}
}

func TestRenewalThatFindsTheLockTakenOverCancelsTheHandler(t *testing.T) {
	t.Parallel()
	r := setupRenewing(t)
	done := make(chan dedupe.Result)
	go func() { done <- r.guard.Do(context.Background(), "k", r.slow) }()
	<-r.started

	// Another holder took the key over: what happens when this one was
	// paused longer than its lock (the case renewal cannot close).
	if _, err := r.client.PutItem(context.Background(), &dynamodb.PutItemInput{
		TableName: aws.String(r.table),
		Item: map[string]types.AttributeValue{
			"id":            &types.AttributeValueMemberS{Value: "orders-fn#k"},
			"status":        &types.AttributeValueMemberS{Value: "PROCESSING"},
			"owner":         &types.AttributeValueMemberS{Value: "successor"},
			"fence":         &types.AttributeValueMemberN{Value: "2"},
			"lockExpiresAt": &types.AttributeValueMemberN{Value: strconv.FormatInt(r.clock.Now().Add(time.Minute).UnixMilli(), 10)},
		},
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := r.clock.WaitForWaiters(ctx, 1); err != nil {
		t.Fatal(err)
	}
	r.clock.Advance(10 * time.Second)

	res := <-done
	if res.Outcome != dedupe.Failed || !res.LockLost || !errors.Is(res.Err, dedupe.ErrLockLost) {
		t.Fatalf("handler after losing its lock: %+v; want failed, its context cancelled with ErrLockLost", res)
	}
	if o := r.item(t, "orders-fn#k")["owner"].(*types.AttributeValueMemberS).Value; o != "successor" {
		t.Errorf("owner %s: the holder that lost its lock touched the successor's record", o)
	}
}
