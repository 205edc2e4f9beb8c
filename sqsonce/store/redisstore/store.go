package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sqs-once/sqs-once/sqsonce/store"
)

// DefaultKeyPrefix is the prefix of every key the store writes, unless
// Options.KeyPrefix says otherwise.
const DefaultKeyPrefix = "sqsonce:"

// Options configures a Store. The zero value is usable.
type Options struct {
	// KeyPrefix goes before every key the store writes (default
	// DefaultKeyPrefix), so that the records share a database with other
	// data without colliding with it.
	KeyPrefix string
	// WaitReplicas, when above zero, makes every write wait until that many
	// replicas acknowledged it (WAIT), for at most WaitTimeout (default one
	// second). A write that fewer replicas acknowledged in time is an error
	// matching store.ErrUnavailable: it is applied on the primary, and
	// the protocol treats it as an answer lost (the record is retried, and
	// the retry recognises the write). It narrows, and does not close, the
	// window in which a failover loses a lock or a completion: Redis
	// replication stays asynchronous. Not with a Redis Cluster client
	// (WAIT must follow the write on its connection): New refuses that.
	WaitReplicas int
	WaitTimeout  time.Duration
}

// Store is the store.Store on Redis or Valkey. Each record is a hash
// under "<prefix>{<id>}" and the fence counter of its id a string under
// "<prefix>{<id>}:fence": the id is the hash tag, so in Redis Cluster both
// are in one slot. Every write is one Lua script (EVALSHA, EVAL once a
// server does not have it yet), atomic on the server. Safe for concurrent
// use, as its client is.
type Store struct {
	c      redis.UniversalClient
	prefix string
	wait   int
	waitT  time.Duration
	owned  bool // FromEnv made the client: Close closes it
}

var (
	_ store.Store   = (*Store)(nil)
	_ store.Admin   = (*Store)(nil)
	_ store.Checker = (*Store)(nil)
)

// New returns the Store on client: a *redis.Client, a
// *redis.ClusterClient, or a failover (Sentinel) client. The client's
// retries on a dropped connection (MaxRetries, 3 by default) are what
// recognise a write whose answer was lost, as the AWS SDK's retries do for
// the DynamoDB store: leave them on.
func New(client redis.UniversalClient, opts Options) (*Store, error) {
	if client == nil {
		return nil, fmt.Errorf("redisstore: %w: no client", store.ErrMisconfigured)
	}
	s := &Store{c: client, prefix: opts.KeyPrefix, wait: opts.WaitReplicas, waitT: opts.WaitTimeout}
	if s.prefix == "" {
		s.prefix = DefaultKeyPrefix
	}
	if s.waitT <= 0 {
		s.waitT = time.Second
	}
	if s.wait < 0 {
		return nil, fmt.Errorf("redisstore: %w: WaitReplicas %d is below zero", store.ErrMisconfigured, s.wait)
	}
	if _, cluster := client.(*redis.ClusterClient); cluster && s.wait > 0 {
		return nil, fmt.Errorf("redisstore: %w: WaitReplicas needs a client of one primary (WAIT must follow the write on its connection); a Redis Cluster client cannot issue it", store.ErrMisconfigured)
	}
	return s, nil
}

// keys are the record's key and its fence counter's. An id that starts
// with "}" would make the hash tag empty, and the two keys could land in
// different cluster slots: no id the processor builds does (it starts
// with the key prefix), and the store refuses one.
func (s *Store) keys(op, id string) ([]string, error) {
	if id == "" || strings.HasPrefix(id, "}") {
		return nil, &store.StoreError{Op: op, ID: id, Err: fmt.Errorf("%w: a record id must not be empty or start with \"}\" (it is the keys' hash tag)", store.ErrMisconfigured)}
	}
	rec := s.prefix + "{" + id + "}"
	return []string{rec, rec + ":fence"}, nil
}

