package sqsonce

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/sqs-once/sqs-once/sqsonce/store"
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
// acting (a consumer function still running). A copy of a key this batch
// holds is not delivered: it is a duplicate once its first copy is
// completed, and retried with it otherwise.
func (p *Processor) deliver(ctx context.Context, b budget, recs []keyed) []outcome {
	outcomes := notStarted(len(recs))
	holds := make([]*held, len(recs))
	copyOf := make([]*held, len(recs))
	p.eachUnit(recs, func(unit []int) { p.acquireUnit(ctx, b, recs, unit, holds, copyOf, outcomes) })

	var batch []*held
	var msgs []Delivery
	for _, hd := range holds {
		if hd == nil {
			continue
		}
		batch = append(batch, hd)
		msgs = append(msgs, Delivery{Record: recs[hd.i].msg, Key: hd.hold.key, RecordKey: p.lock.shownKey(hd.hold.key), Fence: hd.hold.lease.Fence, PayloadHash: bodyHash(recs[hd.i].msg.Body)})
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
	for i, first := range copyOf {
		if first != nil {
			outcomes[i] = p.copyOutcome(ctx, recs[i], recs[first.i], outcomes[first.i], first.hold.lease)
		}
	}
	return outcomes
}

// copyOutcome is the fate of a record whose key an earlier record of the
// batch held: a duplicate unless that one is retried, and then retried too,
// hidden until its lock ends where the lock was kept (an unknown delivery).
func (p *Processor) copyOutcome(ctx context.Context, r, first keyed, o outcome, lease store.Lease) outcome {
	log := r.log.With("copyOf", first.msg.MessageId)
	if !o.retried() {
		// The first copy was delivered (its completion recorded or not) or
		// goes to the operator queue: this one is its duplicate. Retrying
		// it after an unrecorded completion would run the key again.
		firstKind := string(o.Kind)
		if o.Kind == KindForwardedToOperator {
			// The operator queue has not answered yet: the log has always
			// shown this first outcome empty.
			firstKind = ""
		}
		log.InfoContext(ctx, "duplicate suppressed: a copy of a record of this batch", "outcome", duplicate.String(), "firstOutcome", firstKind)
		return outcome{Outcome: Outcome{Kind: KindDuplicate}}
	}
	log.InfoContext(ctx, "record retried with the copy of its key in this batch, which was not completed", "outcome", inProgress.String())
	c := outcome{Outcome: Outcome{Kind: KindInProgress}}
	if o.Reason == ReasonDeliveryUnknown {
		// The first copy's lock is kept until it expires: no receive can
		// take the key before then.
		c.hideUntil = lease.LockExpiresAt
	}
	return c
}

// acquireUnit takes the locks of a unit's records in order. A record of a
// FIFO group that is neither held nor a duplicate blocks the rest of its
// group (walkUnit).
func (p *Processor) acquireUnit(ctx context.Context, b budget, recs []keyed, unit []int, holds, copyOf []*held, outcomes []outcome) {
	holder := map[string]*held{} // the unit's copies of a key are all in it
	p.walkUnit(ctx, b, recs, unit, outcomes, func(i int) bool {
		r := recs[i]
		if !r.ok {
			outcomes[i] = retry(ReasonNoKey, recs[i].err)
			return false
		}
		if first, ok := holder[r.key]; ok {
			copyOf[i] = first
			return true
		}
		hold, res := p.lock.acquire(ctx, r.key, p.payloadHash(r.msg))
		if hold != nil {
			holds[i] = &held{i: i, hold: hold, log: r.log}
			holder[r.key] = holds[i]
			return true
		}
		outcomes[i] = p.judge(ctx, r.log, res)
		return outcomes[i].settled()
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
	// One context, cancelled on return: a WithCancel replaced by a
	// WithDeadline would stay registered with ctx until the batch ends.
	var callCtx context.Context
	var cancel context.CancelFunc
	if deadline.IsZero() {
		callCtx, cancel = context.WithCancel(ctx)
	} else {
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
		return retry(ReasonDeliveryUnknown, nil)
	}
	if errors.Is(err, ErrAlreadyStarted) {
		// The execution the key names exists for this payload: the key's
		// work is done, and only its completion was missing.
		res := hd.hold.finish(ctx, nil, nil)
		o := p.judge(ctx, hd.log.With("detail", err.Error()), res)
		if o.Kind == KindProcessed {
			o.Kind, o.Err = KindAlreadyStarted, err
		}
		return o
	}
	if errors.Is(err, ErrPayloadMismatch) {
		// Another payload's execution holds the key's name: the same
		// conflict as a record refused by the lock for another body.
		res := hd.hold.finish(ctx, nil, err)
		res.outcome = payloadMismatch
		return p.judge(ctx, hd.log, res)
	}
	return p.judge(ctx, hd.log, hd.hold.finish(ctx, nil, err))
}

// bodyHash is the SHA-256 of a record's body, in hex: the payload hash a
// Delivery carries, whether or not ValidatePayload compares it.
func bodyHash(body string) string {
	sum := sha256.Sum256([]byte(body))
	return hex.EncodeToString(sum[:])
}
