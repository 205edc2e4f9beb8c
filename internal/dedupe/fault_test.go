package dedupe_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/sqs-once/sqs-once/internal/dedupe"
)

// fakeDynamo injects errors the store must classify, where no HTTP fault
// can produce the AWS error type (a missing table, a denied call).
type fakeDynamo struct {
	mu         sync.Mutex
	acquireErr error
	updateErrs []error // consumed one per UpdateItem call after the acquire
	updates    int     // UpdateItem calls after the acquire
}

var _ dedupe.DynamoAPI = (*fakeDynamo)(nil)

func (f *fakeDynamo) UpdateItem(_ context.Context, in *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
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

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

var throttled = &types.ProvisionedThroughputExceededException{Message: new("rate exceeded")}

func TestUnavailableStoreNeverRunsHandler(t *testing.T) {
	t.Parallel()
	for _, fault := range []error{throttled, &types.InternalServerError{}, context.DeadlineExceeded} {
		t.Run(fault.Error(), func(t *testing.T) {
			t.Parallel()
			g := &dedupe.Guard{Store: dedupe.NewStore(&fakeDynamo{acquireErr: fault}, "t", "p")}
			ran := false
			res := g.Do(context.Background(), "k", func(context.Context) error { ran = true; return nil })
			if ran || res.Outcome != dedupe.NotAcquired {
				t.Fatalf("outcome %v, ran %v: the handler must never run without the lock", res.Outcome, ran)
			}
			if !errors.Is(res.Err, dedupe.ErrUnavailable) || !errors.Is(res.Err, fault) {
				t.Errorf("error %v should match ErrUnavailable and unwrap to %v", res.Err, fault)
			}
		})
	}
}

func TestCompletionIsRetriedWithinTheDeadline(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		updateErrs  []error
		want        dedupe.Outcome
		wantUpdates int
	}{
		{"transient failure then success", []error{throttled, throttled}, dedupe.Processed, 3},
		{"persistent failure", []error{throttled, throttled, throttled, throttled, throttled}, dedupe.ProcessedUnrecorded, 4},
		{"lock lost is not retried", []error{&types.ConditionalCheckFailedException{}}, dedupe.ProcessedUnrecorded, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fake := &fakeDynamo{updateErrs: tt.updateErrs}
			var slept []time.Duration
			g := &dedupe.Guard{
				Store: dedupe.NewStore(fake, "t", "p"),
				Sleep: func(_ context.Context, d time.Duration) error { slept = append(slept, d); return nil },
			}
			res := g.Do(context.Background(), "k", succeed)
			if res.Outcome != tt.want || fake.updates != tt.wantUpdates {
				t.Fatalf("outcome %v after %d completion writes (%v), want %v after %d", res.Outcome, fake.updates, res.Err, tt.want, tt.wantUpdates)
			}
			if len(slept) != tt.wantUpdates-1 {
				t.Errorf("slept %v between %d attempts", slept, tt.wantUpdates)
			}
		})
	}
}

func TestCompletionRetryRefusesToWaitPastDeadline(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ctx, cancel := context.WithDeadline(context.Background(), now.Add(10*time.Millisecond))
	defer cancel()
	fake := &fakeDynamo{updateErrs: []error{throttled, throttled, throttled, throttled}}
	g := &dedupe.Guard{
		Store: dedupe.NewStore(fake, "t", "p"),
		Now:   func() time.Time { return now },
		Sleep: func(context.Context, time.Duration) error { t.Error("slept past the deadline"); return nil },
	}
	if res := g.Do(ctx, "k", succeed); res.Outcome != dedupe.ProcessedUnrecorded || fake.updates != 1 {
		t.Fatalf("outcome %v after %d writes, want processed-unrecorded after 1", res.Outcome, fake.updates)
	}
}

func TestMisconfiguredStoreIsToldApartFromAnOutage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		fault             error
		wantMisconfigured bool
	}{
		{&types.ResourceNotFoundException{Message: new("Requested resource not found")}, true},
		{&smithy.GenericAPIError{Code: "AccessDeniedException"}, true},
		{&smithy.GenericAPIError{Code: "ValidationException"}, true},
		{throttled, false},
		{&smithy.GenericAPIError{Code: "ThrottlingException"}, false},
		{errors.New("connection reset by peer"), false},
	}
	for _, tt := range tests {
		t.Run(tt.fault.Error(), func(t *testing.T) {
			t.Parallel()
			g := &dedupe.Guard{Store: dedupe.NewStore(&fakeDynamo{acquireErr: tt.fault}, "t", "p")}
			res := g.Do(context.Background(), "k", succeed)
			if res.Outcome != dedupe.NotAcquired ||
				errors.Is(res.Err, dedupe.ErrMisconfigured) != tt.wantMisconfigured ||
				errors.Is(res.Err, dedupe.ErrUnavailable) == tt.wantMisconfigured {
				t.Errorf("%v: outcome %v, misconfigured=%v unavailable=%v; want misconfigured=%v",
					tt.fault, res.Outcome, errors.Is(res.Err, dedupe.ErrMisconfigured), errors.Is(res.Err, dedupe.ErrUnavailable), tt.wantMisconfigured)
			}
		})
	}
}

func TestHandlerDeadlineLeavesTimeToRecordCompletion(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		left, wantReserve time.Duration
	}{
		{10 * time.Second, time.Second},
		{5 * time.Minute, dedupe.MaxCompletionReserve},
	}
	for _, tt := range tests {
		t.Run(tt.left.String(), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithDeadline(context.Background(), now.Add(tt.left))
			defer cancel()
			g := &dedupe.Guard{Store: dedupe.NewStore(&fakeDynamo{}, "t", "p"), Now: func() time.Time { return now }}
			var fnDeadline time.Time
			g.Do(ctx, "k", func(ctx context.Context) error { fnDeadline, _ = ctx.Deadline(); return nil })
			if want := now.Add(tt.left - tt.wantReserve); !fnDeadline.Equal(want) {
				t.Errorf("handler deadline %v, want %v: %v kept back for the completion", fnDeadline, want, tt.wantReserve)
			}
		})
	}
}
