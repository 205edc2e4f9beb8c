package processor

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sqs-once/sqs-once/internal/dedupe"
	"github.com/sqs-once/sqs-once/internal/target"
)

// held is a record whose lock the batch holds, waiting for its delivery.
type held struct {
	i    int // index in the batch
	hold *dedupe.Hold
	log  *slog.Logger
}

// deliver is Handle's work with a Target: take the lock of every record
// (a FIFO group's in order, stopping at the first it cannot take), deliver
// all the records held in one call of the target, then complete each the
// target accepted and release each it did not. A record whose delivery has
// an unknown outcome keeps its lock until it expires: releasing it would
// let a redelivery reach the target while the first delivery may still be
// acting (a consumer function still running).
func (h *Handler) deliver(ctx context.Context, b budget, records []events.SQSMessage) []outcome {
	outcomes := make([]outcome, len(records))
	holds := make([]*held, len(records))
	h.eachUnit(records, func(unit []int) { h.acquireUnit(ctx, b, records, unit, holds, outcomes) })

	var batch []*held
	var msgs []target.Message
	for _, hd := range holds {
		if hd == nil {
			continue
		}
		lease := hd.hold.Lease()
		batch = append(batch, hd)
		msgs = append(msgs, target.Message{Record: records[hd.i], Key: lease.Key, Fence: lease.Fence})
	}
	if len(batch) == 0 {
		return outcomes
	}
	errs := h.deliverBatch(ctx, batch, msgs)

	sem := make(chan struct{}, h.cfg.MaxConcurrency)
	var wg sync.WaitGroup
	for k, hd := range batch {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			outcomes[hd.i] = h.finish(ctx, hd, errs[k])
		})
	}
	wg.Wait()
	return outcomes
}

// acquireUnit takes the locks of a unit's records in order. A record that
// is neither held nor a duplicate ends the unit (walkUnit).
func (h *Handler) acquireUnit(ctx context.Context, b budget, records []events.SQSMessage, unit []int, holds []*held, outcomes []outcome) {
	h.walkUnit(ctx, b, records, unit, outcomes, func(i int) bool {
		key, log, ok := h.key(ctx, records[i])
		if !ok {
			outcomes[i] = retried(FailureNoKey)
			return false
		}
		hold, res := h.guard.Acquire(ctx, key, h.payloadHash(records[i]))
		if hold != nil {
			holds[i] = &held{i: i, hold: hold, log: log}
			return true
		}
		outcomes[i] = h.report(ctx, log, res)
		return outcomes[i].verdict == done
	})
}

// deliverBatch calls the target once for the batch, within the earliest of
// the held locks' work deadlines (which leave time to record the
// outcomes). A lock lost meanwhile does not cancel the call: the other
// records' delivery must not fail with it, and a call cannot be taken back
// anyway; the lost lock's record is not completed.
func (h *Handler) deliverBatch(ctx context.Context, batch []*held, msgs []target.Message) []error {
	var deadline time.Time
	for _, hd := range batch {
		if d, ok := hd.hold.Context().Deadline(); ok && (deadline.IsZero() || d.Before(deadline)) {
			deadline = d
		}
	}
	callCtx, cancel := context.WithCancel(ctx)
	if !deadline.IsZero() {
		callCtx, cancel = context.WithDeadline(ctx, deadline)
	}
	defer cancel()
	errs := h.target.Deliver(callCtx, msgs)
	if len(errs) != len(msgs) {
		// A Target that answers for fewer messages than it got has not
		// confirmed any of them.
		err := target.ErrOutcomeUnknown
		errs = make([]error, len(msgs))
		for k := range errs {
			errs[k] = err
		}
	}
	return errs
}

// finish records one delivered record's outcome and decides its fate.
func (h *Handler) finish(ctx context.Context, hd *held, err error) outcome {
	if errors.Is(err, target.ErrOutcomeUnknown) {
		lease := hd.hold.Abandon()
		hd.log.ErrorContext(ctx, "record's delivery has an unknown outcome (the target may have acted); its lock is kept until it expires, then the message is delivered again: a duplicate if the target had acted",
			"outcome", "delivery-unknown", "fence", lease.Fence, "lockExpiresAt", lease.LockExpiresAt, "error", err)
		return retried(FailureDeliveryUnknown)
	}
	return h.report(ctx, hd.log, hd.hold.Finish(ctx, err))
}
