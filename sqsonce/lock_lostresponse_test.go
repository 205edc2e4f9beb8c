//go:build integration

package sqsonce

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsretry "github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sqs-once/sqs-once/internal/local/faultproxy"
	"github.com/sqs-once/sqs-once/internal/local/motoserver"
	"github.com/sqs-once/sqs-once/internal/local/mototest"
	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
)

// The protocol's calls, told apart by what only each one's request holds.
var (
	lockIsAcquire = faultproxy.BodyContains(`"ReturnValues":"ALL_OLD"`)
	// Acquire removes a stored result too: the completion is the other
	// REMOVE.
	lockIsComplete = func(body []byte) bool { return !lockIsAcquire(body) && bytes.Contains(body, []byte("REMOVE")) }
	lockIsRelease  = func(body []byte) bool { return !lockIsAcquire(body) && bytes.Contains(body, []byte("RELEASED")) }
	lockIsRenew    = func(body []byte) bool {
		return !lockIsAcquire(body) && !lockIsComplete(body) && !lockIsRelease(body) && bytes.Contains(body, []byte("lockExpiresAt"))
	}
)

// lockFaulty is a table whose store calls go through a fault proxy, so
// that the SDK's real retry path answers what the proxy does.
type lockFaulty struct {
	*lockEnv
	proxy *faultproxy.Proxy
	// store is the table's store through the proxy.
	store store.Store
}

func newLockFaulty(t *testing.T) lockFaulty {
	t.Helper()
	d := newLockDynamo(t)
	p, err := faultproxy.Start(mototest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	client := dynamodb.NewFromConfig(mototest.Config(t), func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(p.URL)
		o.Retryer = awsretry.AddWithMaxBackoffDelay(awsretry.NewStandard(), 5*time.Millisecond)
	})
	api := motoserver.Atomic(client)
	return lockFaulty{lockEnv: d.env(), proxy: p, store: dynamostore.New(api, d.table)}
}

// lockLostResponses are the faults whose request DynamoDB applied before
// the caller lost the answer.
var lockLostResponses = []faultproxy.Kind{faultproxy.FailAfter, faultproxy.ResetAfter}

// TestLockALostAnswerIsRecognisedAsOurOwnCall: the SDK's retry of a call
// that DynamoDB applied meets the call's own work, and must take it as
// done, not as another holder's.
func TestLockALostAnswerIsRecognisedAsOurOwnCall(t *testing.T) {
	t.Parallel()
	tests := []struct {
		call  string
		op    string
		match func([]byte) bool
		fn    func(context.Context) error
		want  lockOutcome
		state store.Status // the record's status afterwards
	}{
		// Without the recognition: in-progress, and with InProgressDrop a lost message.
		{"acquire", "UpdateItem", lockIsAcquire, lockSucceed, processed, store.StatusCompleted},
		// Without it: processed-unrecorded, an ERROR about a duplicate that cannot happen.
		{"complete", "UpdateItem", lockIsComplete, lockSucceed, processed, store.StatusCompleted},
		// Without it: a release error, though the key is free.
		{"release", "UpdateItem", lockIsRelease, func(context.Context) error { return context.Canceled }, failed, store.StatusReleased},
	}
	for _, tt := range tests {
		for _, fault := range lockLostResponses {
			t.Run(tt.call+"/"+fault.String(), func(t *testing.T) {
				t.Parallel()
				f := newLockFaulty(t)
				f.proxy.ScriptWhen(tt.op, tt.match, fault)
				runs := 0
				res := f.locker(t, f.store).do(context.Background(), "k", "", 0, noResult(func(ctx context.Context) error { runs++; return tt.fn(ctx) }))
				if f.proxy.Pending() != 0 {
					t.Fatal("the fault was not injected")
				}
				if res.outcome != tt.want || runs != 1 || res.fence != f.firstFence() || res.releaseErr != nil {
					t.Fatalf("outcome %v after %d runs, fence %d, err %v, release err %v; want %v after one run with the first fence",
						res.outcome, runs, res.fence, res.err, res.releaseErr, tt.want)
				}
				if s := f.status(t, lockID("k")); s != tt.state {
					t.Errorf("status %q, want %q", s, tt.state)
				}
			})
		}
	}
}

