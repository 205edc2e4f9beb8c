//go:build integration

package dynamostore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sqs-once/sqs-once/internal/local/faultproxy"
	"github.com/sqs-once/sqs-once/internal/local/motoserver"
	"github.com/sqs-once/sqs-once/internal/local/mototest"
	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
)

// noBackoff gives a client the SDK's standard retryer (its attempts, what
// it retries, its retry quota) without the wait before each retry, for the
// clients whose proxy loses answers on purpose. What these tests check is
// that the repeat is made and what it carries and finds, not when it is
// sent; the SDK's random wait of up to 2 s before each would make the 75
// lost answers of each TestEffectsUnderFaults run wait some 12 s (six keys
// at a time), for nothing.
func noBackoff(o *dynamodb.Options) {
	o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
		so.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
	})
}

// killable is a holder's client: once killed, every call fails without
// reaching the server, as the calls of a process that died.
type killable struct {
	dynamostore.TxAPI
	dead atomic.Bool
}

var errKilled = errors.New("holder killed")

func (k *killable) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if k.dead.Load() {
		return nil, errKilled
	}
	return k.TxAPI.UpdateItem(ctx, in, o...)
}

func (k *killable) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if k.dead.Load() {
		return nil, errKilled
	}
	return k.TxAPI.GetItem(ctx, in, o...)
}

func (k *killable) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	if k.dead.Load() {
		return nil, errKilled
	}
	return k.TxAPI.TransactWriteItems(ctx, in, o...)
}

// The faults of TestEffectsUnderFaults, one per key by its index.
const (
	faultNone  = iota // delivered, then delivered again
	faultKill         // the holder dies after the effect, before its completion
	faultLost         // the completion's answer is lost (applied, then 500 or reset)
	faultPause        // the holder pauses past its lock; another takes the key over
	faultKinds
)

// TestEffectsUnderFaults is exactly-once effects shown under faults: over
// 300 keys, each delivered more than once, holders killed between effect
// and completion, answers to completions lost, holders paused past their
// lock while another takes the key over; the effects counted per key in
// the business table. With the effect in the completion's transaction
// every key has exactly one. The same run with the effect as a write of
// its own before a plain completion has two on every key whose holder was
// killed or paused: the duplicates the transaction prevents. Each fault is
// placed on its key, and each key runs on a clock of its own, so the
// counts do not depend on timing.
//
// On DynamoDB Local, Amazon's engine, where the SDK's repeat of a commit
// whose answer was lost carries its ClientRequestToken and succeeds
// without applying it again. TestEffectsUnderFaultsOnMoto is the
// transactional run where the token is ignored.
func TestEffectsUnderFaults(t *testing.T) {
	t.Parallel()
	effectsUnderFaults(t, 300, []bool{true, false}, localFaults)
}

// TestEffectsUnderFaultsOnMoto: TestEffectsUnderFaults' transactional run,
// on fewer keys, on moto_server, which ignores the ClientRequestToken: the
// repeat of a commit whose answer was lost is refused by the record's
// condition and settled by a read of the record, as on DynamoDB past the
// token's 10 minutes.
func TestEffectsUnderFaultsOnMoto(t *testing.T) {
	t.Parallel()
	effectsUnderFaults(t, 60, []bool{true}, motoFaults)
}

