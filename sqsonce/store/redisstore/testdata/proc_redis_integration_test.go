//go:build integration

// The processor's tests on the Redis store: a test file of package sqsonce
// (sqsonce/proc_redis_integration_test.go) kept here, in the Redis store's
// module, because the library's module may not import that module or the
// Redis client (every library user would carry both in its module graph,
// tests' imports included). make test compiles it into sqsonce's tests with
// go's -overlay (bin/redis-overlay.json, written by the Makefile), in the
// workspace, where this module is the checkout's; go mod tidy, which does
// not see overlays, keeps the library's go.mod free of it. To run it by
// hand: make redis-overlay, then
//
//	go test -overlay bin/redis-overlay.json -tags integration -run Redis ./sqsonce/

package sqsonce

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/redis/go-redis/v9"

	"github.com/sqs-once/sqs-once/internal/local/mototest"
	"github.com/sqs-once/sqs-once/internal/local/redisserver"
	"github.com/sqs-once/sqs-once/internal/testclock"
	"github.com/sqs-once/sqs-once/sqsonce/store/redisstore"
)

// redisBackend is the Redis store on a redis-server of the test's own,
// reached through a redisserver.Proxy (which loses answers on request),
// with moto's queues. Every test that holds on every store (eachBackend)
// runs on it.
var redisBackend = procBackend{name: "redis", open: openRedis}

func init() { procBackends = append(procBackends, redisBackend) }

// redisServers keeps each bundle's server and proxy, for the tests that
// restart the one or arm the other.
var redisServers sync.Map // *procBundle -> *redisRig

type redisRig struct {
	server *redisserver.Server
	proxy  *redisserver.Proxy
	client *redis.Client
	faults *redisFaults
}

func openRedis(t testing.TB, b *procBundle) {
	t.Helper()
	srv := redisserver.Start(t)
	proxy := redisserver.NewProxy(t, srv.Addr)
	faults := &redisFaults{}
	client := redis.NewClient(&redis.Options{
		Addr: proxy.Addr,
		// A retry after a dropped connection waits 1-5 ms, not up to 512.
		MinRetryBackoff: time.Millisecond, MaxRetryBackoff: 5 * time.Millisecond,
		DialTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second,
	})
	client.AddHook(faults)
	t.Cleanup(func() { _ = client.Close() })
	st, err := redisstore.New(client, redisstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// The scripts loaded, so that a call is one EVALSHA (and a lost answer
	// the answer of a script the server ran).
	if err := st.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	faults.reset()
	b.aws = mototest.Config(t) // the queues'
	b.table = "unused"         // ConfigFromEnv requires it; Config.Store replaces it
	b.store = st
	b.clock = testclock.New(time.Now())
	b.faults = faults
	s := sqs.NewFromConfig(b.aws)
	b.sqs = s
	b.queues = motoQueues{cfg: b.aws, sqs: s}
	redisServers.Store(b, &redisRig{server: srv, proxy: proxy, client: client, faults: faults})
	t.Cleanup(func() { redisServers.Delete(b) })
}

func redisRigOf(t testing.TB, b *procBundle) *redisRig {
	t.Helper()
	r, ok := redisServers.Load(b)
	if !ok {
		t.Fatal("not a redis bundle")
	}
	return r.(*redisRig)
}

// redisOp names the protocol operation a command is. The store's scripts
// are told apart by their number of arguments (EVALSHA, the SHA-1, the
// number of keys, two keys, then the script's arguments): acquire 9,
// renew 5, complete 8, release 4, forget 1, mark sent 2. A Read is
// HGETALL.
func redisOp(args []any) string {
	name, _ := args[0].(string)
	switch name {
	case "evalsha", "eval":
		switch len(args) - 5 {
		case 9:
			return "acquire"
		case 5:
			return "renew"
		case 8:
			return "complete"
		case 2:
			return "mark sent"
		case 4:
			return "release"
		case 1:
			return "forget"
		}
	case "hgetall":
		return "read"
	}
	return "other:" + name
}

// redisWire is what the proxy matches for an op's command: its length and
// name, as they go on the wire.
var redisWire = map[string][]byte{
	"acquire":  []byte("*14\r\n$7\r\nevalsha\r\n"),
	"complete": []byte("*13\r\n$7\r\nevalsha\r\n"),
	"release":  []byte("*9\r\n$7\r\nevalsha\r\n"),
}

// redisFaults is a go-redis hook that counts the store's calls per
// protocol operation and fails them on demand, before they are sent.
type redisFaults struct {
	mu       sync.Mutex
	failures map[string]error
	counts   map[string]int
}

var _ faultInjector = (*redisFaults)(nil)

func (f *redisFaults) DialHook(next redis.DialHook) redis.DialHook { return next }

func (f *redisFaults) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		op := redisOp(cmd.Args())
		f.mu.Lock()
		err := f.failures[op]
		f.mu.Unlock()
		if err != nil {
			f.count(op)
			cmd.SetErr(err)
			return err
		}
		err = next(ctx, cmd)
		// A script the server did not have is sent again in full (EVAL):
		// one call of the protocol, not two.
		if !redis.HasErrorPrefix(err, "NOSCRIPT") {
			f.count(op)
		}
		return err
	}
}

