//go:build integration

package mysqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sqs-once/sqs-once/internal/local/mariaserver"
)

// faultKind is what happens to a key's first delivery in
// TestFaultsCountEffects.
type faultKind int

const (
	faultNone       faultKind = iota // delivered, then duplicates
	faultLostAnswer                  // the answer to its COMMIT lost
	faultDropped                     // the connection dropped before its COMMIT
	faultCrashed                     // the holder dies between its effect and its completion
	faultPaused                      // the holder pauses past its lock, another takes over
	faultConcurrent                  // two deliveries at once
	faultKinds
)

func (f faultKind) String() string {
	return [...]string{"none", "lost COMMIT answer", "dropped before COMMIT", "crash after the effect", "paused past the lock", "concurrent deliveries"}[f]
}

// faultOrders counts the rows of the business table by key, read
// directly (not through the store).
func faultOrders(t testing.TB, db *sql.DB, table string) map[string]int {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), `SELECT order_key, COUNT(*) FROM `+table+` GROUP BY order_key`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := map[string]int{}
	for rows.Next() {
		var k string
		var c int
		if err := rows.Scan(&k, &c); err != nil {
			t.Fatal(err)
		}
		n[k] = c
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestFaultsCountEffects: over a few hundred keys, each delivered several
// times, with lost COMMIT answers, connections dropped before COMMIT,
// holders that die between their effect and their completion and holders
// paused past their lock, count the order rows per key in the business
// table. In transactional mode (the order written through Tx)
// every key has exactly one; in plain mode (the order written on the pool
// by itself, then the completion) the same run shows a second row for
// every key whose holder died or paused after its effect: the faults are
// placed, not timed, so the counts are exact.
func TestFaultsCountEffects(t *testing.T) {
	const keys = 240
	direct := newDB(t, plainParams)
	base := time.Now().Truncate(time.Millisecond)
	for _, mode := range []struct {
		name string
		tx   bool
	}{{"transactional", true}, {"plain", false}} {
		t.Run(mode.name, func(t *testing.T) {
			records, table := "fault_records_"+mode.name, "fault_orders_"+mode.name
			newTable(t, direct, records)
			ordersTable(t, direct, table)
			if _, err := direct.ExecContext(t.Context(), `TRUNCATE TABLE `+table); err != nil {
				t.Fatal(err)
			}
			shared := New(direct, records)
			var mu sync.Mutex
			applied, armed := 0, 0
			var errs []string
			report := func(format string, args ...any) {
				mu.Lock()
				defer mu.Unlock()
				errs = append(errs, fmt.Sprintf(format, args...))
			}
			run := func(i int) {
				// A key that cannot finish (a lock wait that never ends)
				// fails the run instead of hanging it.
				ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
				defer cancel()
				key := fmt.Sprintf("k%03d", i)
				f := faultKind(i % int(faultKinds))
				work := func(db *sql.DB) func(context.Context) error {
					return func(ctx context.Context) error { return insertOrder(ctx, db, table, key, mode.tx) }
				}
				later := processor(t, shared, base.Add(2*lockFor))
				switch f {
				case faultNone:
					_ = processor(t, shared, base).Do(ctx, key, work(direct))
				case faultLostAnswer, faultDropped, faultCrashed:
					proxy, dsn := faultProxy(t)
					defer proxy.Close()
					db, err := sql.Open("mysql", dsn)
					if err != nil {
						report("%s: %v", key, err)
						return
					}
					defer db.Close()
					p := processor(t, New(db, records), base)
					fn := work(db)
					switch f {
					case faultLostAnswer:
						proxy.Arm(mariaserver.LoseCommitAnswer)
					case faultDropped:
						proxy.Arm(mariaserver.DropBeforeCommit)
					case faultCrashed:
						fn = func(ctx context.Context) error {
							err := work(db)(ctx)
							proxy.Crash() // after the effect, before the completion
							return err
						}
					}
					err = p.Do(ctx, key, fn)
					if f == faultLostAnswer && err != nil {
						report("%s (%s): Do returned %v; want the lost answer recognised", key, f, err)
					}
					if mode.tx && (f == faultLostAnswer || f == faultDropped) {
						mu.Lock()
						armed++
						applied += proxy.Applied()
						mu.Unlock()
					}
					if f == faultDropped {
						// Released: the redelivery runs at once.
						_ = processor(t, shared, base).Do(ctx, key, work(direct))
					}
				case faultPaused:
					written, resume, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
					go func() {
						defer close(done)
						_ = processor(t, shared, base).Do(ctx, key, func(ctx context.Context) error {
							err := work(direct)(ctx)
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
					_ = later.Do(ctx, key, work(direct))
					close(resume)
					<-done
				case faultConcurrent:
					var wg sync.WaitGroup
					for range 2 {
						wg.Go(func() { _ = processor(t, shared, base).Do(ctx, key, work(direct)) })
					}
					wg.Wait()
				}
				// Redeliveries, after every holder's lock (the crashed
				// one's included) has expired: each runs the work only if
				// no completion is recorded.
				for range 2 {
					_ = later.Do(ctx, key, work(direct))
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

			got := faultOrders(t, direct, table)
			var missing, dup []string
			wantDup := 0
			for i := range keys {
				key := fmt.Sprintf("k%03d", i)
				f := faultKind(i % int(faultKinds))
				if f == faultCrashed || f == faultPaused {
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
			t.Logf("plain: %d keys, %d with more than one order row (the holders that crashed or paused after their effect), %d without", keys, len(dup), len(missing))
		})
	}
}
