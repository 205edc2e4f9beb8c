package dedupe_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqs-once/sqs-once/internal/dedupe"
	"github.com/sqs-once/sqs-once/internal/local/motoserver"
	"github.com/sqs-once/sqs-once/internal/local/mototest"
	"github.com/sqs-once/sqs-once/internal/testclock"
)

type bundle struct {
	client *dynamodb.Client
	// writer is the client as the store sees it: moto's writes made atomic,
	// as DynamoDB's are (see motoserver.SerializeWrites).
	writer motoserver.DynamoWriter
	table  string
	store  *dedupe.Store
	clock  *testclock.Clock
	guard  *dedupe.Guard
}

// setup gives each test its own table on the shared moto_server. The clock
// starts at the real time, so that a context deadline set from it is one the
// SDK's real calls can meet.
func setup(t *testing.T) bundle {
	t.Helper()
	cfg := mototest.Config(t)
	b := bundle{client: dynamodb.NewFromConfig(cfg), table: mototest.NewIdempotencyTable(t, cfg), clock: testclock.New(time.Now().Truncate(time.Second))}
	b.writer = motoserver.SerializeWrites(b.client)
	b.store = dedupe.NewStore(b.writer, b.table, "orders-fn")
	b.guard = b.newGuard(b.store)
	return b
}

func (b bundle) newGuard(store *dedupe.Store) *dedupe.Guard {
	return &dedupe.Guard{
		Store:        store,
		LockTimeout:  30 * time.Second,
		DedupeWindow: time.Hour,
		Now:          b.clock.Now,
		Sleep:        func(context.Context, time.Duration) error { return nil },
	}
}

func (b bundle) item(t *testing.T, id string) map[string]types.AttributeValue {
	t.Helper()
	out, err := b.client.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName:      aws.String(b.table),
		Key:            map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: id}},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		t.Fatalf("get item %s: %v", id, err)
	}
	return out.Item
}

func succeed(context.Context) error { return nil }

// firstFence is the fence of a record's first acquisition at the bundle's
// current time: the clock in milliseconds, plus one.
func (b bundle) firstFence() int64 { return b.clock.Now().UnixMilli() + 1 }

// status is the record's status, "" when there is no record.
func (b bundle) status(t *testing.T, id string) string {
	t.Helper()
	s, _ := b.item(t, id)["status"].(*types.AttributeValueMemberS)
	if s == nil {
		return ""
	}
	return s.Value
}

func TestConcurrentHoldersRunHandlerOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const holders = 32
	var runs atomic.Int32
	var wg sync.WaitGroup
	outcomes := make([]dedupe.Outcome, holders)
	start := make(chan struct{})
	for i := range holders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			// Each holder has its own Store, as separate Lambda instances do.
			g := b.newGuard(dedupe.NewStore(b.writer, b.table, "orders-fn"))
			outcomes[i] = g.Do(context.Background(), "order-42", func(context.Context) error {
				runs.Add(1)
				return nil
			}).Outcome
		}()
	}
	close(start)
	wg.Wait()

	if got := runs.Load(); got != 1 {
		t.Fatalf("handler ran %d times across %d racing holders, want exactly 1", got, holders)
	}
	count := map[dedupe.Outcome]int{}
	for _, o := range outcomes {
		count[o]++
	}
	if count[dedupe.Processed] != 1 || count[dedupe.Duplicate]+count[dedupe.InProgress] != holders-1 {
		t.Errorf("outcomes %v: want 1 processed and the rest duplicate or in-progress", count)
	}
}

func TestDuplicateAfterCompletionDoesNotRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if res := b.guard.Do(context.Background(), "k", succeed); res.Outcome != dedupe.Processed {
		t.Fatalf("first delivery: %v (%v), want processed", res.Outcome, res.Err)
	}
	item := b.item(t, "orders-fn#k")
	if s := item["status"].(*types.AttributeValueMemberS).Value; s != "COMPLETED" {
		t.Errorf("status = %s, want COMPLETED", s)
	}
	wantExpiry := b.clock.Now().Add(time.Hour).Unix()
	if e := item["expiresAt"].(*types.AttributeValueMemberN).Value; e != itoa(wantExpiry) {
		t.Errorf("expiresAt = %s, want now + dedupe window = %d", e, wantExpiry)
	}

	b.clock.Advance(59 * time.Minute)
	ran := false
	res := b.guard.Do(context.Background(), "k", func(context.Context) error { ran = true; return nil })
	if res.Outcome != dedupe.Duplicate || ran {
		t.Fatalf("second delivery: outcome %v, handler ran %v; want duplicate, not run", res.Outcome, ran)
	}
	var held *dedupe.HeldError
	if !errors.As(res.Err, &held) || !errors.Is(res.Err, dedupe.ErrDuplicate) || held.Until.Unix() != wantExpiry {
		t.Errorf("refusal %v should be a *HeldError matching ErrDuplicate until %d", res.Err, wantExpiry)
	}
}