func (f *redisFaults) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (f *redisFaults) count(op string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.counts == nil {
		f.counts = map[string]int{}
	}
	f.counts[op]++
}

func (f *redisFaults) fail(op string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failures == nil {
		f.failures = map[string]error{}
	}
	f.failures[op] = err
}

func (f *redisFaults) calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.counts {
		n += c
	}
	return n
}

func (f *redisFaults) opCalls(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.counts[op]
}

func (f *redisFaults) reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.counts = nil
}

func (f *redisFaults) snapshot() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]int{}
	for k, v := range f.counts {
		out[k] = v
	}
	return out
}

// TestRedisCallsPerRecord: a new record costs the Redis store two calls
// (acquire, complete), a duplicate one (the refused acquire, which carries
// the record), a failure two (acquire, release): as on DynamoDB.
func TestRedisCallsPerRecord(t *testing.T) {
	t.Parallel()
	b := procSetup(t, redisBackend)
	faults := redisRigOf(t, b).faults
	b.handler.errs["fails"] = errors.New("downstream 503")
	for _, c := range []struct {
		name string
		msg  events.SQSMessage
		want map[string]int
	}{
		{"new", procRecord("new", "a"), map[string]int{"acquire": 1, "complete": 1}},
		{"duplicate", procRecord("new", "a"), map[string]int{"acquire": 1}},
		{"failure", procRecord("fails", "b"), map[string]int{"acquire": 1, "release": 1}},
	} {
		faults.reset()
		b.handle(t, c.msg)
		if got := faults.snapshot(); fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%s record: the store's calls were %v; want %v", c.name, got, c.want)
		}
	}
}

// TestRedisLostAnswersNeitherLoseNorLockOutNorRepeat: every call of the
// protocol applied by redis-server whose answer the connection lost (the
// client retried it), in both IN_PROGRESS modes and on FIFO, processes the
// message exactly once, in the invocation that met the fault.
func TestRedisLostAnswersNeitherLoseNorLockOutNorRepeat(t *testing.T) {
	t.Parallel()
	for _, c := range lostAnswerCases() {
		t.Run(c.String(), func(t *testing.T) {
			t.Parallel()
			b := procSetup(t, redisBackend, func(cfg *ConsumerConfig) { cfg.InProgress = c.mode })
			proxy := redisRigOf(t, b).proxy
			proxy.LoseAnswer(redisWire[c.op])
			checkLostAnswer(t, b, c, proxy.Armed)
			if proxy.Lost() != 1 {
				t.Errorf("the proxy lost %d answers; want 1", proxy.Lost())
			}
		})
	}
}

