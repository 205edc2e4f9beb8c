package sqsonce_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
	"github.com/sqs-once/sqs-once/sqsonce/store/memstore"
)

// The transaction a work's context carries, from outside the package: it
// is its own lock's or none, and it takes nothing once the work returned.

// wrapped is a store as a program wraps one to count or log its calls:
// store.Store's methods only, so it is no store.Transactor.
type wrapped struct{ store.Store }

func orderPut(id string) types.TransactWriteItem {
	return types.TransactWriteItem{Put: &types.Put{TableName: aws.String("orders"), Item: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: id}}}}
}

func newDo(t *testing.T, s store.Store, prefix string, configure ...func(*sqsonce.Config)) *sqsonce.Processor {
	t.Helper()
	cfg := sqsonce.Config{Store: s, KeyPrefix: prefix, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, f := range configure {
		f(&cfg)
	}
	p, err := sqsonce.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestNestedDoOnAStoreWithoutTransactionsHasNone: a Do whose work nests a
// Do on a store without transactions. The inner work's context carries no
// transaction (the outer's would be rolled back with the outer work, after
// the inner key completed: an effect lost for good), so its
// dynamostore.Add fails, the inner key is not completed, and nothing of
// the inner write is committed. A Do nested on a transactional store gets
// its own lock's transaction, not the outer's.
func TestNestedDoOnAStoreWithoutTransactionsHasNone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	outerStore := memstore.New()
	outer := newDo(t, outerStore, "outer")
	plain := memstore.New()
	inner := newDo(t, wrapped{plain}, "inner")
	var innerAdd error
	var innerTx store.Tx
	err := outer.Do(ctx, "order-1", func(ctx context.Context) error {
		if err := dynamostore.Add(ctx, orderPut("order-1")); err != nil {
			return err
		}
		ierr := inner.Do(ctx, "receipt-1", func(ctx context.Context) error {
			innerTx = store.TxFrom(ctx)
			innerAdd = dynamostore.Add(ctx, orderPut("receipt-1"))
			return innerAdd
		})
		if ierr == nil {
			// The outer work goes on and fails later: its rollback would
			// drop a receipt write that joined its transaction.
			return errors.New("a later step failed")
		}
		return ierr
	})
	if innerAdd == nil || innerTx != nil {
		t.Fatalf("the nested work on a store without transactions: dynamostore.Add returned %v, its context carries %T; want an error and no transaction (it would join the outer lock's)", innerAdd, innerTx)
	}
	if err == nil {
		t.Fatal("the outer Do succeeded; want the inner refusal as its error")
	}
	if rec, rerr := plain.Read(ctx, store.RecordID("inner", "receipt-1")); rerr == nil && rec.Status == store.StatusCompleted {
		t.Errorf("the inner key is COMPLETED with its write not committed: the receipt is lost for good")
	}
	if got := outerStore.Committed(); len(got) != 0 {
		t.Errorf("committed writes %v; want none (the outer work failed)", got)
	}

	// On the same transactional store, the nested Do has a transaction of
	// its own: committed with its own key, whatever the outer work does.
	var outerTx, nestedTx store.Tx
	err = outer.Do(ctx, "order-2", func(ctx context.Context) error {
		outerTx = store.TxFrom(ctx)
		if err := outer.Do(ctx, "receipt-2", func(ctx context.Context) error {
			nestedTx = store.TxFrom(ctx)
			return dynamostore.Add(ctx, orderPut("receipt-2"))
		}); err != nil {
			return err
		}
		return errors.New("a later step failed")
	})
	if err == nil || nestedTx == nil || nestedTx == outerTx {
		t.Fatalf("a Do nested on the same transactional store: outer error %v, its transaction %p, the outer's %p; want its own", err, nestedTx, outerTx)
	}
	if got := outerStore.Committed()[store.RecordID("outer", "receipt-2")]; len(got) != 1 {
		t.Errorf("the nested key's committed writes %v; want its one write, committed with its key", got)
	}
}

// TestWriteAfterTheWorkReturnedIsRefused: a goroutine the work left behind
// adds a write after the work returned. It gets an error matching
// store.ErrTxEnded, never nil, whether the work had written (the commit
// took its writes) or not (the completion was a plain one).
func TestWriteAfterTheWorkReturnedIsRefused(t *testing.T) {
	t.Parallel()
	for _, wrote := range []bool{true, false} {
		name := map[bool]string{true: "the work wrote", false: "the work wrote nothing"}[wrote]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			mem := memstore.New()
			p := newDo(t, mem, "app")
			returned := make(chan struct{})
			late := make(chan error, 1)
			err := p.Do(context.Background(), "k", func(ctx context.Context) error {
				go func() {
					<-returned
					late <- dynamostore.Add(ctx, orderPut("late"))
				}()
				if wrote {
					return dynamostore.Add(ctx, orderPut("k"))
				}
				return nil
			})
			close(returned)
			if err != nil {
				t.Fatal(err)
			}
			if lerr := <-late; !errors.Is(lerr, store.ErrTxEnded) {
				t.Errorf("dynamostore.Add after the work returned: %v; want an error matching store.ErrTxEnded (a nil error drops the write silently)", lerr)
			}
			want := 0
			if wrote {
				want = 1
			}
			if got := mem.Committed()[store.RecordID("app", "k")]; len(got) != want {
				t.Errorf("committed writes %v; want %d (the work's only)", got, want)
			}
		})
	}
}

// TestPermanentEffectDo: Do's error for a transaction refused by a
// condition of the work's own writes is Permanent when
// Config.PermanentEffect says so, and the store's detail stays reachable;
// otherwise it is the retryable failure it always was. The lock is
// released either way.
func TestPermanentEffectDo(t *testing.T) {
	t.Parallel()
	refusal := errors.New("order A-1 is cancelled")
	for _, marked := range []bool{true, false} {
		name := map[bool]string{true: "marked", false: "unmarked"}[marked]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			mem := memstore.New()
			var outcome sqsonce.Outcome
			p := newDo(t, mem, "app", func(c *sqsonce.Config) {
				c.OnOutcome = func(_ context.Context, o sqsonce.Outcome) { outcome = o }
				if marked {
					c.PermanentEffect = func(err *store.EffectError) bool { return errors.Is(err, refusal) }
				}
			})
			err := p.Do(context.Background(), "A-1", func(ctx context.Context) error {
				return store.TxFrom(ctx).(*memstore.Tx).Add(memstore.FailingCondition{Err: refusal})
			})
			var effect *store.EffectError
			if !errors.As(err, &effect) || !errors.Is(err, refusal) {
				t.Fatalf("Do returned %v; want the *store.EffectError, its detail reachable", err)
			}
			if got := sqsonce.IsPermanent(err); got != marked {
				t.Errorf("IsPermanent(%v) = %v, want %v", err, got, marked)
			}
			if outcome.Kind != sqsonce.KindFailed || outcome.Reason != sqsonce.ReasonHandlerError {
				t.Errorf("Outcome %s/%s; want Failed/handler-error", outcome.Kind, outcome.Reason)
			}
			if rec, err := mem.Read(context.Background(), store.RecordID("app", "A-1")); err != nil || rec.Status != store.StatusReleased {
				t.Errorf("record %v (%v); want RELEASED", rec, err)
			}
		})
	}
}