// effectsUnderFaults runs TestEffectsUnderFaults' keys on the engine, for
// each of variants (transactional or plain), and checks each key's count.
func effectsUnderFaults(t *testing.T, keys int, variants []bool, engine func(t *testing.T) faultEngine) {
	for _, transactional := range variants {
		name := "plain"
		if transactional {
			name = "transactional"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			counts, lostAnswers := runUnderFaults(t, keys, transactional, engine(t))
			once, twice, none := 0, 0, 0
			for i, n := range counts {
				kind := i % faultKinds
				want := 1
				if !transactional && (kind == faultKill || kind == faultPause) {
					want = 2
				}
				switch n {
				case 0:
					none++
				case 1:
					once++
				default:
					twice++
				}
				if n != want {
					t.Errorf("key %d (fault %d): %d effects, want %d", i, kind, n, want)
				}
			}
			t.Logf("%s: %d keys, %d answers to completions lost: %d with one effect, %d with more, %d with none", name, keys, lostAnswers, once, twice, none)
			if transactional && (twice != 0 || none != 0) {
				t.Errorf("transactional: %d keys with more than one effect, %d with none; want 0 and 0", twice, none)
			}
			if !transactional && twice == 0 {
				t.Error("plain: no key with more than one effect: the faults did not reach the window the transaction closes, and the test proves nothing")
			}
		})
	}
}

// faultEngine is the DynamoDB runUnderFaults runs on: its endpoint, for
// the fault proxy in front of it; a client whose calls go through the
// proxy; new tables on it.
type faultEngine struct {
	url         string
	client      func(proxyURL string) dynamostore.TxAPI
	newTable    func(t *testing.T) string
	newKeyTable func(t *testing.T, prefix, attr string) string
}

// motoFaults is the package's moto_server, its writes made atomic per
// item as DynamoDB's are.
func motoFaults(t *testing.T) faultEngine {
	cfg := mototest.Config(t)
	return faultEngine{
		url: mototest.URL(t),
		client: func(proxyURL string) dynamostore.TxAPI {
			return motoserver.Atomic(dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(proxyURL) }, noBackoff))
		},
		newTable:    func(t *testing.T) string { return mototest.NewIdempotencyTable(t, cfg) },
		newKeyTable: func(t *testing.T, prefix, attr string) string { return newKeyTable(t, cfg, prefix, attr) },
	}
}