// Acquire implements store.Store.
func (s *Store) Acquire(ctx context.Context, req store.AcquireRequest) (store.Lease, error) {
	keys, err := s.keys("acquire", req.ID)
	if err != nil {
		return store.Lease{}, err
	}
	expires := ttlSeconds(req.LockUntil.Add(store.FenceRetention))
	ans, err := s.run(ctx, "acquire", req.ID, acquireScript, keys,
		req.Owner, req.PayloadHash, req.Now.UnixMilli(), req.Now.Unix(), req.LockUntil.UnixMilli(),
		expires, expires*1000, fenceExpiry(expires*1000), store.FenceSeed(req.Now))
	if err != nil {
		return store.Lease{}, err
	}
	lease := store.Lease{ID: req.ID, Owner: req.Owner, LockExpiresAt: req.LockUntil}
	if ans.refused {
		rec, err := parseRecord(req.ID, ans.record)
		switch {
		case err != nil:
			return store.Lease{}, err
		case rec.Status == store.StatusProcessing && rec.Owner == req.Owner:
			// Our own attempt, applied and its answer lost: it already
			// moved the fence.
			lease.Fence = rec.Fence
			return lease, nil
		}
		return store.Lease{}, &store.HeldError{Record: rec}
	}
	if len(ans.values) != 2 {
		return store.Lease{}, s.malformed("acquire", req.ID, ans)
	}
	fence, err := strconv.ParseInt(ans.values[0], 10, 64)
	if err != nil {
		return store.Lease{}, s.malformed("acquire", req.ID, ans)
	}
	lease.Fence = fence
	lease.TookOver = ans.values[1] == "1"
	return lease, nil
}

// Renew implements store.Store.
func (s *Store) Renew(ctx context.Context, lease store.Lease, lockUntil time.Time) (store.Lease, error) {
	keys, err := s.keys("renew", lease.ID)
	if err != nil {
		return lease, err
	}
	expires := ttlSeconds(lockUntil.Add(store.FenceRetention))
	ans, err := s.run(ctx, "renew", lease.ID, renewScript, keys,
		lease.Owner, lockUntil.UnixMilli(), expires, expires*1000, fenceExpiry(expires*1000))
	if err != nil {
		return lease, err
	}
	if ans.refused {
		return lease, s.lost("renew", lease, ans.record)
	}
	lease.LockExpiresAt = lockUntil
	return lease, nil
}

// Complete implements store.Store. The record's key expires when the
// window's last second ends: Acquire refuses up to and including
// ExpiresAt, in whole seconds. The result and the outbox are written by
// the script that completes, each as a field of its own (none: no field).
func (s *Store) Complete(ctx context.Context, lease store.Lease, c store.Completion) error {
	keys, err := s.keys("complete", lease.ID)
	if err != nil {
		return err
	}
	expireMs := (c.Until.Unix() + 1) * 1000
	hasResult, hasOutbox := present(c.Result), present(c.Outbox)
	ans, err := s.run(ctx, "complete", lease.ID, completeScript, keys,
		lease.Owner, c.Until.Unix(), expireMs, fenceExpiry(expireMs), hasResult, c.Result, hasOutbox, c.Outbox)
	if err != nil {
		return err
	}
	if ans.refused {
		return s.lost("complete", lease, ans.record)
	}
	return nil
}

// present is the script's flag for a byte field: "1" to write it (empty
// included), "0" to remove it. A nil slice goes over the wire as an empty
// string, as an empty one does, so the flag is what keeps none apart from
// empty.
func present(b []byte) string {
	if b == nil {
		return "0"
	}
	return "1"
}

// MarkSent implements store.Store. A refusal by a record the protocol did
// not write is its *store.RecordError, as from the DynamoDB store.
func (s *Store) MarkSent(ctx context.Context, rec store.Record) error {
	keys, err := s.keys("mark sent", rec.ID)
	if err != nil {
		return err
	}
	ans, err := s.run(ctx, "mark sent", rec.ID, markSentScript, keys, rec.Owner, rec.Fence)
	if err != nil {
		return err
	}
	if ans.refused {
		now, err := parseRecord(rec.ID, ans.record)
		if err != nil {
			return err
		}
		return &store.StoreError{Op: "mark sent", ID: rec.ID, Err: fmt.Errorf("%w: the record is %s, not the completion %s", store.ErrRecordChanged, now, rec)}
	}
	return nil
}

