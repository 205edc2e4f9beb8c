package ops

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
	"github.com/sqs-once/sqs-once/sqsonce/store/pgstore"
	"github.com/sqs-once/sqs-once/sqsonce/store/redisstore"
)

// RecordStore is what the record commands (inspect, release, forget,
// status --locks) call on a store: the processor's own Read and Release
// (store.Store), and the operator's Forget and Locks (store.Admin). Every
// store that ships is one.
type RecordStore interface {
	store.Store
	store.Admin
}

// The store kinds: the processor's STORE values (dynamodb, redis), and
// postgres, a library store (pgstore) that no processor binary reads from
// its environment, so only flags name it.
const (
	StoreDynamoDB = "dynamodb"
	StoreRedis    = "redis"
	StorePostgres = "postgres"
)

// The processor's variables that choose and configure its store
// (internal/storeenv, redisstore.FromEnv).
const (
	envStore        = "STORE"
	envRedisURL     = redisstore.EnvURL
	envRedisCluster = redisstore.EnvCluster
)

var (
	_ RecordStore = (*dynamostore.Store)(nil)
	_ RecordStore = (*redisstore.Store)(nil)
	_ RecordStore = (*pgstore.Store)(nil)
)

// opened is a store the CLI opened, with what closes its connections and
// where it is, for messages.
type opened struct {
	store RecordStore
	where string
	close func()
	// scan finds the records with an outbox (status --pending); nil on
	// DynamoDB, which Records scans on its own client.
	scan outboxScanner
}

// dynamoStore is the DynamoDB store on table, as the processor's
// STORE=dynamodb with IDEMPOTENCY_TABLE.
func dynamoStore(cfg aws.Config, table string) opened {
	return opened{store: dynamostore.New(dynamodb.NewFromConfig(cfg), table), where: "table " + table, close: func() {}}
}

// redisStore is the Redis store on rawURL, as the processor's STORE=redis
// with REDIS_URL and REDIS_CLUSTER; from says where the URL came from
// (the flag, or the processor's variable) for the error. The store is
// made by redisstore.FromEnv, the processor's own reading of the
// variables, so the CLI accepts exactly the URLs the processor does.
func redisStore(rawURL string, cluster bool, from string) (opened, error) {
	if rawURL == "" {
		return opened{}, fmt.Errorf("%w: STORE=redis needs the server: give --redis-url URL (the processor's %s)", ErrUsage, envRedisURL)
	}
	env := map[string]string{envRedisURL: rawURL, envRedisCluster: fmt.Sprint(cluster)}
	s, err := redisstore.FromEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		return opened{}, fmt.Errorf("%w: %s: %w", ErrUsage, from, err)
	}
	// The store keeps its client to itself: the pending scan has one of
	// its own, on the URL the store accepted. No connection is made until
	// a scan runs.
	var scan redis.UniversalClient
	if cluster {
		opts, err := redis.ParseClusterURL(rawURL)
		if err != nil {
			_ = s.Close()
			return opened{}, fmt.Errorf("%w: %s: not a Redis Cluster URL", ErrUsage, from)
		}
		scan = redis.NewClusterClient(opts)
	} else {
		opts, err := redis.ParseURL(rawURL)
		if err != nil {
			_ = s.Close()
			return opened{}, fmt.Errorf("%w: %s: not a Redis URL", ErrUsage, from)
		}
		scan = redis.NewClient(opts)
	}
	where := "Redis " + redacted(rawURL)
	return opened{store: s, where: where, close: func() { _ = s.Close(); _ = scan.Close() }, scan: redisOutboxes{client: scan}}, nil
}

// pgStore is the PostgreSQL store on table in the database dsn names. No
// connection is made until the first read.
func pgStore(ctx context.Context, dsn, table string) (opened, error) {
	if dsn == "" {
		return opened{}, fmt.Errorf("%w: --store postgres needs the database: give --database-url URL", ErrUsage)
	}
	if table == "" {
		return opened{}, fmt.Errorf("%w: --store postgres needs the store's table: give --table NAME (as given to pgstore.New)", ErrUsage)
	}
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		// pgx's parse error may repeat the password: say only which flag.
		return opened{}, fmt.Errorf("%w: --database-url %s: not a PostgreSQL connection string pgx accepts", ErrUsage, redacted(dsn))
	}
	return opened{store: pgstore.New(pool, table), where: "PostgreSQL table " + table + " on " + redacted(dsn), close: pool.Close, scan: pgOutboxes{pool: pool, table: table}}, nil
}

// redacted is a URL without its password, for messages; a connection
// string that is not a URL (key=value form) is named by its form only.
func redacted(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		if strings.Contains(raw, "password") {
			return "(a connection string)"
		}
		return raw
	}
	return u.Redacted()
}

// ErrStore: a call to a Redis or PostgreSQL store failed (the server
// unreachable, a password refused, a table missing). Nothing is known to
// have changed unless the message says so. Its exit code is 1, as an AWS
// call's.
var ErrStore = errors.New("store call failed")