func TestInProgressUntilLockExpiresThenTakenOver(t *testing.T) {
	t.Parallel()
	b := setup(t)
	first, err := b.store.Acquire(context.Background(), "k", b.clock.Now(), b.clock.Now().Add(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}

	res := b.guard.Do(context.Background(), "k", succeed)
	if res.Outcome != dedupe.InProgress || !errors.Is(res.Err, dedupe.ErrInProgress) {
		t.Fatalf("while locked: %v (%v), want in-progress", res.Outcome, res.Err)
	}
	var held *dedupe.HeldError
	if !errors.As(res.Err, &held) || !held.Until.Equal(first.LockExpiresAt) {
		t.Errorf("refusal %v should say the lock ends at %v", res.Err, first.LockExpiresAt)
	}

	b.clock.Advance(30*time.Second + time.Millisecond)
	res = b.guard.Do(context.Background(), "k", succeed)
	if res.Outcome != dedupe.Processed || !res.TookOver {
		t.Fatalf("after lock expiry: %v took over=%v (%v), want processed by takeover", res.Outcome, res.TookOver, res.Err)
	}
}

func TestStaleHolderCannotCompleteOrRelease(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	stale, err := b.store.Acquire(ctx, "k", b.clock.Now(), b.clock.Now().Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(2 * time.Second)
	fresh, err := b.store.Acquire(ctx, "k", b.clock.Now(), b.clock.Now().Add(time.Minute))
	if err != nil {
		t.Fatalf("takeover of an expired lock: %v", err)
	}

	if err := b.store.Complete(ctx, stale, b.clock.Now(), time.Hour); !errors.Is(err, dedupe.ErrLockLost) {
		t.Errorf("stale complete: %v, want ErrLockLost", err)
	}
	if err := b.store.Release(ctx, stale, b.clock.Now()); !errors.Is(err, dedupe.ErrLockLost) {
		t.Errorf("stale release: %v, want ErrLockLost", err)
	}
	item := b.item(t, "orders-fn#k")
	if o := item["owner"].(*types.AttributeValueMemberS).Value; o != fresh.Owner {
		t.Fatalf("owner = %s, want the new holder %s", o, fresh.Owner)
	}
	if s := item["status"].(*types.AttributeValueMemberS).Value; s != "PROCESSING" {
		t.Errorf("status = %s: the stale holder overwrote the new holder's record", s)
	}
	if err := b.store.Complete(ctx, fresh, b.clock.Now(), time.Hour); err != nil {
		t.Errorf("new holder's complete: %v", err)
	}
}

func TestExpiredCompletionCountsAsAbsent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if res := b.guard.Do(context.Background(), "k", succeed); res.Outcome != dedupe.Processed {
		t.Fatal(res.Err)
	}
	// Past the window but before TTL gets round to deleting the item.
	b.clock.Advance(time.Hour + time.Second)
	if len(b.item(t, "orders-fn#k")) == 0 {
		t.Fatal("item vanished; the test needs it present past expiresAt")
	}
	runs := 0
	res := b.guard.Do(context.Background(), "k", func(context.Context) error { runs++; return nil })
	if res.Outcome != dedupe.Processed || runs != 1 || !res.TookOver {
		t.Fatalf("after the window: %v ran %d took over=%v, want processed once by takeover", res.Outcome, runs, res.TookOver)
	}
}

func TestFailedHandlerReleasesLockForImmediateRetry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	boom := errors.New("downstream 503")
	res := b.guard.Do(context.Background(), "k", func(context.Context) error { return boom })
	if res.Outcome != dedupe.Failed || !errors.Is(res.Err, boom) || res.ReleaseErr != nil {
		t.Fatalf("failing handler: %v err=%v release=%v", res.Outcome, res.Err, res.ReleaseErr)
	}
	if s := b.status(t, "orders-fn#k"); s != "RELEASED" {
		t.Fatalf("status %q, want RELEASED: the record keeps its fence", s)
	}
	if res := b.guard.Do(context.Background(), "k", succeed); res.Outcome != dedupe.Processed {
		t.Fatalf("retry after release: %v (%v)", res.Outcome, res.Err)
	}
}

func TestKeysArePrefixedSoConsumersCanShareATable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	other := b.newGuard(dedupe.NewStore(b.writer, b.table, "emails-fn"))
	for _, g := range []*dedupe.Guard{b.guard, other} {
		if res := g.Do(context.Background(), "same-key", succeed); res.Outcome != dedupe.Processed {
			t.Fatalf("prefix consumer: %v (%v), want processed: prefixes must not collide", res.Outcome, res.Err)
		}
	}
	for _, id := range []string{"orders-fn#same-key", "emails-fn#same-key"} {
		if len(b.item(t, id)) == 0 {
			t.Errorf("no record %s", id)
		}
	}
}

func TestLockLength(t *testing.T) {
	t.Parallel()
	b := setup(t)
	now := b.clock.Now()
	deadline := now.Add(40 * time.Second)
	tests := []struct {
		name        string
		lockTimeout time.Duration
		deadline    bool
		want        time.Time
	}{
		{"LOCK_TIMEOUT wins", 2 * time.Minute, true, now.Add(2 * time.Minute)},
		{"invocation deadline plus margin", 0, true, deadline.Add(dedupe.DeadlineMargin)},
		{"never open-ended", 0, false, now.Add(dedupe.NoDeadlineLockTimeout)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := b.newGuard(b.store)
			g.LockTimeout = tt.lockTimeout
			ctx := context.Background()
			if tt.deadline {
				// A deadline far in the real future, so the SDK call is not
				// cut short; the guard reads it against the test clock.
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, deadline)
				defer cancel()
			}
			var item map[string]types.AttributeValue
			g.Do(ctx, tt.name, func(context.Context) error { item = b.item(t, "orders-fn#"+tt.name); return nil })
			if got := item["lockExpiresAt"].(*types.AttributeValueMemberN).Value; got != itoa(tt.want.UnixMilli()) {
				t.Errorf("lockExpiresAt = %s, want %d", got, tt.want.UnixMilli())
			}
		})
	}
}