// Release implements store.Store.
func (s *Store) Release(ctx context.Context, lease store.Lease, now time.Time) error {
	keys, err := s.keys("release", lease.ID)
	if err != nil {
		return err
	}
	expires := ttlSeconds(now.Add(store.FenceRetention))
	ans, err := s.run(ctx, "release", lease.ID, releaseScript, keys,
		lease.Owner, expires, expires*1000, fenceExpiry(expires*1000))
	if err != nil {
		return err
	}
	if ans.refused {
		if _, err := parseRecord(lease.ID, ans.record); err != nil {
			return err
		}
		return s.lost("release", lease, ans.record)
	}
	return nil
}

// Read implements store.Store. Read goes to the primary, as every
// command of a client that is not set to read from replicas does: it
// returns the latest write.
func (s *Store) Read(ctx context.Context, id string) (store.Record, error) {
	keys, err := s.keys("read", id)
	if err != nil {
		return store.Record{}, err
	}
	h, err := s.c.HGetAll(ctx, keys[0]).Result()
	if err != nil {
		return store.Record{}, storeError("read", id, err)
	}
	if len(h) == 0 {
		return store.Record{}, fmt.Errorf("record %q: %w", id, store.ErrNotFound)
	}
	return parseRecord(id, h)
}

// Forget implements store.Store.
func (s *Store) Forget(ctx context.Context, rec store.Record) error {
	keys, err := s.keys("forget", rec.ID)
	if err != nil {
		return err
	}
	ans, err := s.run(ctx, "forget", rec.ID, forgetScript, keys, rec.Owner)
	if err != nil {
		return err
	}
	if ans.refused {
		now, perr := parseRecord(rec.ID, ans.record)
		what := now.String()
		if perr != nil {
			what = perr.Error()
		}
		return fmt.Errorf("record %q was %s when read and is now %s: %w", rec.ID, rec, what, store.ErrRecordChanged)
	}
	return nil
}

// Check implements store.Checker (sqsonce's Processor.Check calls it): it loads every
// script (so a server or an ACL that refuses scripts, or a server older
// than 7.0, says so now rather than on the first record) and reads the
// server's maxmemory-policy where the server lets it be read.
func (s *Store) Check(ctx context.Context) error {
	if err := s.c.Ping(ctx).Err(); err != nil {
		return storeError("check", "", err)
	}
	for _, sc := range scripts {
		if err := sc.Load(ctx, s.c).Err(); err != nil {
			return storeError("check", "", err)
		}
	}
	// PEXPIRETIME, which the scripts use, came with Redis 7.0.
	if err := s.c.Do(ctx, "PEXPIRETIME", s.prefix+"{check}").Err(); err != nil {
		return storeError("check", "", fmt.Errorf("PEXPIRETIME (Redis 7.0 or later, Valkey 7.2 or later): %w", err))
	}
	// An evicting policy may delete a live lock or a completion under
	// memory pressure: every key the store writes has an expiry, so even
	// volatile-* policies evict them. Managed services (ElastiCache) refuse
	// CONFIG: then there is nothing to read, and the docs say what to set.
	policy, err := s.c.ConfigGet(ctx, "maxmemory-policy").Result()
	if err == nil && policy["maxmemory-policy"] != "" && policy["maxmemory-policy"] != "noeviction" {
		return &store.StoreError{Op: "check", Err: fmt.Errorf("%w: maxmemory-policy is %s: under memory pressure Redis evicts records, and a lost lock or completion runs a key twice; set it to noeviction", store.ErrMisconfigured, policy["maxmemory-policy"])}
	}
	return nil
}

