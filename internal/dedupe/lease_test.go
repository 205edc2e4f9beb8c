package dedupe_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqs-once/sqs-once/internal/dedupe"
)

func TestFenceGrowsWithEveryAcquisition(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	var seen []int64
	record := func(ctx context.Context) error {
		lease, ok := dedupe.LeaseFrom(ctx)
		if !ok || lease.Key != "k" {
			t.Errorf("fn's context has lease %+v, %v; want the key's lease", lease, ok)
		}
		seen = append(seen, lease.Fence)
		return nil
	}

	// First acquisition, abandoned (its holder crashed): a new record's
	// fence starts from the clock.
	f1 := b.firstFence()
	first, err := b.store.Acquire(ctx, "k", b.clock.Now(), b.clock.Now().Add(time.Second))
	if err != nil || first.Fence != f1 {
		t.Fatalf("first acquire: fence %d, %v; want %d", first.Fence, err, f1)
	}
	// Takeover of the expired lock.
	b.clock.Advance(2 * time.Second)
	res := b.guard.Do(ctx, "k", record)
	if res.Outcome != dedupe.Processed || res.Fence != f1+1 {
		t.Fatalf("takeover: %v fence %d (%v); want processed with fence %d", res.Outcome, res.Fence, res.Err, f1+1)
	}
	// Takeover of a completion whose window ended, before TTL deleted it.
	b.clock.Advance(time.Hour + time.Second)
	if res := b.guard.Do(ctx, "k", record); res.Outcome != dedupe.Processed || res.Fence != f1+2 {
		t.Fatalf("after the window: %v fence %d; want processed with fence %d", res.Outcome, res.Fence, f1+2)
	}
	if len(seen) != 2 || seen[0] != f1+1 || seen[1] != f1+2 {
		t.Errorf("fn saw fences %v, want [%d %d]", seen, f1+1, f1+2)
	}
	// A failure releases the lock but keeps the record: the retry's fence
	// is still one more, never back to a smaller number.
	b.clock.Advance(time.Hour + time.Second)
	b.guard.Do(ctx, "k", func(context.Context) error { return errors.New("fails") })
	if res := b.guard.Do(ctx, "k", record); res.Fence != f1+4 {
		t.Errorf("after a release: fence %d, want %d", res.Fence, f1+4)
	}
}

// TestAFenceGrowsAcrossTheRecordsDeletion: TTL deletes a record only after
// every holder of it is gone, and a new record's fence starts from the
// clock, above every fence of the old one; a counter restarting at 1 would
// let a downstream store accept a stale holder, or refuse every new one.
func TestAFenceGrowsAcrossTheRecordsDeletion(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	for range 3 { // takeovers push the old record's fence up
		if _, err := b.store.Acquire(ctx, "k", b.clock.Now(), b.clock.Now().Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		b.clock.Advance(2 * time.Second)
	}
	old, err := b.store.Acquire(ctx, "k", b.clock.Now(), b.clock.Now().Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	// What TTL does, FenceRetention after the lock ended.
	b.clock.Advance(time.Second + dedupe.FenceRetention)
	if _, err := b.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(b.table), Key: key("orders-fn#k")}); err != nil {
		t.Fatal(err)
	}
	renewed, err := b.store.Acquire(ctx, "k", b.clock.Now(), b.clock.Now().Add(time.Second))
	if err != nil || renewed.Fence <= old.Fence {
		t.Errorf("fence after the record was deleted: %d (%v), want above the old record's %d", renewed.Fence, err, old.Fence)
	}
}

func TestOnlyAnExplicitSuccessCompletes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tests := []struct {
		name    string
		fn      func(context.Context) error
		wantErr func(error) bool
	}{
		{"runtime.Goexit, as t.FailNow calls it", func(context.Context) error { runtime.Goexit(); return nil },
			func(err error) bool { return errors.Is(err, dedupe.ErrExited) }},
		{"panic", func(context.Context) error { panic("boom") },
			func(err error) bool { var p *dedupe.PanicError; return errors.As(err, &p) && p.Value == "boom" }},
		{"panic(nil)", func(context.Context) error { panic(nil) },
			func(err error) bool { var p *dedupe.PanicError; return errors.As(err, &p) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := b.guard.Do(context.Background(), tt.name, tt.fn)
			if res.Outcome != dedupe.Failed || !tt.wantErr(res.Err) || res.ReleaseErr != nil {
				t.Fatalf("outcome %v, err %v, release %v: an odd exit must be a failure that releases the lock", res.Outcome, res.Err, res.ReleaseErr)
			}
			if s := b.status(t, "orders-fn#"+tt.name); s != "RELEASED" {
				t.Errorf("status %q: the lock was not released", s)
			}
		})
	}
}

func TestReleaseOfARecordDeletedByHandSucceeds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	lease, err := b.store.Acquire(ctx, "k", b.clock.Now(), b.clock.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	// What a retried DeleteItem meets when its first attempt was applied.
	if _, err := b.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(b.table), Key: key("orders-fn#k")}); err != nil {
		t.Fatal(err)
	}
	if err := b.store.Release(ctx, lease, b.clock.Now()); err != nil {
		t.Errorf("release of a deleted lock: %v, want success: the key is free", err)
	}
}

func TestRecordsTheProtocolDidNotWriteAreNamedAsSuch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tests := []struct {
		name    string
		item    map[string]types.AttributeValue
		problem string
	}{
		{"unknown status", map[string]types.AttributeValue{"status": &types.AttributeValueMemberS{Value: "DONE"}}, `status is "DONE"`},
		{"no status", map[string]types.AttributeValue{"payload": &types.AttributeValueMemberS{Value: "x"}}, `status is ""`},
		{"lock without expiry", map[string]types.AttributeValue{"status": &types.AttributeValueMemberS{Value: "PROCESSING"}}, "PROCESSING record without a numeric lockExpiresAt"},
		{"completion without window", map[string]types.AttributeValue{"status": &types.AttributeValueMemberS{Value: "COMPLETED"}}, "COMPLETED record without a numeric expiresAt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := "orders-fn#" + tt.name
			tt.item["id"] = &types.AttributeValueMemberS{Value: id}
			if _, err := b.client.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(b.table), Item: tt.item}); err != nil {
				t.Fatal(err)
			}
			ran := false
			res := b.guard.Do(context.Background(), tt.name, func(context.Context) error { ran = true; return nil })
			var rec *dedupe.RecordError
			if ran || res.Outcome != dedupe.NotAcquired || !errors.As(res.Err, &rec) || !errors.Is(res.Err, dedupe.ErrMisconfigured) {
				t.Fatalf("outcome %v ran %v err %v; want not-acquired with a RecordError", res.Outcome, ran, res.Err)
			}
			if msg := res.Err.Error(); !strings.Contains(msg, tt.problem) || !strings.Contains(msg, id) || strings.Contains(msg, "1970") || strings.Contains(msg, "0001") {
				t.Errorf("message %q should name the record %s and the problem %q, and no made-up date", msg, id, tt.problem)
			}
		})
	}
}

func key(id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: id}}
}
