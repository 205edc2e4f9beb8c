package sqsonce

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/memstore"
)

// The lock's side of store.Transactor, on memstore through Do and Handle:
// what each answer of Tx.Commit makes of the record, the message and the
// work's writes, and that the transaction costs no call of its own.

// txStore is memstore as a store.Transactor whose calls are logged in
// order (ops: "acquire", "renew", "complete", "release", "read", and the
// transaction's "commit" and "rollback") and whose Commit fails as fault
// says.
type txStore struct {
	*memstore.Store
	mu  sync.Mutex
	ops []string
	// untils are the until of every Commit, in order.
	untils []time.Time
	// fault, when set, is asked before each Commit (attempt counts from 1
	// over the store's life): err non-nil is returned instead of the
	// Commit's answer, the commit applied first when apply.
	fault func(attempt int) (apply bool, err error)
}

func (s *txStore) log(op string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ops = append(s.ops, op)
	n := 0
	for _, o := range s.ops {
		if o == op {
			n++
		}
	}
	return n
}

// calls returns the ops since the last calls, and forgets them.
func (s *txStore) calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ops := s.ops
	s.ops = nil
	return ops
}

func (s *txStore) setFault(f func(attempt int) (apply bool, err error)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fault = f
}

func (s *txStore) Acquire(ctx context.Context, req store.AcquireRequest) (store.Lease, error) {
	s.log("acquire")
	return s.Store.Acquire(ctx, req)
}

func (s *txStore) Renew(ctx context.Context, lease store.Lease, lockUntil time.Time) (store.Lease, error) {
	s.log("renew")
	return s.Store.Renew(ctx, lease, lockUntil)
}

func (s *txStore) Complete(ctx context.Context, lease store.Lease, c store.Completion) error {
	s.log("complete")
	return s.Store.Complete(ctx, lease, c)
}

func (s *txStore) Release(ctx context.Context, lease store.Lease, now time.Time) error {
	s.log("release")
	return s.Store.Release(ctx, lease, now)
}

func (s *txStore) Read(ctx context.Context, id string) (store.Record, error) {
	s.log("read")
	return s.Store.Read(ctx, id)
}

// Begin implements store.Transactor: memstore's transaction, its Commit
// and Rollback logged.
func (s *txStore) Begin(lease store.Lease) store.Tx {
	return &txLogged{Tx: s.Store.Begin(lease).(*memstore.Tx), s: s}
}

// txLogged is memstore's transaction, its Add the handler's (promoted).
type txLogged struct {
	*memstore.Tx
	s *txStore
}

func (t *txLogged) Commit(ctx context.Context, c store.Completion) error {
	attempt := t.s.log("commit")
	t.s.mu.Lock()
	t.s.untils = append(t.s.untils, c.Until)
	fault := t.s.fault
	t.s.mu.Unlock()
	if fault != nil {
		if apply, err := fault(attempt); err != nil {
			if apply {
				if cerr := t.Tx.Commit(ctx, c); cerr != nil {
					return cerr
				}
			}
			return err
		}
	}
	return t.Tx.Commit(ctx, c)
}

func (t *txLogged) Rollback(ctx context.Context) error {
	t.s.log("rollback")
	return t.Tx.Rollback(ctx)
}

// txAdd is what a handler on memstore does to write transactionally: it
// adds w to the transaction its context carries (store.TxFrom, a
// *memstore.Tx; here the logged one, whose Add is memstore's).
func txAdd(ctx context.Context, w any) error {
	tx, ok := store.TxFrom(ctx).(interface{ Add(write any) error })
	if !ok {
		return fmt.Errorf("the handler's context carries no memstore transaction (%T)", store.TxFrom(ctx))
	}
	return tx.Add(w)
}

// txBed is a Do processor and a Consumer on one txStore, the outcomes
// they reported, and how many times the work ran.
type txBed struct {
	st *txStore
	do *Processor
	// work is the handler's and Do's function: run counts from 1.
	work func(ctx context.Context, key string, run int) error

	mu       sync.Mutex
	outcomes []Outcome
	runs     int
}

func newTxBed(t *testing.T, work func(ctx context.Context, key string, run int) error) (*txBed, *Processor) {
	t.Helper()
	b := &txBed{st: &txStore{Store: memstore.New()}, work: work}
	cfg := Config{Store: b.st, KeyPrefix: lockPrefix, LockTimeout: 30 * time.Second, DedupeWindow: time.Hour, Logger: lockQuiet,
		Test: TestConfig{Now: b.st.Now}, OnOutcome: func(_ context.Context, o Outcome) {
			b.mu.Lock()
			defer b.mu.Unlock()
			b.outcomes = append(b.outcomes, o)
		}}
	// No renewal timer fires (a nil channel), and a commit retries at once.
	d := deps{after: func(time.Duration) <-chan time.Time { return nil }, sleep: lockNoSleep}
	var err error
	if b.do, err = newDo(cfg, d); err != nil {
		t.Fatal(err)
	}
	consumer, err := newProcessor(ConsumerConfig{Config: cfg}, func(ctx context.Context, msg events.SQSMessage) error {
		return b.run(ctx, msg.MessageId)
	}, d)
	if err != nil {
		t.Fatal(err)
	}
	return b, consumer
}

