package sqlfaults

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/sqs-once/sqs-once/internal/local/sqlproxy"
	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/store"
)

// Orders is one mode of FaultsCountEffects on a store's database: a
// records table and an orders table of the mode's own, both empty.
type Orders struct {
	// Store is the store on the records table, on a connection of the
	// test's own (no proxy).
	Store store.Store
	// Work is the work on key on that connection: one order row, in the
	// work's transaction (the store's Tx) in transactional mode, by itself
	// (autocommit) in plain mode.
	Work func(key string) func(context.Context) error
	// Proxied opens, for one key, the store on the records table through
	// a new proxy, and the work as Work but on the proxied connections;
	// closeProxied ends the connections and the proxy.
	Proxied func(ctx context.Context) (s store.Store, proxy *sqlproxy.Proxy, work func(key string) func(context.Context) error, closeProxied func(), err error)
	// Count counts the committed order rows by key, read directly.
	Count func(t testing.TB) map[string]int
}

// NewOrders makes the tables of a mode of FaultsCountEffects (named
// after mode, emptied) and its Orders; tx is whether the work writes in
// the work's transaction.
type NewOrders func(t *testing.T, mode string, tx bool) Orders

// fault is what happens to a key's first delivery in FaultsCountEffects.
type fault int

const (
	noFault       fault = iota // delivered, then duplicates
	lostAnswer                 // the answer to its COMMIT lost
	droppedCommit              // the connection dropped before its COMMIT
	crashed                    // the holder dies between its effect and its completion
	paused                     // the holder pauses past its lock, another takes over
	concurrent                 // two deliveries at once
	kinds
)

func (f fault) String() string {
	return [...]string{"none", "lost COMMIT answer", "dropped before COMMIT", "crash after the effect", "paused past the lock", "concurrent deliveries"}[f]
}

