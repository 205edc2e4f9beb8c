package demo

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqs-once/sqs-once/internal/sqsmsg"
)

const (
	// senders send batches side by side, so consecutive batches (a key's
	// first copy and its concurrent re-send) arrive at the same moment.
	senders      = 4
	sendAttempts = 3
	batchSize    = 10
)

// producer sends the workload's messages as a retrying producer does: in
// batches, each message accepted once by SQS.
type producer struct {
	api  sqsmsg.BatchSender
	url  string
	w    Workload
	keys map[string]Key
	// body and attrs make a send's message; attrs may return nil.
	body  func(Send, Key) string
	attrs func(Send) map[string]sqstypes.MessageAttributeValue
}

// message is the body and message attributes of s, exactly as sent: what
// a target must deliver byte for byte.
func (p *producer) message(s Send) (string, map[string]sqstypes.MessageAttributeValue) {
	attrs := map[string]sqstypes.MessageAttributeValue{"producer": sqsmsg.String("sqs-once-demo")}
	for k, v := range p.attrs(s) {
		attrs[k] = v
	}
	return p.body(s, p.keys[s.Key]), attrs
}

// send sends sends in order, in batches of 10, senders batches side by side,
// sending again the entries SQS did not accept (up to sendAttempts times),
// and returns the messageId SQS gave each send.
func (p *producer) send(ctx context.Context, sends []Send) (map[string]string, error) {
	batches := make(chan []Send)
	var mu sync.Mutex
	ids := map[string]string{}
	var errs []error
	var wg sync.WaitGroup
	for range senders {
		wg.Go(func() {
			for batch := range batches {
				got, err := p.sendBatch(ctx, batch)
				mu.Lock()
				for k, v := range got {
					ids[k] = v
				}
				if err != nil {
					errs = append(errs, err)
				}
				mu.Unlock()
			}
		})
	}
	for start := 0; start < len(sends) && ctx.Err() == nil; start += batchSize {
		select {
		case batches <- sends[start:min(start+batchSize, len(sends))]:
		case <-ctx.Done():
		}
	}
	close(batches)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return ids, fmt.Errorf("send the workload to %s: %w", p.url, err)
	}
	return ids, ctx.Err()
}

func (p *producer) sendBatch(ctx context.Context, batch []Send) (map[string]string, error) {
	entries := make([]sqsmsg.Entry, len(batch))
	for i, s := range batch {
		body, attrs := p.message(s)
		entries[i] = sqsmsg.Entry{RecordID: s.ID, Body: body, Attributes: attrs}
	}
	ids := map[string]string{}
	for attempt := 1; ; attempt++ {
		accepted, failed := sqsmsg.SendBatchAccepted(ctx, p.api, p.url, entries)
		for id, msgID := range accepted {
			ids[id] = msgID
		}
		if len(failed) == 0 {
			return ids, nil
		}
		if attempt == sendAttempts || ctx.Err() != nil {
			var errs []error
			for id, err := range failed {
				errs = append(errs, fmt.Errorf("%s: %w", id, err))
			}
			return ids, fmt.Errorf("%s not accepted after %s: %w", count(len(failed), "message"), count(attempt, "attempt"), errors.Join(errs...))
		}
		// Only what SQS did not accept goes again, in the same order.
		var again []sqsmsg.Entry
		for _, e := range entries {
			if _, bad := failed[e.RecordID]; bad {
				again = append(again, e)
			}
		}
		entries = again
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(attempt) * 200 * time.Millisecond):
		}
	}
}
