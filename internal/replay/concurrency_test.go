package replay

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqs-once/sqs-once/internal/envconfig"
	"github.com/sqs-once/sqs-once/internal/sqsmsg"
)

// rendezvous is an SQS client whose SendMessageBatch calls wait for each
// other: every call returns only once `size` calls are in flight together
// (a cyclic barrier), or fails when its context ends. moto cannot show two
// calls overlapping; this can, without a sleep. It also records the most
// calls ever in flight, and which message groups were in flight at once.
type rendezvous struct {
	size int

	mu       sync.Mutex
	waiting  int
	release  chan struct{}
	inFlight int
	most     int
	groups   map[string]bool // groups of the calls in flight
	clash    []string        // groups sent by two calls at once
	order    map[string][]string
}

func newRendezvous(size int) *rendezvous {
	return &rendezvous{size: size, release: make(chan struct{}), groups: map[string]bool{}, order: map[string][]string{}}
}

func (r *rendezvous) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	var mine []string
	r.mu.Lock()
	r.inFlight++
	r.most = max(r.most, r.inFlight)
	for _, e := range in.Entries {
		g := aws.ToString(e.MessageGroupId)
		if g == "" {
			continue
		}
		if !slices.Contains(mine, g) {
			if r.groups[g] {
				r.clash = append(r.clash, g)
			}
			mine = append(mine, g)
		}
		r.order[g] = append(r.order[g], aws.ToString(e.MessageBody))
	}
	for _, g := range mine {
		r.groups[g] = true
	}
	release := r.release
	if r.waiting++; r.waiting == r.size {
		close(r.release)
		r.release, r.waiting = make(chan struct{}), 0
	}
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.inFlight--
		for _, g := range mine {
			delete(r.groups, g)
		}
	}()
	select {
	case <-release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	out := &sqs.SendMessageBatchOutput{}
	for _, e := range in.Entries {
		out.Successful = append(out.Successful, sqstypes.SendMessageBatchResultEntry{Id: e.Id, MessageId: aws.String("m-" + aws.ToString(e.Id))})
	}
	return out, nil
}

func rendezvousHandler(t *testing.T, api sqsmsg.BatchSender, mainURL string) *Handler {
	t.Helper()
	c, err := LoadConfig(envconfig.Map(map[string]string{"MAIN_QUEUE_URL": mainURL, "OPERATOR_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/1/operator", "JITTER": "none", "BACKOFF_BASE": "0"}))
	if err != nil {
		t.Fatal(err)
	}
	return New(c, Deps{SQS: api, Logger: slog.New(slog.DiscardHandler)})
}

// A large batch is sent SendsInFlight calls at a time: the calls of one
// invocation meet in groups of SendsInFlight (so that many are in flight at
// once) and never more. Sequential sends never meet: every record fails at
// the deadline.
func TestSendsRunConcurrentlyUpToTheLimit(t *testing.T) {
	t.Parallel()
	api := newRendezvous(SendsInFlight)
	h := rendezvousHandler(t, api, "https://sqs.us-east-1.amazonaws.com/1/main")
	// 30 calls to the main queue: three full rounds.
	recs := records(30*sqsmsg.MaxBatchEntries, "r", nil)
	// A bound on a wait for the other calls, not a sleep: it ends the
	// moment they meet.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := h.Handle(ctx, events.SQSEvent{Records: recs})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(resp.BatchItemFailures); n != 0 {
		t.Errorf("%d of %d records failed: the calls never had %d in flight at once (most: %d)", n, len(recs), SendsInFlight, api.most)
	}
	if api.most != SendsInFlight {
		t.Errorf("at most %d calls in flight, want exactly %d", api.most, SendsInFlight)
	}
}

// On a FIFO main queue the replays of one message group keep their order:
// two calls holding one group are never in flight together, and each group's
// messages reach SQS in record order; calls of other groups still overlap.
func TestFIFOGroupsKeepTheirOrderUnderConcurrency(t *testing.T) {
	t.Parallel()
	api := newRendezvous(2)
	h := rendezvousHandler(t, api, "https://sqs.us-east-1.amazonaws.com/1/main.fifo")
	// Chunks of 10: a, b, a, b. The second a waits for the first; the two
	// groups pair up at the rendezvous.
	var recs []events.SQSMessage
	want := map[string][]string{}
	for round := range 2 {
		for _, g := range []string{"a", "b"} {
			for i := range sqsmsg.MaxBatchEntries {
				id := fmt.Sprintf("%s-%d-%d", g, round, i)
				recs = append(recs, fifoRecord(id, "body "+id, g, nil))
				want[g] = append(want[g], "body "+id)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := h.Handle(ctx, events.SQSEvent{Records: recs})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(resp.BatchItemFailures); n != 0 {
		t.Errorf("%d of %d records failed: calls of different groups never overlapped (most in flight: %d)", n, len(recs), api.most)
	}
	if len(api.clash) != 0 {
		t.Errorf("groups %v were in two calls in flight at once", api.clash)
	}
	for g, w := range want {
		if !slices.Equal(api.order[g], w) {
			t.Errorf("group %s sent in the order %v, want %v", g, api.order[g], w)
		}
	}
}
