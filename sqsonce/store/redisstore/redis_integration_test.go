//go:build integration

package redisstore_test

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sqs-once/sqs-once/internal/local/redisserver"
	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/redisstore"
)

// What the conformance suite cannot express: the keys and their expiries,
// the fence counter, records the protocol did not write, the errors, and
// lost answers.

func base() time.Time { return time.Now().Truncate(time.Millisecond) }

func req(id, owner string, now time.Time) store.AcquireRequest {
	return store.AcquireRequest{ID: id, Owner: owner, Now: now, LockUntil: now.Add(10 * time.Second)}
}

// pexpiretime is the key's expiry in epoch milliseconds (-2: no key).
func pexpiretime(t *testing.T, c *redis.Client, key string) int64 {
	t.Helper()
	n, err := c.Do(t.Context(), "PEXPIRETIME", key).Int64()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestKeysAndExpiries: the record and its fence counter share the id as
// their hash tag, the record expires as the DynamoDB store's TTL says (a
// lock FenceRetention after it, a completion when its window's last second
// ends, a release FenceRetention after it), and the counter outlives the
// record by FenceRetention.
func TestKeysAndExpiries(t *testing.T) {
	t.Parallel()
	srv := redisserver.Start(t)
	s, c := newStore(t, srv.Addr, redisstore.Options{})
	ctx := t.Context()
	now := base()
	id := "orders#k-1"
	recKey, fenceKey := "sqsonce:{"+id+"}", "sqsonce:{"+id+"}:fence"

	lease, err := s.Acquire(ctx, store.AcquireRequest{ID: id, Owner: "a", Now: now, LockUntil: now.Add(10*time.Second + 300*time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	if typ := c.Type(ctx, recKey).Val(); typ != "hash" {
		t.Fatalf("the record's key %q is of type %q; want a hash", recKey, typ)
	}
	lockTTL := ceilSec(now.Add(10*time.Second+300*time.Millisecond).Add(store.FenceRetention)) * 1000
	if got := pexpiretime(t, c, recKey); got != lockTTL {
		t.Errorf("after Acquire the record expires at %d ms; want the lock's end + FenceRetention, rounded up to the second: %d", got, lockTTL)
	}
	if got := pexpiretime(t, c, fenceKey); got != lockTTL+store.FenceRetention.Milliseconds() {
		t.Errorf("after Acquire the fence counter expires at %d ms; want the record's expiry + FenceRetention: %d", got, lockTTL+store.FenceRetention.Milliseconds())
	}
	if v, _ := c.Get(ctx, fenceKey).Int64(); v != lease.Fence {
		t.Errorf("the fence counter holds %d; want the lease's fence %d", v, lease.Fence)
	}

	until := now.Add(48*time.Hour + 700*time.Millisecond)
	if err := s.Complete(ctx, lease, store.Completion{Until: until, Result: []byte("r")}); err != nil {
		t.Fatal(err)
	}
	windowEnd := (until.Unix() + 1) * 1000
	if got := pexpiretime(t, c, recKey); got != windowEnd {
		t.Errorf("after Complete the record expires at %d ms; want the end of the window's last second: %d", got, windowEnd)
	}
	if got := pexpiretime(t, c, fenceKey); got != windowEnd+store.FenceRetention.Milliseconds() {
		t.Errorf("after Complete the fence counter expires at %d ms; want the window's end + FenceRetention: %d", got, windowEnd+store.FenceRetention.Milliseconds())
	}

	// Release: the counter's expiry never moves earlier, even when the
	// record's does.
	id2 := "orders#k-2"
	l2, err := s.Acquire(ctx, store.AcquireRequest{ID: id2, Owner: "a", Now: now, LockUntil: now.Add(2 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	before := pexpiretime(t, c, "sqsonce:{"+id2+"}:fence")
	if err := s.Release(ctx, l2, now); err != nil {
		t.Fatal(err)
	}
	if got, want := pexpiretime(t, c, "sqsonce:{"+id2+"}"), ceilSec(now.Add(store.FenceRetention))*1000; got != want {
		t.Errorf("after Release the record expires at %d ms; want now + FenceRetention: %d", got, want)
	}
	if got := pexpiretime(t, c, "sqsonce:{"+id2+"}:fence"); got != before {
		t.Errorf("after Release the fence counter expires at %d ms; want it kept at %d (it never moves earlier)", got, before)
	}
}

func ceilSec(t time.Time) int64 {
	if t.Equal(time.Unix(t.Unix(), 0)) {
		return t.Unix()
	}
	return t.Unix() + 1
}

// TestFenceOutlivesTheRecord: a record gone by expiry (the server deletes
// the key; here DEL does it at once) and acquired again by a host whose
// clock is no later still gets a larger fence, from the counter; and a
// record whose counter was lost (evicted) goes on from the record's fence.
func TestFenceOutlivesTheRecord(t *testing.T) {
	t.Parallel()
	srv := redisserver.Start(t)
	s, c := newStore(t, srv.Addr, redisstore.Options{})
	ctx := t.Context()
	now := base()
	id := "orders#fence"
	first, err := s.Acquire(ctx, req(id, "a", now))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, first, now); err != nil {
		t.Fatal(err)
	}
	second, err := s.Acquire(ctx, req(id, "b", now))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Del(ctx, "sqsonce:{"+id+"}").Err(); err != nil {
		t.Fatal(err)
	}
	third, err := s.Acquire(ctx, req(id, "c", now))
	if err != nil {
		t.Fatal(err)
	}
	if third.Fence != second.Fence+1 {
		t.Errorf("after the record expired, Acquire at the same clock got fence %d; want %d, one more than the last (the counter outlives the record)", third.Fence, second.Fence+1)
	}
	if err := c.Del(ctx, "sqsonce:{"+id+"}:fence").Err(); err != nil {
		t.Fatal(err)
	}
	later := now.Add(11 * time.Second)
	fourth, err := s.Acquire(ctx, req(id, "d", later))
	if err != nil {
		t.Fatal(err)
	}
	if fourth.Fence != third.Fence+1 {
		t.Errorf("with the counter lost, Acquire got fence %d; want the record's %d plus one", fourth.Fence, third.Fence)
	}
	if v, _ := c.Get(ctx, "sqsonce:{"+id+"}:fence").Int64(); v != fourth.Fence {
		t.Errorf("the counter holds %d after the Acquire; want %d, written back", v, fourth.Fence)
	}
}

// TestResultIsBinarySafe: a result with NUL bytes and bytes that are not
// UTF-8 reads back as given, from Read and from a refusal; an empty
// result is kept apart from none.
func TestResultIsBinarySafe(t *testing.T) {
	t.Parallel()
	srv := redisserver.Start(t)
	s, _ := newStore(t, srv.Addr, redisstore.Options{})
	ctx := t.Context()
	now := base()
	result := []byte{0, 0xff, 0xfe, '\r', '\n', '$', '*', 0, 'x'}
	for _, tc := range []struct {
		name   string
		result []byte
	}{{"binary", result}, {"empty", []byte{}}, {"none", nil}} {
		id := "orders#result-" + tc.name
		lease, err := s.Acquire(ctx, req(id, "a", now))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Complete(ctx, lease, store.Completion{Until: now.Add(time.Minute), Result: tc.result}); err != nil {
			t.Fatal(err)
		}
		rec, err := s.Read(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(rec.Result, tc.result) || (rec.Result == nil) != (tc.result == nil) {
			t.Errorf("%s: Read returns Result %q (nil %v); want %q (nil %v)", tc.name, rec.Result, rec.Result == nil, tc.result, tc.result == nil)
		}
		_, err = s.Acquire(ctx, req(id, "b", now))
		var held *store.HeldError
		if !errors.As(err, &held) || !bytes.Equal(held.Record.Result, tc.result) || (held.Record.Result == nil) != (tc.result == nil) {
			t.Errorf("%s: the refusal is %v; want a HeldError carrying %q", tc.name, err, tc.result)
		}
	}
}

// TestOutbox: the outbox is a field of its own beside the result: binary
// safe, an empty one kept apart from none, read back by Read and by a
// refusal, and as large as store.MaxResultSize leaves beside the result.
// MarkSent removes that field and nothing else (the result, the other
// fields and both keys' expiries stay). A completion written by the
// version before outboxes (no outbox field) reads as Outbox nil, and
// MarkSent of it is a success that writes nothing.
func TestOutbox(t *testing.T) {
	t.Parallel()
	srv := redisserver.Start(t)
	s, c := newStore(t, srv.Addr, redisstore.Options{})
	ctx := t.Context()
	now := base()
	binary := []byte{0, 0xff, 0xfe, '\r', '\n', '$', '*', 0, 'x'}
	half := store.MaxResultSize / 2
	for _, tc := range []struct {
		name           string
		result, outbox []byte
	}{
		{"binary", []byte("r"), binary},
		{"empty", nil, []byte{}},
		{"none", []byte("r"), nil},
		{"largest", bytes.Repeat([]byte("r"), half), bytes.Repeat([]byte("o"), store.MaxResultSize-half)},
	} {
		id := "orders#outbox-" + tc.name
		key := "sqsonce:{" + id + "}"
		lease, err := s.Acquire(ctx, req(id, "a", now))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Complete(ctx, lease, store.Completion{Until: now.Add(time.Minute), Result: tc.result, Outbox: tc.outbox}); err != nil {
			t.Fatalf("%s: Complete: %v", tc.name, err)
		}
		rec, err := s.Read(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if !sameBytes(rec.Outbox, tc.outbox) || !sameBytes(rec.Result, tc.result) {
			t.Errorf("%s: Read returns Outbox of %d bytes (nil %v), Result of %d (nil %v); want %d (nil %v) and %d (nil %v)", tc.name,
				len(rec.Outbox), rec.Outbox == nil, len(rec.Result), rec.Result == nil, len(tc.outbox), tc.outbox == nil, len(tc.result), tc.result == nil)
		}
		_, err = s.Acquire(ctx, req(id, "b", now))
		var held *store.HeldError
		if !errors.As(err, &held) || !sameBytes(held.Record.Outbox, tc.outbox) {
			t.Errorf("%s: the refusal is %v; want a HeldError carrying the outbox", tc.name, err)
		}

		fields := c.HGetAll(ctx, key).Val()
		recExp, fenceExp := pexpiretime(t, c, key), pexpiretime(t, c, key+":fence")
		if err := s.MarkSent(ctx, rec); err != nil {
			t.Fatalf("%s: MarkSent of the completion as read: %v", tc.name, err)
		}
		delete(fields, "outbox")
		if got := c.HGetAll(ctx, key).Val(); !maps.Equal(got, fields) {
			t.Errorf("%s: MarkSent left the fields %v; want %v: only the outbox removed", tc.name, fieldNames(got), fieldNames(fields))
		}
		if got, got2 := pexpiretime(t, c, key), pexpiretime(t, c, key+":fence"); got != recExp || got2 != fenceExp {
			t.Errorf("%s: MarkSent moved the expiries from %d and %d ms to %d and %d; want them kept", tc.name, recExp, fenceExp, got, got2)
		}
	}

	// A completion as the version before outboxes wrote it.
	id := "orders#outbox-old"
	key := "sqsonce:{" + id + "}"
	if err := c.HSet(ctx, key, "status", "COMPLETED", "owner", "a", "fence", 42, "expiresAt", now.Add(time.Minute).Unix(), "payloadHash", "h", "result", "r").Err(); err != nil {
		t.Fatal(err)
	}
	stored := c.HGetAll(ctx, key).Val()
	rec, err := s.Read(ctx, id)
	if err != nil || rec.Outbox != nil || string(rec.Result) != "r" || rec.Fence != 42 {
		t.Fatalf("Read of a completion without an outbox field returned %s, Outbox %q (nil %v), Result %q, %v; want fence 42, no outbox, result %q", rec, rec.Outbox, rec.Outbox == nil, rec.Result, err, "r")
	}
	_, err = s.Acquire(ctx, req(id, "b", now))
	var held *store.HeldError
	if !errors.As(err, &held) || held.Record.Outbox != nil {
		t.Errorf("Acquire of a completion without an outbox field returned %v; want a HeldError with no outbox", err)
	}
	if err := s.MarkSent(ctx, rec); err != nil {
		t.Errorf("MarkSent of a completion without an outbox field returned %v; want nil (nothing is pending)", err)
	}
	if got := c.HGetAll(ctx, key).Val(); !maps.Equal(got, stored) {
		t.Errorf("MarkSent of a completion without an outbox changed the hash from %v to %v", stored, got)
	}
	// The fence is compared whole: a record read with another fence is
	// not the completion there now.
	other := rec
	other.Fence = 4
	if err := s.MarkSent(ctx, other); !errors.Is(err, store.ErrRecordChanged) {
		t.Errorf("MarkSent of the completion with fence 4, the record's fence 42, returned %v; want ErrRecordChanged", err)
	}
}

// sameBytes is bytes.Equal that also tells none (nil) from empty.
func sameBytes(a, b []byte) bool { return bytes.Equal(a, b) && (a == nil) == (b == nil) }

// fieldNames are a hash's field names, sorted: what a failure shows of a
// hash whose values may be large.
func fieldNames(h map[string]string) []string {
	return slices.Sorted(maps.Keys(h))
}

// TestForeignRecords: a hash the protocol did not write is a
// *store.RecordError (ErrMisconfigured) and is left alone; a key of
// another type is a StoreError matching ErrMisconfigured.
func TestForeignRecords(t *testing.T) {
	t.Parallel()
	srv := redisserver.Start(t)
	s, c := newStore(t, srv.Addr, redisstore.Options{})
	ctx := t.Context()
	now := base()
	for _, tc := range []struct {
		name   string
		fields []any
	}{
		{"no-fence", []any{"status", "PROCESSING", "owner", "x", "lockExpiresAt", now.Add(time.Hour).UnixMilli(), "expiresAt", now.Add(2 * time.Hour).Unix()}},
		{"no-lock-expiry", []any{"status", "PROCESSING", "owner", "x", "fence", 7, "expiresAt", now.Add(2 * time.Hour).Unix()}},
		{"other-status", []any{"status", "DONE", "owner", "x", "fence", 7, "expiresAt", now.Add(2 * time.Hour).Unix()}},
		{"someone-elses", []any{"name", "alice"}},
	} {
		id := "orders#foreign-" + tc.name
		key := "sqsonce:{" + id + "}"
		if err := c.HSet(ctx, key, tc.fields...).Err(); err != nil {
			t.Fatal(err)
		}
		stored := c.HGetAll(ctx, key).Val()
		_, err := s.Acquire(ctx, req(id, "a", now))
		var re *store.RecordError
		if !errors.As(err, &re) || !errors.Is(err, store.ErrMisconfigured) {
			t.Errorf("%s: Acquire returned %v; want a *store.RecordError", tc.name, err)
		}
		if _, err := s.Read(ctx, id); !errors.As(err, &re) {
			t.Errorf("%s: Read returned %v; want a *store.RecordError", tc.name, err)
		}
		// Another owner's release is refused, and the refusal cannot be
		// read as a record.
		if err := s.Release(ctx, store.Lease{ID: id, Owner: "y"}, now); !errors.As(err, &re) {
			t.Errorf("%s: Release returned %v; want a *store.RecordError", tc.name, err)
		}
		// MarkSent of a completion read earlier under the id: the hash is
		// not it, and keeps every field.
		if err := s.MarkSent(ctx, store.Record{ID: id, Status: store.StatusCompleted, Owner: "x", Fence: 7}); !errors.As(err, &re) {
			t.Errorf("%s: MarkSent returned %v; want a *store.RecordError", tc.name, err)
		}
		if got := c.HGetAll(ctx, key).Val(); len(got) != len(stored) {
			t.Errorf("%s: the hash changed from %v to %v", tc.name, stored, got)
		}
	}

	id := "orders#wrongtype"
	if err := c.Set(ctx, "sqsonce:{"+id+"}", "a string", 0).Err(); err != nil {
		t.Fatal(err)
	}
	calls := map[string]func() error{
		"Acquire":  func() error { _, err := s.Acquire(ctx, req(id, "a", now)); return err },
		"Read":     func() error { _, err := s.Read(ctx, id); return err },
		"Complete": func() error { return s.Complete(ctx, store.Lease{ID: id, Owner: "a"}, store.Completion{Until: now}) },
		"MarkSent": func() error {
			return s.MarkSent(ctx, store.Record{ID: id, Status: store.StatusCompleted, Owner: "a", Fence: 1})
		},
	}
	for name, call := range calls {
		err := call()
		var se *store.StoreError
		if !errors.As(err, &se) || !errors.Is(err, store.ErrMisconfigured) || errors.Is(err, store.ErrUnavailable) {
			t.Errorf("%s on a key of another type returned %v; want a *store.StoreError matching ErrMisconfigured only", name, err)
		}
	}
}

// TestUnreachable: a server that does not answer is ErrUnavailable, not
// ErrMisconfigured, and says which record.
func TestUnreachable(t *testing.T) {
	t.Parallel()
	srv := redisserver.Start(t)
	s, _ := newStore(t, srv.Addr, redisstore.Options{})
	srv.Stop()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	_, err := s.Acquire(ctx, req("orders#down", "a", base()))
	if !errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrMisconfigured) {
		t.Errorf("Acquire on a stopped server returned %v; want ErrUnavailable only", err)
	}
	if err == nil || !strings.Contains(err.Error(), "orders#down") {
		t.Errorf("the error %v does not name the record", err)
	}
}

// TestLostAnswersAreRecognised: a write the server applied whose answer the
// connection lost is retried (by the client) and recognised as the
// caller's own: Acquire returns its lease with the fence it took, not
// "in progress"; Complete, Renew, MarkSent and Release succeed again.
func TestLostAnswersAreRecognised(t *testing.T) {
	t.Parallel()
	srv := redisserver.Start(t)
	proxy := redisserver.NewProxy(t, srv.Addr)
	s, _ := newStore(t, proxy.Addr, redisstore.Options{})
	direct, _ := newStore(t, srv.Addr, redisstore.Options{})
	ctx := t.Context()
	now := base()
	id := "orders#lost"
	// The scripts loaded, so that the answer lost is that of a script the
	// server ran (not a NOSCRIPT refusal).
	if err := s.Check(ctx); err != nil {
		t.Fatal(err)
	}

	proxy.LoseAnswer([]byte("EVALSHA"))
	lease, err := s.Acquire(ctx, req(id, "a", now))
	if proxy.Lost() != 1 {
		t.Fatalf("the proxy lost %d answers; want 1 (the test proves nothing)", proxy.Lost())
	}
	if err != nil {
		t.Fatalf("Acquire whose answer was lost returned %v; want the lease (the retry is the same acquisition)", err)
	}
	rec, err := direct.Read(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Owner != "a" || rec.Fence != lease.Fence || lease.Fence != store.FenceSeed(now)+1 {
		t.Errorf("after a lost answer the lease has fence %d and the record is %s; want one acquisition, fence %d", lease.Fence, rec, store.FenceSeed(now)+1)
	}

	proxy.LoseAnswer([]byte("EVALSHA"))
	if _, err := s.Renew(ctx, lease, now.Add(20*time.Second)); err != nil || proxy.Lost() != 2 {
		t.Errorf("Renew whose answer was lost returned %v (lost %d); want success", err, proxy.Lost())
	}
	proxy.LoseAnswer([]byte("EVALSHA"))
	if err := s.Complete(ctx, lease, store.Completion{Until: now.Add(time.Minute), Result: []byte("done"), Outbox: []byte("msgs")}); err != nil || proxy.Lost() != 3 {
		t.Errorf("Complete whose answer was lost returned %v (lost %d); want success: the work ran and is recorded", err, proxy.Lost())
	}
	done, _ := direct.Read(ctx, id)
	if done.Status != store.StatusCompleted || string(done.Result) != "done" || string(done.Outbox) != "msgs" {
		t.Errorf("after Complete the record is %s with result %q, outbox %q; want COMPLETED with %q, %q", done, done.Result, done.Outbox, "done", "msgs")
	}
	proxy.LoseAnswer([]byte("EVALSHA"))
	if err := s.MarkSent(ctx, done); err != nil || proxy.Lost() != 4 {
		t.Errorf("MarkSent whose answer was lost returned %v (lost %d); want success: the outbox is removed, and the retry finds it so", err, proxy.Lost())
	}
	if rec, _ := direct.Read(ctx, id); rec.Outbox != nil || string(rec.Result) != "done" {
		t.Errorf("after MarkSent the record has outbox %q, result %q; want none and %q", rec.Outbox, rec.Result, "done")
	}

	id2 := "orders#lost-release"
	l2, err := s.Acquire(ctx, req(id2, "a", now))
	if err != nil {
		t.Fatal(err)
	}
	proxy.LoseAnswer([]byte("EVALSHA"))
	if err := s.Release(ctx, l2, now); err != nil || proxy.Lost() != 5 {
		t.Errorf("Release whose answer was lost returned %v (lost %d); want success", err, proxy.Lost())
	}
}

// TestWaitReplicas: with WaitReplicas set, a write that no replica
// acknowledged in time is ErrUnavailable (applied on the primary, and
// recognised on the retry); with a replica attached, writes succeed and
// are on the replica when they return.
func TestWaitReplicas(t *testing.T) {
	t.Parallel()
	primary := redisserver.Start(t)
	s, _ := newStore(t, primary.Addr, redisstore.Options{WaitReplicas: 1, WaitTimeout: 50 * time.Millisecond})
	ctx := t.Context()
	now := base()
	_, err := s.Acquire(ctx, req("orders#wait", "a", now))
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Acquire waiting for a replica that does not exist returned %v; want ErrUnavailable", err)
	}

	replica := redisserver.Start(t)
	_, rc := newStore(t, replica.Addr, redisstore.Options{})
	host, port, _ := strings.Cut(primary.Addr, ":")
	if err := rc.Do(ctx, "REPLICAOF", host, port).Err(); err != nil {
		t.Fatal(err)
	}
	// WAIT returns as soon as the replica acknowledges: a long timeout
	// costs nothing when it does, and a busy machine's replica may take
	// longer than 50 ms.
	s, _ = newStore(t, primary.Addr, redisstore.Options{WaitReplicas: 1, WaitTimeout: 10 * time.Second})
	// Until the replica has synchronised, WAIT counts none: retry the
	// same acquisition (the retry recognises it) until it is acknowledged.
	var lease store.Lease
	deadline := time.Now().Add(20 * time.Second)
	for {
		lease, err = s.Acquire(ctx, req("orders#wait", "a", now))
		if err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatalf("Acquire with a replica attached: %v", err)
	}
	if lease.Fence != store.FenceSeed(now)+1 {
		t.Errorf("the acquisition retried until a replica acknowledged it has fence %d; want %d (one acquisition)", lease.Fence, store.FenceSeed(now)+1)
	}
	if err := s.Complete(ctx, lease, store.Completion{Until: now.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if st := rc.HGet(ctx, "sqsonce:{orders#wait}", "status").Val(); st != "COMPLETED" {
		t.Errorf("the replica has status %q right after Complete returned; want COMPLETED (WAIT)", st)
	}
}

// TestNewRefusesWaitOnCluster: WAIT cannot follow a write on a cluster
// client's connection.
func TestNewRefusesWaitOnCluster(t *testing.T) {
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	defer c.Close()
	if _, err := redisstore.New(c, redisstore.Options{WaitReplicas: 1}); !errors.Is(err, store.ErrMisconfigured) {
		t.Errorf("New with WaitReplicas on a cluster client returned %v; want ErrMisconfigured", err)
	}
}

// TestCheck: Check passes on a server with the default policy (noeviction)
// and names an evicting one.
func TestCheck(t *testing.T) {
	t.Parallel()
	srv := redisserver.Start(t)
	s, c := newStore(t, srv.Addr, redisstore.Options{})
	ctx := t.Context()
	if err := s.Check(ctx); err != nil {
		t.Fatalf("Check on a fresh server: %v", err)
	}
	if err := c.ConfigSet(ctx, "maxmemory-policy", "volatile-lru").Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.Check(ctx); !errors.Is(err, store.ErrMisconfigured) || !strings.Contains(err.Error(), "volatile-lru") {
		t.Errorf("Check with maxmemory-policy volatile-lru returned %v; want ErrMisconfigured naming it", err)
	}
}
