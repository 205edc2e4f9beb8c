package sqsonce

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// held is a record whose lock the batch holds, waiting for its delivery.
type held struct {
	i    int // index in the batch
	hold *hold
	log  *slog.Logger
}

// deliver is Handle's work with a Target: take the lock of every record
// (a FIFO group's in order, stopping at the first it cannot take), deliver
// all the records held in one call of the target, then complete each the
// target accepted and release each it did not. A record whose delivery has
// an unknown outcome keeps its lock until it expires: releasing it would
// let a redelivery reach the target while the first delivery may still be
// acting (a consumer function still running).
func (p *Processor) deliver(ctx context.Context, b budget, records []events.SQSMessage) []outcome {
	outcomes := make([]outcome, len(records))
	holds := make([]*held, len(records))
	p.eachUnit(records, func(unit []int) { p.acquireUnit(ctx, b, records, unit, holds, outcomes) })

	var batch []*held
	var msgs []Delivery
	for _, hd := range holds {
		if hd == nil {
			continue
		}
		batch = append(batch, hd)
		msgs = append(msgs, Delivery{Record: records[hd.i], Key: hd.hold.key, Fence: hd.hold.lease.Fence})
	}
	if len(batch) == 0 {
		return outcomes
	}
	errs := p.deliverBatch(ctx, batch, msgs)

	sem := make(chan struct{}, p.cfg.MaxConcurrency)
	var wg sync.WaitGroup
	for k, hd := range batch {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			outcomes[hd.i] = p.finish(ctx, hd, errs[k])
		})
	}
	wg.Wait()
	return outcomes
}

// acquireUnit takes the locks of a unit's records in order. A record that
// is neither held nor a duplicate ends the unit (walkUnit).
func (p *Processor) acquireUnit(ctx context.Context, b budget, records []events.SQSMessage, unit []int, holds []*held, outcomes []outcome) {
	p.walkUnit(ctx, b, records, unit, outcomes, func(i int) bool {
		key, log, ok := p.key(ctx, records[i])
		if !ok {
			outcomes[i] = retried(FailureNoKey)
			return false
		}
		hold, res := p.lock.acquire(ctx, key, p.payloadHash(records[i]))
		if hold != nil {
			holds[i] = &held{i: i, hold: hold, log: log}
			return true
		}
		outcomes[i] = p.report(ctx, log, res)
		return outcomes[i].verdict == done
	})
}

// deliverBatch calls the target once for the batch, within the earliest of
// the held locks' work deadlines (which leave time to record the
// outcomes). A lock lost meanwhile does not cancel the call: the other
// records' delivery must not fail with it, and a call cannot be taken back
// anyway; the lost lock's record is not completed.
func (p *Processor) deliverBatch(ctx context.Context, batch []*held, msgs []Delivery) []error {
	var deadline time.Time
	for _, hd := range batch {
		if d, ok := hd.hold.ctx.Deadline(); ok && (deadline.IsZero() || d.Before(deadline)) {
			deadline = d
		}
	}
	callCtx, cancel := context.WithCancel(ctx)
	if !deadline.IsZero() {
		callCtx, cancel = context.WithDeadline(ctx, deadline)
	}
	defer cancel()
	errs := p.target.Deliver(callCtx, msgs)
	if len(errs) != len(msgs) {
		// A Target that answers for fewer messages than it got has not
		// confirmed any of them.
		err := ErrOutcomeUnknown
		errs = make([]error, len(msgs))
		for k := range errs {
			errs[k] = err
		}
	}
	return errs
}

// finish records one delivered record's outcome and decides its fate.
func (p *Processor) finish(ctx context.Context, hd *held, err error) outcome {
	if errors.Is(err, ErrOutcomeUnknown) {
		lease := hd.hold.abandon()
		hd.log.ErrorContext(ctx, "record's delivery has an unknown outcome (the target may have acted); its lock is kept until it expires, then the message is delivered again: a duplicate if the target had acted",
			"outcome", "delivery-unknown", "fence", lease.Fence, "lockExpiresAt", lease.LockExpiresAt, "error", err)
		return retried(FailureDeliveryUnknown)
	}
	return p.report(ctx, hd.log, hd.hold.finish(ctx, err))
}
