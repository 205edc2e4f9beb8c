package demo

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

const (
	// senders send batches side by side, so consecutive batches (a key's
	// first copy and its concurrent re-send) arrive at the same moment.
	senders         = 4
	sendAttempts    = 3
	lateWaveShare   = 0.8
	lateWaveMaxWait = 10 * time.Second
	// The producer sends sendChunk messages at a time (senders batches side
	// by side) while fewer than maxBacklog of its messages are unresolved.
	sendChunk  = 40
	maxBacklog = 60
)

// sendAll sends sends to queueURL in SendMessageBatch calls of 10, retrying
// entries SQS refused, and returns the messageId of every send.
func sendAll(ctx context.Context, api *sqs.Client, queueURL string, w Workload, sends []Send,
	bodyFor func(Workload, Send, Key) string, attrsFor func(Send) map[string]string) (map[string]string, error) {
	keys := w.KeyIndex()
	batches := make(chan []Send)
	var mu sync.Mutex
	ids := map[string]string{}
	var errs []error
	var wg sync.WaitGroup
	for range senders {
		wg.Go(func() {
			for batch := range batches {
				got, err := sendBatch(ctx, api, queueURL, w, keys, batch, bodyFor, attrsFor)
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
	for start := 0; start < len(sends); start += 10 {
		select {
		case batches <- sends[start:min(start+10, len(sends))]:
		case <-ctx.Done():
		}
	}
	close(batches)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return ids, fmt.Errorf("send the workload: %w", err)
	}
	return ids, ctx.Err()
}

func sendBatch(ctx context.Context, api *sqs.Client, queueURL string, w Workload, keys map[string]Key, batch []Send,
	bodyFor func(Workload, Send, Key) string, attrsFor func(Send) map[string]string) (map[string]string, error) {
	ids := map[string]string{}
	pending := map[string]sqstypes.SendMessageBatchRequestEntry{}
	for i, s := range batch {
		attrs := map[string]sqstypes.MessageAttributeValue{
			"producer": {DataType: aws.String("String"), StringValue: aws.String("sqs-once-demo")},
		}
		for k, v := range attrsFor(s) {
			attrs[k] = sqstypes.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
		}
		pending[strconv.Itoa(i)] = sqstypes.SendMessageBatchRequestEntry{
			Id:                aws.String(strconv.Itoa(i)),
			MessageBody:       aws.String(bodyFor(w, s, keys[s.Key])),
			MessageAttributes: attrs,
		}
	}
	var lastErr error
	for attempt := 0; attempt < sendAttempts && len(pending) > 0; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return ids, ctx.Err()
			case <-time.After(time.Duration(attempt) * 200 * time.Millisecond):
			}
		}
		entries := make([]sqstypes.SendMessageBatchRequestEntry, 0, len(pending))
		for _, e := range pending {
			entries = append(entries, e)
		}
		out, err := api.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(queueURL), Entries: entries})
		if err != nil {
			lastErr = err
			continue
		}
		for _, ok := range out.Successful {
			i, _ := strconv.Atoi(aws.ToString(ok.Id))
			ids[batch[i].ID] = aws.ToString(ok.MessageId)
			delete(pending, aws.ToString(ok.Id))
		}
		for _, f := range out.Failed {
			lastErr = fmt.Errorf("%s: %s", aws.ToString(f.Code), aws.ToString(f.Message))
		}
	}
	if len(pending) > 0 {
		return ids, fmt.Errorf("%d messages not accepted by %s: %w", len(pending), queueURL, lastErr)
	}
	return ids, nil
}

// drive sends the workload, the late re-sends once most of the first wave is
// done, and shows progress until every send has reached an end and the
// queues are empty, or wait has passed.
func drive(ctx context.Context, api *sqs.Client, mainURL string, w Workload, t *Tracker, ledger *Ledger,
	prog *progressWriter, start time.Time, wait time.Duration, queues []string) error {
	ctx, cancel := context.WithDeadline(ctx, start.Add(wait))
	defer cancel()
	var wave0, wave1 []Send
	for _, s := range w.Sends {
		if s.Wave == 0 {
			wave0 = append(wave0, s)
		} else {
			wave1 = append(wave1, s)
		}
	}
	body := func(w Workload, s Send, k Key) string { return w.Body(s, k.Kind, false) }
	noAttrs := func(Send) map[string]string { return nil }

	sent := make(chan error, 1)
	go func() {
		paced := func(sends, before []Send) error {
			return sendPaced(ctx, api, mainURL, w, t, sends, before, body, noAttrs)
		}
		if err := paced(wave0, nil); err != nil {
			sent <- err
			return
		}
		// A producer whose acknowledgement got lost re-sends later, when the
		// first copy has usually been processed.
		first := Workload{Sends: wave0}
		until := time.Now().Add(lateWaveMaxWait)
		for float64(t.Resolved(first)) < lateWaveShare*float64(len(wave0)) && time.Now().Before(until) {
			if err := pause(ctx, 100*time.Millisecond); err != nil {
				sent <- err
				return
			}
		}
		sent <- paced(wave1, wave0)
	}()

	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	sendsDone := false
	var lastCheck time.Time
	for {
		select {
		case err := <-sent:
			if err != nil {
				return err
			}
			sendsDone = true
		case <-ctx.Done():
			p := t.Progress(w, ledger.Count(), time.Since(start))
			prog.Update(p, time.Now(), true)
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("gave up after %s: %d of %d messages reached an end", wait, p.Resolved, p.Sent)
			}
			return ctx.Err()
		case now := <-tick.C:
			p := t.Progress(w, ledger.Count(), now.Sub(start))
			prog.Update(p, now, false)
			if !sendsDone || p.Resolved < p.Sent || now.Sub(lastCheck) < 500*time.Millisecond {
				continue
			}
			lastCheck = now
			if drained(ctx, api, queues) {
				prog.Update(p, now, true)
				return nil
			}
		}
	}
}

// sendPaced sends in chunks, never letting more than maxBacklog sent
// messages wait unresolved: a producer at a steady rate rather than one
// burst, which also keeps moto_server's per-receive scan of the queue short.
// before are sends already made, counted in the backlog.
func sendPaced(ctx context.Context, api *sqs.Client, url string, w Workload, t *Tracker, sends, before []Send,
	body func(Workload, Send, Key) string, attrs func(Send) map[string]string) error {
	for start := 0; start < len(sends); start += sendChunk {
		sentSoFar := Workload{Sends: append(slices.Clip(before), sends[:start]...)}
		for len(sentSoFar.Sends)-t.Resolved(sentSoFar) > maxBacklog {
			if err := pause(ctx, 20*time.Millisecond); err != nil {
				return err
			}
		}
		if _, err := sendAll(ctx, api, url, w, sends[start:min(start+sendChunk, len(sends))], body, attrs); err != nil {
			return err
		}
	}
	return nil
}

func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func drained(ctx context.Context, api *sqs.Client, queues []string) bool {
	for _, q := range queues {
		if n, err := queueDepth(ctx, api, q); err != nil || n > 0 {
			return false
		}
	}
	return true
}