func (b *txBed) run(ctx context.Context, key string) error {
	b.mu.Lock()
	b.runs++
	run := b.runs
	b.mu.Unlock()
	return b.work(ctx, key, run)
}

// last is the latest Outcome reported.
func (b *txBed) last(t *testing.T) Outcome {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.outcomes) == 0 {
		t.Fatal("no Outcome reported")
	}
	return b.outcomes[len(b.outcomes)-1]
}

func (b *txBed) ran() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.runs
}

// txOrder is a write of the tests' handlers: an order row.
type txOrder struct{ key string }

var (
	errTxTransient = errors.New("connection reset by peer")
	errTxBoom      = errors.New("handler failed")
	errTxCondition = errors.New("order already exists")
)

func TestLockTxEachCommitAnswer(t *testing.T) {
	t.Parallel()
	// writes adds the run's order row; the refused case adds a failing
	// condition on the first run only, so that the retry can commit.
	writes := func(ctx context.Context, key string) error { return txAdd(ctx, txOrder{key}) }
	unknown := func(times int, applyFirst bool) func(int) (bool, error) {
		return func(attempt int) (bool, error) {
			if attempt > times {
				return false, nil
			}
			return applyFirst && attempt == 1, fmt.Errorf("commit: %w", errTxTransient)
		}
	}
	tests := []struct {
		name string
		work func(ctx context.Context, key string, run int) error
		// intrude, when set, runs inside the first run, after its writes:
		// the lock expires and another holder takes the key over.
		intrude bool
		fault   func(attempt int) (apply bool, err error)
		// noWrites: the work adds nothing.
		noWrites bool
		// What the first delivery makes of it.
		ops        []string
		status     store.Status
		committed  bool
		kind       Kind
		reason     Reason
		doErr      func(error) bool
		retried    bool
		commitsSet int // Commit calls, each with the same until
	}{
		{
			name: "processed", work: func(ctx context.Context, key string, _ int) error { return writes(ctx, key) },
			ops: []string{"acquire", "commit"}, status: store.StatusCompleted, committed: true, kind: KindProcessed,
			doErr: func(err error) bool { return err == nil }, commitsSet: 1,
		},
		{
			name: "empty", work: func(context.Context, string, int) error { return nil }, noWrites: true,
			ops: []string{"acquire", "complete"}, status: store.StatusCompleted, kind: KindProcessed,
			doErr: func(err error) bool { return err == nil },
		},
		{
			name: "work-fails", work: func(ctx context.Context, key string, run int) error {
				if err := writes(ctx, key); err != nil || run > 1 {
					return err
				}
				return errTxBoom
			},
			ops: []string{"acquire", "rollback", "release"}, status: store.StatusReleased, kind: KindFailed, reason: ReasonHandlerError,
			doErr: func(err error) bool { return errors.Is(err, errTxBoom) }, retried: true,
		},
		{
			name: "effect-refused", work: func(ctx context.Context, key string, run int) error {
				if err := writes(ctx, key); err != nil || run > 1 {
					return err
				}
				return txAdd(ctx, memstore.FailingCondition{Err: errTxCondition})
			},
			ops: []string{"acquire", "commit", "release"}, status: store.StatusReleased, kind: KindFailed, reason: ReasonHandlerError,
			doErr: func(err error) bool {
				var refused *store.EffectError
				return errors.As(err, &refused) && errors.Is(err, errTxCondition)
			},
			retried: true, commitsSet: 1,
		},
		{
			name: "lock-taken-over", work: func(ctx context.Context, key string, _ int) error { return writes(ctx, key) }, intrude: true,
			ops: []string{"acquire", "commit"}, status: store.StatusProcessing, kind: KindFailed, reason: ReasonLockLost,
			doErr: func(err error) bool { return errors.Is(err, ErrLockLost) }, retried: true, commitsSet: 1,
		},
		{
			name: "unknown-then-committed", work: func(ctx context.Context, key string, _ int) error { return writes(ctx, key) },
			fault: unknown(2, false),
			ops:   []string{"acquire", "commit", "commit", "commit"}, status: store.StatusCompleted, committed: true, kind: KindProcessed,
			doErr: func(err error) bool { return err == nil }, commitsSet: 3,
		},
		{
			name: "unknown-applied-then-recognised", work: func(ctx context.Context, key string, _ int) error { return writes(ctx, key) },
			fault: unknown(2, true),
			ops:   []string{"acquire", "commit", "commit", "commit"}, status: store.StatusCompleted, committed: true, kind: KindProcessed,
			doErr: func(err error) bool { return err == nil }, commitsSet: 3,
		},
		{
			name: "unknown-every-attempt", work: func(ctx context.Context, key string, _ int) error { return writes(ctx, key) },
			fault: unknown(completeAttempts, false),
			ops:   []string{"acquire", "commit", "commit", "commit", "commit"}, status: store.StatusProcessing, kind: KindFailed, reason: ReasonCommitUnknown,
			doErr: func(err error) bool { return errors.Is(err, ErrUnavailable) && errors.Is(err, errTxTransient) }, retried: true, commitsSet: completeAttempts,
		},
		{
			name: "unknown-every-attempt-first-applied", work: func(ctx context.Context, key string, _ int) error { return writes(ctx, key) },
			fault: unknown(completeAttempts, true),
			ops:   []string{"acquire", "commit", "commit", "commit", "commit"}, status: store.StatusCompleted, committed: true, kind: KindFailed, reason: ReasonCommitUnknown,
			doErr: func(err error) bool { return errors.Is(err, ErrUnavailable) && errors.Is(err, errTxTransient) }, retried: true, commitsSet: completeAttempts,
		},
		{
			name: "not-committed", work: func(ctx context.Context, key string, _ int) error { return writes(ctx, key) },
			fault: func(attempt int) (bool, error) {
				if attempt > 1 {
					return false, nil
				}
				return false, fmt.Errorf("connection gone: %w", store.ErrNotCommitted)
			},
			ops: []string{"acquire", "commit", "release"}, status: store.StatusReleased, kind: KindFailed, reason: ReasonNotCommitted,
			doErr: func(err error) bool { return errors.Is(err, store.ErrNotCommitted) }, retried: true, commitsSet: 1,
		},
	}
	for _, tt := range tests {
		for _, via := range []string{"Do", "Handle"} {
			t.Run(tt.name+"/"+via, func(t *testing.T) {
				t.Parallel()
				var b *txBed
				work := tt.work
				if tt.intrude {
					work = func(ctx context.Context, key string, run int) error {
						err := tt.work(ctx, key, run)
						if run == 1 {
							b.st.Advance(31 * time.Second)
							now := b.st.Now()
							if _, aerr := b.st.Store.Acquire(context.Background(), store.AcquireRequest{ID: lockID(key), Owner: "intruder", Now: now, LockUntil: now.Add(30 * time.Second)}); aerr != nil {
								return fmt.Errorf("the intruder's takeover: %w", aerr)
							}
						}
						return err
					}
				}
				b, consumer := newTxBed(t, work)
				b.st.setFault(tt.fault)
				key := "order-" + via
				id := lockID(key)
				deliver := func() (retried bool, err error) {
					if via == "Do" {
						err := b.do.Do(context.Background(), key, func(ctx context.Context) error { return b.run(ctx, key) })
						// A duplicate is done: the caller has its answer.
						return err != nil && !errors.Is(err, ErrDuplicate), err
					}
					return slices.Contains(handleWith(t, consumer, procRecord(key, "{}")), key), nil
				}

				retried, err := deliver()
				o := b.last(t)
				if via == "Do" && !tt.doErr(err) {
					t.Errorf("Do returned %v; not the error this case wants", err)
				}
				if retried != tt.retried {
					t.Errorf("retried (Do's error, Handle's batch item failure) %v; want %v", retried, tt.retried)
				}
				if o.Kind != tt.kind || o.Reason != tt.reason || o.LockLost != (tt.reason == ReasonLockLost) {
					t.Errorf("Outcome %s/%s, LockLost %v (err %v); want %s/%s, LockLost only when the lock was lost", o.Kind, o.Reason, o.LockLost, o.Err, tt.kind, tt.reason)
				}
				if got := b.st.calls(); !slices.Equal(got, tt.ops) {
					t.Errorf("store calls %v; want %v", got, tt.ops)
				}
				rec := b.st.Records()[id]
				if rec.Status != tt.status {
					t.Errorf("record %s; want %s", rec, tt.status)
				}
				switch {
				case tt.intrude:
					if rec.Owner != "intruder" {
						t.Errorf("record %s; want the intruder's lock, untouched", rec)
					}
				case tt.status == store.StatusProcessing:
					// Left, not released: the record settles an unknown
					// commit once the lock expires.
					if rec.Fence != o.Fence || !rec.Live(b.st.Now()) {
						t.Errorf("record %s; want this holder's lock (fence %d), left to expire", rec, o.Fence)
					}
				}
				committed := b.st.Committed()[id]
				if want := []any{txOrder{key}}; tt.committed != slices.Equal(committed, want) || (!tt.committed && len(committed) > 0) {
					t.Errorf("committed writes %v; want them committed (%v) exactly once: %v", committed, tt.committed, want)
				}
				b.st.mu.Lock()
				untils := b.st.untils
				b.st.mu.Unlock()
				if len(untils) != tt.commitsSet || slices.ContainsFunc(untils, func(u time.Time) bool { return !u.Equal(untils[0]) }) {
					t.Errorf("Commit's untils %v; want %d, all the same (a retry repeats the first attempt exactly)", untils, tt.commitsSet)
				}

				// Redelivered once every lock has expired and the store
				// answers: the writes are committed, once.
				b.st.setFault(nil)
				b.st.Advance(31 * time.Second)
				ranBefore := b.ran()
				if retried, err := deliver(); retried {
					t.Errorf("the redelivery was retried again (%v); want it done", err)
				}
				if ranAgain := b.ran() > ranBefore; ranAgain != (tt.status != store.StatusCompleted) {
					t.Errorf("the redelivery ran the work %v; want it run only when the first delivery did not complete the key", ranAgain)
				}
				want := []any{txOrder{key}}
				if tt.noWrites {
					want = nil
				}
				if committed := b.st.Committed()[id]; !slices.Equal(committed, want) {
					t.Errorf("after the redelivery the committed writes are %v; want %v: the order row exactly once, if the work writes it", committed, want)
				}
			})
		}
	}
}

