//go:build integration

package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sqs-once/sqs-once/internal/local/pgserver"
	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/store/pgstore"
)

// lockFor is the processors' lock; later is a holder's clock past it.
const lockFor = time.Minute

// processor runs Do on s with its clock fixed at now.
func processor(t testing.TB, s *pgstore.Store, now time.Time) *sqsonce.Processor {
	t.Helper()
	p, err := sqsonce.New(sqsonce.Config{
		Store: s, KeyPrefix: "orders", LockTimeout: lockFor,
		Logger: slog.New(slog.DiscardHandler),
		Test:   sqsonce.TestConfig{Now: func() time.Time { return now }},
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// ordersTable creates a business table of the test's: one row per order
// written, no key constraint, so that a duplicate shows as a second row.
func ordersTable(t testing.TB, pool *pgxpool.Pool, name string) {
	t.Helper()
	if _, err := pool.Exec(t.Context(), `CREATE TABLE IF NOT EXISTS `+name+` (n bigserial PRIMARY KEY, key text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
}

// insertOrder is the work: an order row for key in the work's
// transaction (pgstore.Tx), or, plain, on pool by itself (autocommit).
func insertOrder(ctx context.Context, pool *pgxpool.Pool, table, key string, tx bool) error {
	q := `INSERT INTO ` + table + ` (key) VALUES ($1)`
	if !tx {
		_, err := pool.Exec(ctx, q, key)
		return err
	}
	ptx, err := pgstore.Tx(ctx)
	if err != nil {
		return err
	}
	_, err = ptx.Exec(ctx, q, key)
	return err
}

// orders counts the rows of table by key.
func orders(t testing.TB, pool *pgxpool.Pool, table string) map[string]int {
	t.Helper()
	rows, err := pool.Query(t.Context(), `SELECT key, count(*) FROM `+table+` GROUP BY key`)
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

// TestPausedHolderCommitsNothing: holder A writes its order in its
// transaction and pauses past its lock; holder B takes the key over and
// commits its order; A resumes and returns: its commit finds the record
// no longer its lock (ErrLockLost), and exactly one order row is there.
func TestPausedHolderCommitsNothing(t *testing.T) {
	pool := newPool(t, "")
	s := newTable(t, pool, "do_records")
	ordersTable(t, pool, "do_orders")
	base := time.Now().Truncate(time.Millisecond)
	key := "paused-" + base.String()
	a, b := processor(t, s, base), processor(t, s, base.Add(2*lockFor))
	written, resume := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- a.Do(t.Context(), key, func(ctx context.Context) error {
			if err := insertOrder(ctx, pool, "do_orders", key, true); err != nil {
				return err
			}
			close(written)
			<-resume
			return nil
		})
	}()
	select {
	case <-written:
	case err := <-done:
		t.Fatalf("holder A ended before writing: %v", err)
	}
	if err := b.Do(t.Context(), key, func(ctx context.Context) error { return insertOrder(ctx, pool, "do_orders", key, true) }); err != nil {
		t.Fatalf("holder B's takeover: %v", err)
	}
	close(resume)
	if err := <-done; !errors.Is(err, sqsonce.ErrLockLost) {
		t.Errorf("the paused holder's Do returned %v; want an error matching ErrLockLost", err)
	}
	if n := orders(t, pool, "do_orders")[key]; n != 1 {
		t.Errorf("%d order rows for the key; want exactly 1", n)
	}
	if err := b.Do(t.Context(), key, func(context.Context) error { t.Error("a duplicate ran"); return nil }); !errors.Is(err, sqsonce.ErrDuplicate) {
		t.Errorf("a later delivery returned %v; want ErrDuplicate", err)
	}
}

// TestProcessorCheckOnAMissingTable: Processor.Check on a store whose
// table does not exist says so, matching ErrMisconfigured, and gives the
// fix.
func TestProcessorCheckOnAMissingTable(t *testing.T) {
	p := processor(t, pgstore.New(newPool(t, ""), "no_such_table"), time.Now())
	err := p.Check(t.Context())
	if !errors.Is(err, sqsonce.ErrMisconfigured) || !strings.Contains(err.Error(), "pgstore.CreateTable") || !strings.Contains(err.Error(), "CREATE TABLE") {
		t.Errorf("Check on a missing table returned %v; want ErrMisconfigured with pgstore.CreateTable and the CREATE TABLE", err)
	}
}

// fault is what happens to a key's first delivery in TestFaultsCountEffects.
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

// TestFaultsCountEffects: over a few hundred keys, each delivered several
// times, with lost COMMIT answers, connections dropped before COMMIT,
// holders that die between their effect and their completion and holders
// paused past their lock, count the order rows per key. In transactional
// mode (the order written through pgstore.Tx) every key has exactly one;
// in plain mode (the order written on the pool by itself, then the
// completion) the same run shows a second row for every key whose holder
// died or paused after its effect: the faults are placed, not timed, so
// the counts are exact.
func TestFaultsCountEffects(t *testing.T) {
	const keys = 240
	direct := newPool(t, "")
	base := time.Now().Truncate(time.Millisecond)
	for _, mode := range []struct {
		name string
		tx   bool
	}{{"transactional", true}, {"plain", false}} {
		t.Run(mode.name, func(t *testing.T) {
			records, table := "fault_records_"+mode.name, "fault_orders_"+mode.name
			newTable(t, direct, records)
			ordersTable(t, direct, table)
			if _, err := direct.Exec(t.Context(), `TRUNCATE `+records+`, `+table); err != nil {
				t.Fatal(err)
			}
			shared := pgstore.New(direct, records)
			var mu sync.Mutex
			applied, armed := 0, 0
			var errs []string
			report := func(format string, args ...any) {
				mu.Lock()
				defer mu.Unlock()
				errs = append(errs, fmt.Sprintf(format, args...))
			}
			run := func(i int) {
				// A key that cannot finish (a pool whose connections all
				// wait for one more) fails the run instead of hanging it.
				ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
				defer cancel()
				key := fmt.Sprintf("k%03d", i)
				f := fault(i % int(kinds))
				work := func(pool *pgxpool.Pool) func(context.Context) error {
					return func(ctx context.Context) error { return insertOrder(ctx, pool, table, key, mode.tx) }
				}
				later := processor(t, shared, base.Add(2*lockFor))
				switch f {
				case noFault:
					_ = processor(t, shared, base).Do(ctx, key, work(direct))
				case lostAnswer, droppedCommit, crashed:
					proxy := pgserver.NewProxy(t, server)
					defer proxy.Close()
					pool, err := pgxpool.New(ctx, proxy.DSN)
					if err != nil {
						report("%s: %v", key, err)
						return
					}
					defer pool.Close()
					p := processor(t, pgstore.New(pool, records), base)
					fn := work(pool)
					switch f {
					case lostAnswer:
						proxy.Arm(pgserver.LoseCommitAnswer)
					case droppedCommit:
						proxy.Arm(pgserver.DropBeforeCommit)
					case crashed:
						fn = func(ctx context.Context) error {
							err := work(pool)(ctx)
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
						_ = processor(t, shared, base).Do(ctx, key, work(direct))
					}
				case paused:
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
					<-written
					_ = later.Do(ctx, key, work(direct))
					close(resume)
					<-done
				case concurrent:
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

			got := orders(t, direct, table)
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