// answer is a script's answer: applied with values, or refused with the
// record (its hash, empty when there is none).
type answer struct {
	refused bool
	values  []string
	record  map[string]string
	raw     any
}

// run runs a script, then WAIT when the store is set to wait for replicas.
func (s *Store) run(ctx context.Context, op, id string, sc *redis.Script, keys []string, args ...any) (answer, error) {
	// A cancelled context must write nothing: go-redis checks it before it
	// writes a command, and so does this.
	if err := ctx.Err(); err != nil {
		return answer{}, storeError(op, id, err)
	}
	var (
		raw any
		err error
	)
	if s.wait > 0 {
		raw, err = s.runWait(ctx, sc, keys, args)
	} else {
		raw, err = sc.Run(ctx, s.c, keys, args...).Result()
	}
	if err != nil {
		return answer{}, storeError(op, id, err)
	}
	ans, ok := parseAnswer(raw)
	if !ok {
		return answer{}, s.malformed(op, id, answer{raw: raw})
	}
	return ans, nil
}

// runWait runs the script and WAIT in one pipeline, so that both use one
// connection (WAIT counts the replicas that acknowledged that
// connection's writes).
func (s *Store) runWait(ctx context.Context, sc *redis.Script, keys []string, args []any) (any, error) {
	for attempt := 0; ; attempt++ {
		var eval *redis.Cmd
		var wait *redis.Cmd
		_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
			eval = sc.EvalSha(ctx, p, keys, args...)
			wait = p.Do(ctx, "WAIT", s.wait, s.waitT.Milliseconds())
			return nil
		})
		if err != nil && attempt == 0 && redis.HasErrorPrefix(eval.Err(), "NOSCRIPT") {
			if err := sc.Load(ctx, s.c).Err(); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		if n, err := wait.Int64(); err != nil || n < int64(s.wait) {
			return nil, fmt.Errorf("WAIT: %d of %d replicas acknowledged the write within %s; it is applied on the primary and may be lost in a failover", n, s.wait, s.waitT)
		}
		return eval.Result()
	}
}

func parseAnswer(raw any) (answer, bool) {
	list, ok := raw.([]any)
	if !ok || len(list) == 0 {
		return answer{}, false
	}
	tag, ok := list[0].(string)
	if !ok {
		return answer{}, false
	}
	switch tag {
	case "ok":
		ans := answer{raw: raw}
		for _, v := range list[1:] {
			switch v := v.(type) {
			case string:
				ans.values = append(ans.values, v)
			case int64:
				ans.values = append(ans.values, strconv.FormatInt(v, 10))
			default:
				return answer{}, false
			}
		}
		return ans, true
	case "refused":
		if len(list) != 2 {
			return answer{}, false
		}
		flat, ok := list[1].([]any)
		if !ok || len(flat)%2 != 0 {
			return answer{}, false
		}
		ans := answer{refused: true, record: make(map[string]string, len(flat)/2), raw: raw}
		for i := 0; i < len(flat); i += 2 {
			k, ok1 := flat[i].(string)
			v, ok2 := flat[i+1].(string)
			if !ok1 || !ok2 {
				return answer{}, false
			}
			ans.record[k] = v
		}
		return ans, true
	}
	return answer{}, false
}

// malformed is a script's answer the store cannot read: another script
// under the same SHA-1, or a proxy that changed the reply.
func (s *Store) malformed(op, id string, ans answer) error {
	return &store.StoreError{Op: op, ID: id, Err: fmt.Errorf("%w: the script answered %v, which this version of the store does not write", store.ErrMisconfigured, ans.raw)}
}

// lost is ErrLockLost for an owner-conditional write refused by record
// (empty: no record).
func (s *Store) lost(op string, lease store.Lease, record map[string]string) error {
	what := "the record is gone"
	if len(record) > 0 {
		if rec, err := parseRecord(lease.ID, record); err == nil {
			what = "the record is " + rec.String()
		} else {
			what = err.Error()
		}
	}
	return fmt.Errorf("%s %q: %w (%s)", op, lease.ID, store.ErrLockLost, what)
}