// TestRedisRestartLosesNoMessage: the server dies in the middle of a batch,
// while the first record's handler runs. That record's completion cannot be
// written: it is done (its side effect happened; retrying would repeat it),
// and logged as unrecorded. The others cannot be locked: the store is
// unavailable, they are reported failed, SQS delivers them again, and none
// is deleted unprocessed. With the server back (empty: no persistence) the
// redelivery processes them; a later copy of the first record runs it a
// second time, since the restart lost its lock and it never completed, as
// the docs say of a Redis without persistence.
func TestRedisRestartLosesNoMessage(t *testing.T) {
	t.Parallel()
	b := procSetup(t, redisBackend, func(cfg *ConsumerConfig) { cfg.MaxConcurrency = 1 })
	rig := redisRigOf(t, b)
	var once sync.Once
	b.handler.hook = func(context.Context, events.SQSMessage) { once.Do(rig.server.Stop) }
	batch := []events.SQSMessage{procRecord("r-1", "a"), procRecord("r-2", "b"), procRecord("r-3", "c")}
	failed := b.handle(t, batch...)
	if fmt.Sprint(failed) != "[r-2 r-3]" {
		t.Fatalf("with the server gone mid-batch the failed records are %v; want r-2 and r-3, retried (r-1 ran)", failed)
	}
	logs := b.logs.String()
	for _, want := range []string{"completion was not recorded", "idempotency store unavailable"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the logs do not say %q:\n%s", want, logs)
		}
	}
	if calls := b.handler.Calls(); len(calls) != 1 {
		t.Errorf("the handler ran %v; want only the first record (the others could not be locked)", calls)
	}
	rig.server.Restart()
	if failed := b.handle(t, batch[1:]...); len(failed) != 0 {
		t.Fatalf("the redelivery after the restart failed %v", failed)
	}
	if failed := b.handle(t, batch...); len(failed) != 0 {
		t.Fatalf("later copies failed %v", failed)
	}
	if failed := b.handle(t, batch...); len(failed) != 0 {
		t.Fatalf("later copies failed %v", failed)
	}
	if got := fmt.Sprint(b.handler.Calls()); got != "[r-1 r-2 r-3 r-1]" {
		t.Errorf("the handler ran %s; want r-2 and r-3 once, and r-1 twice (its completion was never written)", got)
	}
}

// BenchmarkRecordOnRedis is BenchmarkRecord on the Redis store (a
// redis-server on the loopback interface), reporting the store's calls per
// record beside the time and allocations, for comparison with the
// DynamoDB store's:
//
//	go test -tags integration -run '^$' -bench 'Record' -benchmem ./sqsonce
func BenchmarkRecordOnRedis(b *testing.B) {
	arn := "arn:aws:sqs:us-east-1:123456789012:orders"
	srv := redisserver.Start(b)
	cases := []struct {
		name string
		body func(i int) string
		fail bool
	}{
		{"new", func(i int) string { return fmt.Sprintf("new-%d", i) }, false},
		{"duplicate", func(int) string { return "dup" }, false},
		{"failure", func(i int) string { return fmt.Sprintf("fail-%d", i) }, true},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			client := redis.NewClient(&redis.Options{Addr: srv.Addr})
			defer client.Close()
			calls := new(atomic.Int64)
			client.AddHook(callCounter{calls})
			st, err := redisstore.New(client, redisstore.Options{KeyPrefix: "bench-" + c.name + ":"})
			if err != nil {
				b.Fatal(err)
			}
			p, err := NewConsumer(ConsumerConfig{
				Config: Config{
					Store:     st,
					KeyPrefix: "bench",
					Logger:    lockQuiet,
				},
				Key: KeyFunc(func(m events.SQSMessage) (string, error) { return m.Body, nil }),
			}, func(context.Context, events.SQSMessage) error {
				if c.fail {
					return errors.New("downstream 503")
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
			handle := func(i int) {
				ev := events.SQSEvent{Records: []events.SQSMessage{{MessageId: fmt.Sprint(i), Body: c.body(i), EventSourceARN: arn}}}
				if _, err := p.Handle(context.Background(), ev); err != nil {
					b.Fatal(err)
				}
			}
			handle(-1) // the duplicate case's first, completing delivery; loads the scripts
			before := calls.Load()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				handle(i)
				i++
			}
			b.ReportMetric(float64(calls.Load()-before)/float64(i), "redis-calls/record")
		})
	}
}

// callCounter counts the commands a client sends.
type callCounter struct{ n *atomic.Int64 }

func (c callCounter) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (c callCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}

func (c callCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
