package sqsonce

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
)

// lockFakeDynamo injects errors the DynamoDB store must classify, where no
// HTTP fault can produce the AWS error type (a missing table, a denied
// call).
type lockFakeDynamo struct {
	// The calls the store does not make on these paths: nil, so one would
	// panic.
	dynamostore.AdminAPI
	mu         sync.Mutex
	acquireErr error
	updateErrs []error // consumed one per UpdateItem call after the acquire
	updates    int     // UpdateItem calls after the acquire
}

func (f *lockFakeDynamo) UpdateItem(_ context.Context, in *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	// The acquire is the only update that asks for the old item.
	if in.ReturnValues == types.ReturnValueAllOld {
		return &dynamodb.UpdateItemOutput{}, f.acquireErr
	}
	f.updates++
	if len(f.updateErrs) == 0 {
		return &dynamodb.UpdateItemOutput{}, nil
	}
	err := f.updateErrs[0]
	f.updateErrs = f.updateErrs[1:]
	return &dynamodb.UpdateItemOutput{}, err
}

// GetItem finds no record: what a refusal that carries no item is read
// against (the record gone).
func (f *lockFakeDynamo) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return &dynamodb.GetItemOutput{}, nil
}

// lockFakeLocker is a locker on the DynamoDB store over fake, on the clock
// now (nil: the real one), sleeping with sleep between completion attempts
// (nil: not at all).
func lockFakeLocker(t *testing.T, fake *lockFakeDynamo, now func() time.Time, sleep func(context.Context, time.Duration) error) *locker {
	t.Helper()
	if sleep == nil {
		sleep = lockNoSleep
	}
	p, err := newProcessor(ConsumerConfig{Config: Config{Store: dynamostore.New(fake, "t"), KeyPrefix: "p", Logger: lockQuiet, Test: TestConfig{Now: now}}}, nil, deps{sleep: sleep})
	if err != nil {
		t.Fatal(err)
	}
	return p.lock
}

var lockThrottled = &types.ProvisionedThroughputExceededException{Message: new("rate exceeded")}

func TestLockUnavailableStoreNeverRunsHandler(t *testing.T) {
	t.Parallel()
	for _, fault := range []error{lockThrottled, &types.InternalServerError{}, context.DeadlineExceeded} {
		t.Run(fault.Error(), func(t *testing.T) {
			t.Parallel()
			l := lockFakeLocker(t, &lockFakeDynamo{acquireErr: fault}, nil, nil)
			ran := false
			res := l.do(context.Background(), "k", "", 0, noResult(func(context.Context) error { ran = true; return nil }))
			if ran || res.outcome != notAcquired {
				t.Fatalf("outcome %v, ran %v: the handler must never run without the lock", res.outcome, ran)
			}
			if !errors.Is(res.err, ErrUnavailable) || !errors.Is(res.err, fault) {
				t.Errorf("error %v should match ErrUnavailable and unwrap to %v", res.err, fault)
			}
		})
	}
}

func TestLockCompletionIsRetriedWithinTheDeadline(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		updateErrs  []error
		want        lockOutcome
		wantUpdates int
	}{
		{"transient failure then success", []error{lockThrottled, lockThrottled}, processed, 3},
		{"persistent failure", []error{lockThrottled, lockThrottled, lockThrottled, lockThrottled, lockThrottled}, processedUnrecorded, 4},
		{"lock lost is not retried", []error{&types.ConditionalCheckFailedException{}}, processedUnrecorded, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fake := &lockFakeDynamo{updateErrs: tt.updateErrs}
			var slept []time.Duration
			l := lockFakeLocker(t, fake, nil, func(_ context.Context, d time.Duration) error { slept = append(slept, d); return nil })
			res := l.do(context.Background(), "k", "", 0, noResult(lockSucceed))
			if res.outcome != tt.want || fake.updates != tt.wantUpdates {
				t.Fatalf("outcome %v after %d completion writes (%v), want %v after %d", res.outcome, fake.updates, res.err, tt.want, tt.wantUpdates)
			}
			if len(slept) != tt.wantUpdates-1 {
				t.Errorf("slept %v between %d attempts", slept, tt.wantUpdates)
			}
		})
	}
}

func TestLockCompletionRetryRefusesToWaitPastDeadline(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ctx, cancel := context.WithDeadline(context.Background(), now.Add(10*time.Millisecond))
	defer cancel()
	fake := &lockFakeDynamo{updateErrs: []error{lockThrottled, lockThrottled, lockThrottled, lockThrottled}}
	l := lockFakeLocker(t, fake, func() time.Time { return now },
		func(context.Context, time.Duration) error { t.Error("slept past the deadline"); return nil })
	if res := l.do(ctx, "k", "", 0, noResult(lockSucceed)); res.outcome != processedUnrecorded || fake.updates != 1 {
		t.Fatalf("outcome %v after %d writes, want processed-unrecorded after 1", res.outcome, fake.updates)
	}
}

func TestLockMisconfiguredStoreIsToldApartFromAnOutage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		fault             error
		wantMisconfigured bool
	}{
		{&types.ResourceNotFoundException{Message: new("Requested resource not found")}, true},
		{&smithy.GenericAPIError{Code: "AccessDeniedException"}, true},
		{&smithy.GenericAPIError{Code: "ValidationException"}, true},
		{&smithy.GenericAPIError{Code: "UnrecognizedClientException"}, true},
		{lockThrottled, false},
		{&smithy.GenericAPIError{Code: "ThrottlingException"}, false},
		{errors.New("connection reset by peer"), false},
	}
	for _, tt := range tests {
		t.Run(tt.fault.Error(), func(t *testing.T) {
			t.Parallel()
			l := lockFakeLocker(t, &lockFakeDynamo{acquireErr: tt.fault}, nil, nil)
			res := l.do(context.Background(), "k", "", 0, noResult(lockSucceed))
			if res.outcome != notAcquired ||
				errors.Is(res.err, ErrMisconfigured) != tt.wantMisconfigured ||
				errors.Is(res.err, ErrUnavailable) == tt.wantMisconfigured {
				t.Errorf("%v: outcome %v, misconfigured=%v unavailable=%v; want misconfigured=%v",
					tt.fault, res.outcome, errors.Is(res.err, ErrMisconfigured), errors.Is(res.err, ErrUnavailable), tt.wantMisconfigured)
			}
		})
	}
}

func TestLockHandlerDeadlineLeavesTimeToRecordCompletion(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		left, wantReserve time.Duration
	}{
		{10 * time.Second, time.Second},
		{5 * time.Minute, maxCompletionReserve},
	}
	for _, tt := range tests {
		t.Run(tt.left.String(), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithDeadline(context.Background(), now.Add(tt.left))
			defer cancel()
			l := lockFakeLocker(t, &lockFakeDynamo{}, func() time.Time { return now }, nil)
			var fnDeadline time.Time
			l.do(ctx, "k", "", 0, noResult(func(ctx context.Context) error { fnDeadline, _ = ctx.Deadline(); return nil }))
			if want := now.Add(tt.left - tt.wantReserve); !fnDeadline.Equal(want) {
				t.Errorf("handler deadline %v, want %v: %v kept back for the completion", fnDeadline, want, tt.wantReserve)
			}
		})
	}
}
