package dedupe_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sqs-once/sqs-once/internal/dedupe"
	"github.com/sqs-once/sqs-once/internal/local/faultproxy"
	"github.com/sqs-once/sqs-once/internal/local/motoserver"
	"github.com/sqs-once/sqs-once/internal/local/mototest"
)

// The protocol's calls, told apart by what only each one's request holds.
var (
	isAcquire  = faultproxy.BodyContains(`"ReturnValues":"ALL_OLD"`)
	isComplete = faultproxy.BodyContains(`REMOVE`)
	isRelease  = func(body []byte) bool { return !isAcquire(body) && bytes.Contains(body, []byte("RELEASED")) }
	isRenew    = func(body []byte) bool {
		return !isAcquire(body) && !isComplete(body) && !isRelease(body) && bytes.Contains(body, []byte("lockExpiresAt"))
	}
)

// faulty is the bundle with the store's calls going through a fault proxy,
// so that the SDK's real retry path answers what the proxy does.
type faulty struct {
	bundle
	proxy *faultproxy.Proxy
	guard *dedupe.Guard
}

func setupFaulty(t *testing.T) faulty {
	t.Helper()
	b := setup(t)
	p, err := faultproxy.Start(mototest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	client := dynamodb.NewFromConfig(mototest.Config(t), func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(p.URL)
		o.Retryer = retry.AddWithMaxBackoffDelay(retry.NewStandard(), 5*time.Millisecond)
	})
	g := b.newGuard(dedupe.NewStore(motoserver.SerializeWrites(client), b.table, "orders-fn"))
	return faulty{bundle: b, proxy: p, guard: g}
}

// lostResponses are the faults whose request DynamoDB applied before the
// caller lost the answer.
var lostResponses = []faultproxy.Kind{faultproxy.FailAfter, faultproxy.ResetAfter}

// TestALostAnswerIsRecognisedAsOurOwnCall: the SDK's retry of a call that
// DynamoDB applied meets the call's own work, and must take it as done, not
// as another holder's.
func TestALostAnswerIsRecognisedAsOurOwnCall(t *testing.T) {
	t.Parallel()
	tests := []struct {
		call  string
		op    string
		match func([]byte) bool
		fn    func(context.Context) error
		want  dedupe.Outcome
		state string // the record's status afterwards; "" for none
	}{
		// Without the recognition: in-progress, and with IN_PROGRESS=drop a lost message.
		{"acquire", "UpdateItem", isAcquire, succeed, dedupe.Processed, "COMPLETED"},
		// Without it: processed-unrecorded, an ERROR about a duplicate that cannot happen.
		{"complete", "UpdateItem", isComplete, succeed, dedupe.Processed, "COMPLETED"},
		// Without it: a release error, though the key is free.
		{"release", "UpdateItem", isRelease, func(context.Context) error { return context.Canceled }, dedupe.Failed, "RELEASED"},
	}
	for _, tt := range tests {
		for _, fault := range lostResponses {
			t.Run(tt.call+"/"+fault.String(), func(t *testing.T) {
				t.Parallel()
				f := setupFaulty(t)
				f.proxy.ScriptWhen(tt.op, tt.match, fault)
				runs := 0
				res := f.guard.Do(context.Background(), "k", func(ctx context.Context) error { runs++; return tt.fn(ctx) })
				if f.proxy.Pending() != 0 {
					t.Fatal("the fault was not injected")
				}
				if res.Outcome != tt.want || runs != 1 || res.Fence != f.firstFence() || res.ReleaseErr != nil {
					t.Fatalf("outcome %v after %d runs, fence %d, err %v, release err %v; want %v after one run with the first fence",
						res.Outcome, runs, res.Fence, res.Err, res.ReleaseErr, tt.want)
				}
				if s := f.status(t, "orders-fn#k"); s != tt.state {
					t.Errorf("status %q, want %q", s, tt.state)
				}
			})
		}
	}
}

func TestALostRenewalAnswerKeepsTheLock(t *testing.T) {
	t.Parallel()
	for _, fault := range lostResponses {
		t.Run(fault.String(), func(t *testing.T) {
			t.Parallel()
			f := setupFaulty(t)
			r := newRenewing(f.bundle, f.guard)
			f.proxy.ScriptWhen("UpdateItem", isRenew, fault)
			done := make(chan dedupe.Result)
			go func() { done <- r.guard.Do(context.Background(), "k", r.slow) }()
			<-r.started
			r.tick(t)
			if f.proxy.Pending() != 0 {
				t.Fatal("the renewal was not faulted")
			}
			r.finish <- nil
			if res := <-done; res.Outcome != dedupe.Processed || res.LockLost {
				t.Fatalf("%+v, want processed with the lock kept", res)
			}
		})
	}
}

func TestARenewalThatCannotGetThroughBeforeTheLockExpiresCancelsTheHandler(t *testing.T) {
	t.Parallel()
	f := setupFaulty(t)
	r := newRenewing(f.bundle, f.guard)
	// Every attempt of every renewal is throttled.
	throttles := make([]faultproxy.Fault, 30)
	for i := range throttles {
		throttles[i] = faultproxy.Throttle
	}
	f.proxy.ScriptWhen("UpdateItem", isRenew, throttles...)
	done := make(chan dedupe.Result)
	go func() { done <- r.guard.Do(context.Background(), "k", r.slow) }()
	<-r.started
	r.tick(t) // 10 s: throttled, the lock still runs
	r.tick(t) // 20 s: throttled
	select {
	case res := <-done:
		t.Fatalf("handler stopped at 20 s of a 30 s lock: %+v", res)
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	f.clock.Advance(10 * time.Second) // 30 s: the lock has expired unrenewed
	select {
	case res := <-done:
		if res.Outcome != dedupe.Failed || !res.LockLost {
			t.Fatalf("%+v, want failed with the lock lost", res)
		}
	case <-ctx.Done():
		t.Fatal("the handler still runs after its lock expired unrenewed")
	}
}