// FaultsCountEffects: over a few hundred keys, each delivered several
// times, with lost COMMIT answers, connections dropped before COMMIT,
// holders that die between their effect and their completion and holders
// paused past their lock, count the order rows per key. In transactional
// mode (the order written through the store's Tx) every key has exactly one;
// in plain mode (the order written on the pool by itself, then the
// completion) the same run shows a second row for every key whose holder
// died or paused after its effect: the faults are placed, not timed, so
// the counts are exact.
//
// newOrders gives each mode's tables and work (run by Processor, whose
// lock is LockFor);
// keyTimeout bounds one key's deliveries, so that a key that cannot
// finish (a pool whose connections all wait for one more, a lock wait
// that never ends) fails the run instead of hanging it.
func FaultsCountEffects(t *testing.T, newOrders NewOrders, keyTimeout time.Duration) {
	processor, lockFor := Processor, LockFor
	const keys = 240
	base := time.Now().Truncate(time.Millisecond)
	for _, mode := range []struct {
		name string
		tx   bool
	}{{"transactional", true}, {"plain", false}} {
		t.Run(mode.name, func(t *testing.T) {
			o := newOrders(t, mode.name, mode.tx)
			shared := o.Store
			var mu sync.Mutex
			applied, armed := 0, 0
			var errs []string
			report := func(format string, args ...any) {
				mu.Lock()
				defer mu.Unlock()
				errs = append(errs, fmt.Sprintf(format, args...))
			}
			run := func(i int) {
				ctx, cancel := context.WithTimeout(t.Context(), keyTimeout)
				defer cancel()
				key := fmt.Sprintf("k%03d", i)
				f := fault(i % int(kinds))
				later := processor(t, shared, base.Add(2*lockFor))
				switch f {
				case noFault:
					_ = processor(t, shared, base).Do(ctx, key, o.Work(key))
				case lostAnswer, droppedCommit, crashed:
					s, proxy, work, closeProxied, err := o.Proxied(ctx)
					if err != nil {
						report("%s: %v", key, err)
						return
					}
					defer closeProxied()
					p := processor(t, s, base)
					fn := work(key)
					switch f {
					case lostAnswer:
						proxy.Arm(sqlproxy.LoseCommitAnswer)
					case droppedCommit:
						proxy.Arm(sqlproxy.DropBeforeCommit)
					case crashed:
						fn = func(ctx context.Context) error {
							err := work(key)(ctx)
							proxy.Crash() // after the effect, before the completion
							return err
						}
					}
					err = p.Do(ctx, key, fn)
					if f == lostAnswer && err != nil {
						report("%s (%s): Do returned %v; want the lost answer recognised", key, f, err)
					}
					if mode.tx && (f == lostAnswer || f == droppedCommit) {
						mu.Lock()
						armed++
						applied += proxy.Applied()
						mu.Unlock()
					}
					if f == droppedCommit {
						// Released: the redelivery runs at once.
						_ = processor(t, shared, base).Do(ctx, key, o.Work(key))
					}
				case paused:
					written, resume, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
					go func() {
						defer close(done)
						_ = processor(t, shared, base).Do(ctx, key, func(ctx context.Context) error {
							err := o.Work(key)(ctx)
							close(written)
							<-resume
							return err
						})
					}()
					select {
					case <-written:
					case <-done:
						report("%s (%s): the paused holder ended before its effect", key, f)
						return
					}
					_ = later.Do(ctx, key, o.Work(key))
					close(resume)
					<-done
				case concurrent:
					var wg sync.WaitGroup
					for range 2 {
						wg.Go(func() { _ = processor(t, shared, base).Do(ctx, key, o.Work(key)) })
					}
					wg.Wait()
				}
				// Redeliveries, after every holder's lock (the crashed
				// one's included) has expired: each runs the work only if
				// no completion is recorded.
				for range 2 {
					_ = later.Do(ctx, key, o.Work(key))
				}
			}
			var wg sync.WaitGroup
			next := make(chan int)
			for range 6 {
				wg.Go(func() {
					for i := range next {
						run(i)
					}
				})
			}
			for i := range keys {
				next <- i
			}
			close(next)
			wg.Wait()
			for _, e := range errs {
				t.Error(e)
			}

			got := o.Count(t)
			var missing, dup []string
			wantDup := 0
			for i := range keys {
				key := fmt.Sprintf("k%03d", i)
				f := fault(i % int(kinds))
				if f == crashed || f == paused {
					wantDup++
				}
				switch n := got[key]; {
				case n == 0:
					missing = append(missing, key+" ("+f.String()+")")
				case n > 1:
					dup = append(dup, fmt.Sprintf("%s (%s) %d", key, f, n))
				}
			}
			if len(missing) > 0 {
				t.Errorf("%d keys have no order row: %v", len(missing), missing)
			}
			if mode.tx {
				if applied != armed {
					t.Errorf("the proxies applied %d of %d armed COMMIT faults: the run did not test what it says", applied, armed)
				}
				if len(dup) > 0 {
					t.Errorf("transactional: %d keys have more than one order row: %v; want exactly one each", len(dup), dup)
				}
				t.Logf("transactional: %d keys, %d COMMIT faults applied, %d holders crashed or paused after their effect: %d keys with more than one order row, %d without", keys, applied, wantDup, len(dup), len(missing))
				return
			}
			if len(dup) != wantDup {
				t.Errorf("plain: %d keys have more than one order row (%v); want exactly the %d whose holder crashed or paused after its effect", len(dup), dup, wantDup)
			}
			t.Logf("plain: %d keys, %d with more than one order row (the holders that crashed or paused after their effect)", keys, len(dup))
		})
	}
}

// LockFor is the lock of the stores' processors in these tests; a holder
// whose clock is two of them ahead takes a paused holder's key over.
const LockFor = time.Minute

// Processor runs Do on s with its clock fixed at now and its lock LockFor:
// the stores' tests' processor, one for every store.
func Processor(t testing.TB, s store.Store, now time.Time) *sqsonce.Processor {
	t.Helper()
	p, err := sqsonce.New(sqsonce.Config{
		Store: s, KeyPrefix: "orders", LockTimeout: LockFor,
		Logger: slog.New(slog.DiscardHandler),
		Test:   sqsonce.TestConfig{Now: func() time.Time { return now }},
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}