func TestLockALostRenewalAnswerKeepsTheLock(t *testing.T) {
	t.Parallel()
	for _, fault := range lockLostResponses {
		t.Run(fault.String(), func(t *testing.T) {
			t.Parallel()
			f := newLockFaulty(t)
			r := newLockRenewing(t, f.lockEnv, f.store)
			f.proxy.ScriptWhen("UpdateItem", lockIsRenew, fault)
			done := r.run("k")
			r.tick(t)
			if f.proxy.Pending() != 0 {
				t.Fatal("the renewal was not faulted")
			}
			r.finish <- nil
			if res := <-done; res.outcome != processed || res.lockLost {
				t.Fatalf("%+v, want processed with the lock kept", res)
			}
		})
	}
}

func TestLockARenewalThatCannotGetThroughBeforeTheLockExpiresCancelsTheHandler(t *testing.T) {
	t.Parallel()
	f := newLockFaulty(t)
	r := newLockRenewing(t, f.lockEnv, f.store)
	// Every attempt of every renewal is throttled.
	throttles := make([]faultproxy.Fault, 30)
	for i := range throttles {
		throttles[i] = faultproxy.Throttle
	}
	f.proxy.ScriptWhen("UpdateItem", lockIsRenew, throttles...)
	done := r.run("k")
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
		if res.outcome != failed || !res.lockLost {
			t.Fatalf("%+v, want failed with the lock lost", res)
		}
	case <-ctx.Done():
		t.Fatal("the handler still runs after its lock expired unrenewed")
	}
}

// TestLockAGivenUpAcquireLeavesNoLockHeld: every attempt of each key's
// acquire is applied by DynamoDB and its answer lost, until the SDK's
// retries run out (three attempts); each call reports not-acquired, a store
// error, and releases the lock it took: the test counts the locks left
// held (none), and the key's next copy takes it at once instead of meeting
// it as "in progress" until it expires.
func TestLockAGivenUpAcquireLeavesNoLockHeld(t *testing.T) {
	t.Parallel()
	const keys, attempts = 4, 3
	for _, fault := range lockLostResponses {
		t.Run(fault.String(), func(t *testing.T) {
			t.Parallel()
			f := newLockFaulty(t)
			faults := make([]faultproxy.Fault, keys*attempts)
			for i := range faults {
				faults[i] = fault
			}
			f.proxy.ScriptWhen("UpdateItem", lockIsAcquire, faults...)
			runs := 0
			for k := range keys {
				key := fmt.Sprintf("k%d", k)
				res := f.locker(t, f.store).do(context.Background(), key, "", 0, noResult(func(context.Context) error { runs++; return nil }))
				if res.outcome != notAcquired || !errors.Is(res.err, ErrUnavailable) || res.releaseErr != nil {
					t.Fatalf("%s: outcome %v, err %v, release err %v; want not-acquired (store unavailable), the release done",
						key, res.outcome, res.err, res.releaseErr)
				}
			}
			if f.proxy.Pending() != 0 || runs != 0 {
				t.Fatalf("%d faults not injected (the retries did not run out), %d runs; want all injected, no run", f.proxy.Pending(), runs)
			}
			// Without the release: every key PROCESSING under its give-up's
			// owner until the lock expires.
			held := 0
			for k := range keys {
				key := fmt.Sprintf("k%d", k)
				if s := f.status(t, lockID(key)); s != store.StatusReleased {
					held++
					t.Errorf("after the give-up %s's record is %q; want %q", key, s, store.StatusReleased)
				}
			}
			if held != 0 {
				t.Fatalf("%d of %d locks whose holder gave up are still held", held, keys)
			}
			for k := range keys {
				key := fmt.Sprintf("k%d", k)
				if res := f.locker(t, f.store).do(context.Background(), key, "", 0, noResult(lockSucceed)); res.outcome != processed {
					t.Fatalf("%s's next delivery: %v (%v); want processed at once", key, res.outcome, res.err)
				}
			}
		})
	}
}