// TestLockTxOnMemstoreThroughThePublicAPI: a handler written as a user
// writes one on memstore (store.TxFrom(ctx).(*memstore.Tx).Add), run by
// New's Do, DoResult and NewConsumer's Handle: its writes are committed
// with the completion and its result stored, and a duplicate runs nothing.
func TestLockTxOnMemstoreThroughThePublicAPI(t *testing.T) {
	t.Parallel()
	mem := memstore.New()
	cfg := Config{Store: mem, KeyPrefix: lockPrefix, DedupeWindow: time.Hour, Logger: lockQuiet, Test: TestConfig{Now: mem.Now}}
	runs := 0
	work := func(ctx context.Context, key string) error {
		runs++
		tx, ok := store.TxFrom(ctx).(*memstore.Tx)
		if !ok {
			return fmt.Errorf("the context carries %T, want a *memstore.Tx", store.TxFrom(ctx))
		}
		return tx.Add(txOrder{key})
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	consumer, err := NewConsumer(ConsumerConfig{Config: cfg}, func(ctx context.Context, msg events.SQSMessage) error { return work(ctx, msg.MessageId) })
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := p.Do(ctx, "do", func(ctx context.Context) error { return work(ctx, "do") }); err != nil {
		t.Fatalf("Do: %v", err)
	}
	total, err := DoResult(ctx, p, "result", func(ctx context.Context) (int, error) { return 42, work(ctx, "result") })
	if err != nil || total != 42 {
		t.Fatalf("DoResult: %v, %v", total, err)
	}
	if failed := handleWith(t, consumer, procRecord("handle", "{}")); len(failed) != 0 {
		t.Fatalf("Handle failed %v", failed)
	}
	for _, key := range []string{"do", "result", "handle"} {
		if got := mem.Committed()[lockID(key)]; !slices.Equal(got, []any{txOrder{key}}) {
			t.Errorf("key %s: committed writes %v; want its order row", key, got)
		}
		if rec := mem.Records()[lockID(key)]; rec.Status != store.StatusCompleted {
			t.Errorf("key %s: record %s; want COMPLETED", key, rec)
		}
	}
	if rec := mem.Records()[lockID("result")]; string(rec.Result) != "42" {
		t.Errorf("DoResult's stored result %q; want 42", rec.Result)
	}
	// Duplicates: the stored result answers, nothing runs or commits again.
	if err := p.Do(ctx, "do", func(ctx context.Context) error { return work(ctx, "do") }); !errors.Is(err, ErrDuplicate) {
		t.Errorf("Do of a completed key: %v; want ErrDuplicate", err)
	}
	if again, err := DoResult(ctx, p, "result", func(ctx context.Context) (int, error) { return 0, work(ctx, "result") }); err != nil || again != 42 {
		t.Errorf("DoResult of a completed key: %v, %v; want the stored 42", again, err)
	}
	if failed := handleWith(t, consumer, procRecord("handle", "{}")); len(failed) != 0 {
		t.Errorf("Handle of a duplicate failed %v", failed)
	}
	if runs != 3 {
		t.Errorf("the work ran %d times; want 3, once per key", runs)
	}
	for _, key := range []string{"do", "result", "handle"} {
		if got := mem.Committed()[lockID(key)]; len(got) != 1 {
			t.Errorf("key %s: committed writes %v after the duplicates; want one", key, got)
		}
	}
}
