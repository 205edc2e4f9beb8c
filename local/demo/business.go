package demo

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/sqs-once/sqs-once/internal/sqsmsg"
	"github.com/sqs-once/sqs-once/sqsonce"
)

var (
	errPoison    = errors.New("poison message: the handler always fails on it")
	errTransient = errors.New("transient failure: downstream unavailable, try again later")
	errCrashed   = errors.New("simulated crash: this invocation was abandoned after its side effect")
)

// Business is the demo's business handler, the sqsonce.Handler the processor
// runs in place of cmd/processor's. Its side effect is a line in the ledger
// (with -tx, an item of the business table, written in the transaction that
// records its key's completion); it fails poison keys always, transient keys
// for a while, rejects permanent keys with sqsonce.Permanent, and can
// simulate a crash right after a side effect. With -emit or -emit-inline it
// also hands an OrderAccepted message to the second stage after its side
// effect (pipeline.accept); with -emit a crash key then crashes in the
// send, after its commit (crashingSender), not in the handler.
type Business struct {
	ledger *Ledger
	// effects is -tx's business table, nil without -tx.
	effects *effectTable
	// pipe is -emit's or -emit-inline's second stage, nil without: the
	// handler hands it an OrderAccepted after its side effect.
	pipe *pipeline
	keys map[string]Key

	mu       sync.Mutex
	attempts map[string]int
	crashed  map[string]bool

	// release is closed when the run ends; a crashed invocation hangs on it,
	// past its function timeout, as a frozen or killed sandbox would never
	// reach its completion write.
	release     chan struct{}
	releaseOnce sync.Once
}

// NewBusiness returns the handler for the workload's keys.
func NewBusiness(ledger *Ledger, w Workload) *Business {
	return &Business{
		ledger:   ledger,
		keys:     w.KeyIndex(),
		attempts: map[string]int{},
		crashed:  map[string]bool{},
		release:  make(chan struct{}),
	}
}

// NewTransactionalBusiness returns the handler of -tx: each side effect is
// still numbered in the ledger, which then lists the effects the handler
// staged, and is added with dynamostore.Add to the transaction sqsonce
// commits with the key's completion, as an item of effects. A crash after
// the side effect is then a crash before the commit: nothing of it is
// applied.
func NewTransactionalBusiness(ledger *Ledger, effects *effectTable, w Workload) *Business {
	b := NewBusiness(ledger, w)
	b.effects = effects
	return b
}

// sideEffect makes e: a ledger line, or with -tx a ledger line of the
// effect staged and its item added to the work's transaction.
func (b *Business) sideEffect(ctx context.Context, e Entry) (Entry, error) {
	made, err := b.ledger.record(ctx, e)
	if err != nil || b.effects == nil {
		return made, err
	}
	return made, b.effects.stage(ctx, made)
}

// Release lets crashed invocations return. Their completion or release of
// the lock then fails, because by then the lock has been taken over.
func (b *Business) Release() { b.releaseOnce.Do(func() { close(b.release) }) }

// Handle is an sqsonce.Handler.
func (b *Business) Handle(ctx context.Context, msg events.SQSMessage) error {
	body, err := ParseBody(msg.Body)
	if err != nil {
		return sqsonce.Permanent(err)
	}
	key, ok := b.keys[body.OrderID]
	if !ok {
		return sqsonce.Permanent(fmt.Errorf("order %q is not part of this run", body.OrderID))
	}

	b.mu.Lock()
	b.attempts[key.ID]++
	attempt := b.attempts[key.ID]
	crash := key.Crash && !b.crashed[key.ID]
	if crash {
		b.crashed[key.ID] = true
	}
	b.mu.Unlock()

	switch key.Kind {
	case Poison:
		return errPoison
	case Permanent:
		return sqsonce.Permanent(fmt.Errorf("order %s: amount field is not a valid currency amount", key.ID))
	case Transient:
		if attempt <= key.Failures {
			return fmt.Errorf("attempt %d of %d failing: %w", attempt, key.Failures, errTransient)
		}
	}

	e := Entry{
		Key:          key.ID,
		Send:         body.Send,
		MessageID:    msg.MessageId,
		ReceiveCount: msg.Attributes["ApproximateReceiveCount"],
		Crash:        crash,
	}
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		e.RequestID = lc.AwsRequestID
	}
	if a, ok := msg.MessageAttributes[sqsmsg.AttrReplayCount]; ok && a.StringValue != nil {
		e.ReplayCount = *a.StringValue
	}
	made, err := b.sideEffect(ctx, e)
	if err != nil {
		return err
	}
	if b.pipe != nil {
		if err := b.pipe.accept(ctx, key, made); err != nil {
			return err
		}
	}
	// With -emit the crash comes in the send, after the commit
	// (crashingSender): the handler returns.
	if crash && !b.pipe.crashesInSend() {
		<-b.release
		return errCrashed
	}
	return nil
}