// runUnderFaults runs every key's deliveries and faults, transactional or
// plain, on eng, and returns each key's count of effects and the answers
// lost.
func runUnderFaults(t *testing.T, keys int, transactional bool, eng faultEngine) ([]int, int) {
	proxy, err := faultproxy.Start(eng.url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	api := eng.client(proxy.URL)
	// Keys in shards of their own tables, the keys that run at the same
	// time each in another: motoserver.AtomicClient holds a transaction's
	// tables alone for the whole call, the SDK's retries after a lost
	// answer included, and moto copies each whole before applying it
	// (DynamoDB Local needs none of it, and runs the same shards).
	const shards = 12
	tables := make([]string, 0, shards)
	effects := make([]counterEffects, 0, shards)
	for range shards {
		tables = append(tables, eng.newTable(t))
		effects = append(effects, counterEffects{api: api, table: eng.newKeyTable(t, "effects", "name")})
	}
	key := func(i int) string { return fmt.Sprintf("k%03d", i) }

	// Each lost answer is scripted on its key's completion: the
	// transaction, or the plain completion's UpdateItem (REMOVE of the lock
	// expiry).
	lost := 0
	for i := 0; i < keys; i++ {
		if i%faultKinds != faultLost {
			continue
		}
		fault := faultproxy.FailAfter
		if (i/faultKinds)%2 == 1 {
			fault = faultproxy.ResetAfter
		}
		id := []byte(`"orders#` + key(i) + `"`)
		op, match := "TransactWriteItems", func(body []byte) bool { return bytes.Contains(body, id) }
		if !transactional {
			op = "UpdateItem"
			match = func(body []byte) bool {
				return bytes.Contains(body, id) && bytes.Contains(body, []byte(`REMOVE #lockexp`))
			}
		}
		proxy.ScriptWhen(op, match, fault)
		lost++
	}

	newStore := func(api dynamostore.TxAPI, i int) store.Store {
		if transactional {
			return dynamostore.NewTransactional(api, tables[i%shards])
		}
		return dynamostore.New(api, tables[i%shards])
	}
	effect := func(ctx context.Context, i int) error {
		w := effects[i%shards].increment(key(i), false)
		if transactional {
			return dynamostore.Add(ctx, w)
		}
		u := w.Update
		_, err := api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: u.TableName, Key: u.Key, UpdateExpression: u.UpdateExpression,
			ExpressionAttributeNames: u.ExpressionAttributeNames, ExpressionAttributeValues: u.ExpressionAttributeValues,
		})
		return err
	}
	processor := func(s store.Store, clock *txClock) *sqsonce.Processor {
		p, err := sqsonce.New(sqsonce.Config{Store: s, KeyPrefix: "orders", LockTimeout: time.Hour, Logger: slog.New(slog.DiscardHandler), Test: sqsonce.TestConfig{Now: clock.Now}})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}

	// deliver runs one key's deliveries; it reports what went wrong.
	deliver := func(i int) error {
		ctx := context.Background()
		k := key(i)
		// A clock per key: moving it expires this key's lock alone. An
		// hour's lock is renewed every 20 minutes of real time: never here.
		clock := &txClock{now: time.Now()}
		fn := func(ctx context.Context) error { return effect(ctx, i) }
		switch i % faultKinds {
		case faultKill:
			holder := &killable{TxAPI: api}
			err := processor(newStore(holder, i), clock).Do(ctx, k, func(ctx context.Context) error {
				if err := effect(ctx, i); err != nil {
					return err
				}
				holder.dead.Store(true)
				return nil
			})
			// Plain: the effect counted as done, its completion lost.
			// Transactional: not committed, nothing applied.
			if transactional == (err == nil) {
				return fmt.Errorf("killed holder's Do: %v", err)
			}
			// The redelivery, once the dead holder's lock has expired.
			clock.advance(2 * time.Hour)
		case faultPause:
			first, second := processor(newStore(api, i), clock), processor(newStore(api, i), clock)
			var secondErr error
			err := first.Do(ctx, k, func(ctx context.Context) error {
				clock.advance(2 * time.Hour)
				secondErr = second.Do(ctx, k, fn)
				return effect(ctx, i)
			})
			// Transactional: the lock lost at the commit. Plain: the effect
			// done, its completion refused (the work succeeded, its
			// completion unrecorded: Do returns nil).
			if secondErr != nil || transactional != errors.Is(err, sqsonce.ErrLockLost) || !transactional && err != nil {
				return fmt.Errorf("paused holder's Do: %v; the one taking over: %v", err, secondErr)
			}
		}
		p := processor(newStore(api, i), clock)
		err := p.Do(ctx, k, fn)
		switch {
		case i%faultKinds == faultPause && !errors.Is(err, sqsonce.ErrDuplicate):
			return fmt.Errorf("redelivery after the takeover: %v, want ErrDuplicate", err)
		case i%faultKinds != faultPause && err != nil:
			return fmt.Errorf("delivery: %v", err)
		}
		// A duplicate delivery: never runs.
		if err := p.Do(ctx, k, fn); !errors.Is(err, sqsonce.ErrDuplicate) {
			return fmt.Errorf("duplicate delivery: %v, want ErrDuplicate", err)
		}
		return nil
	}

	// Six keys at a time: concurrent holders on one table, within what a
	// loaded two-core machine serves.
	work := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []error
	for range 6 {
		wg.Go(func() {
			for i := range work {
				if err := deliver(i); err != nil {
					mu.Lock()
					failures = append(failures, fmt.Errorf("key %s: %w", key(i), err))
					mu.Unlock()
				}
			}
		})
	}
	for i := 0; i < keys; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	for _, err := range failures {
		t.Error(err)
	}
	if n := proxy.Pending(); n != 0 {
		t.Errorf("%d scripted lost answers were not used", n)
	}
	counts := make([]int, keys)
	for i := range counts {
		n, err := effects[i%shards].Count(context.Background(), key(i))
		if err != nil {
			t.Fatal(err)
		}
		counts[i] = n
	}
	return counts, lost
}