// storeError classifies a failed call: what no retry fixes (a key of
// another type, a script or command the server or its ACL refuses, a
// failed login) matches store.ErrMisconfigured; the rest (no answer, a
// closed connection, a server loading, read-only after a failover, out of
// memory) matches store.ErrUnavailable.
func storeError(op, id string, err error) error {
	if misconfigured(err) {
		err = fmt.Errorf("%w: %w", store.ErrMisconfigured, err)
	}
	return &store.StoreError{Op: op, ID: id, Err: err}
}

func misconfigured(err error) bool {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return false
	}
	msg := rerr.Error()
	if strings.Contains(msg, "max number of clients") {
		return false // busy, not wrong: connections free up
	}
	for _, prefix := range []string{"WRONGTYPE", "NOSCRIPT", "NOPERM", "NOAUTH", "WRONGPASS", "ERR", "unknown command"} {
		if strings.HasPrefix(msg, prefix) {
			// "ERR" covers a script that failed on the server (a field of
			// the wrong kind, an unknown command such as PEXPIRETIME on
			// Redis 6) and a command that is disabled.
			return true
		}
	}
	return false
}

// fenceExpiry is when the fence counter may go: FenceRetention after the
// record's own expiry, so a record created again after the old one
// expired still gets a larger fence without the clock's help.
func fenceExpiry(recordExpireMs int64) int64 {
	return recordExpireMs + store.FenceRetention.Milliseconds()
}

// ttlSeconds rounds up, so the key never expires before its lock, as the
// DynamoDB store's TTL.
func ttlSeconds(t time.Time) int64 {
	sec := t.Unix()
	if t.After(time.Unix(sec, 0)) {
		sec++
	}
	return sec
}

// Locks implements store.Admin: it scans the database (every primary of a
// Redis Cluster) for the records under prefix, page by page, and reads each
// one, calling progress with the records looked at so far. A scan reads
// every key: its cost is the database's size.
func (s *Store) Locks(ctx context.Context, prefix string, progress func(scanned, found int)) ([]store.Record, error) {
	// The record's own key ends with its hash tag's "}"; its fence's key,
	// "...}:fence", does not.
	match := globEscape(s.prefix+"{"+prefix+"#") + "*}"
	var (
		mu      sync.Mutex
		locks   []store.Record
		scanned int
	)
	scan := func(ctx context.Context, c redis.Cmdable) error {
		iter := c.Scan(ctx, 0, match, 100).Iterator()
		for iter.Next(ctx) {
			key := iter.Val()
			id := strings.TrimSuffix(strings.TrimPrefix(key, s.prefix+"{"), "}")
			fields, err := c.HGetAll(ctx, key).Result()
			if err != nil {
				return storeError("scan", id, err)
			}
			mu.Lock()
			scanned++
			if len(fields) > 0 && fields["status"] == string(store.StatusProcessing) {
				rec, err := parseRecord(id, fields)
				if err != nil {
					// A lock the protocol did not write is still one an
					// operator must see.
					rec = store.Record{ID: id, Status: store.StatusProcessing, Owner: fields["owner"]}
				}
				locks = append(locks, rec)
			}
			if progress != nil {
				progress(scanned, len(locks))
			}
			mu.Unlock()
		}
		if err := iter.Err(); err != nil {
			return storeError("scan", prefix+"#", err)
		}
		return nil
	}
	var err error
	if cc, ok := s.c.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return scan(ctx, c) })
	} else {
		err = scan(ctx, s.c)
	}
	if err != nil {
		return nil, err
	}
	if progress != nil {
		progress(scanned, len(locks))
	}
	sort.SliceStable(locks, func(i, j int) bool { return locks[i].LockExpiresAt.Before(locks[j].LockExpiresAt) })
	return locks, nil
}

// globEscape escapes what SCAN's MATCH reads as a pattern.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
