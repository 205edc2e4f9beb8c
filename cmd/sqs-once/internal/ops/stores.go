package ops

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
	"github.com/sqs-once/sqs-once/sqsonce/store/mysqlstore"
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
// postgres and mysql, library stores (pgstore, mysqlstore) that no
// processor binary reads from its environment, so only flags name them.
const (
	StoreDynamoDB = "dynamodb"
	StoreRedis    = "redis"
	StorePostgres = "postgres"
	StoreMySQL    = "mysql"
)

// sqlStore reports whether kind is a store on an SQL table (postgres,
// mysql): named by --database-url and --table, with no AWS call, its
// --table no DynamoDB table.
func sqlStore(kind string) bool { return kind == StorePostgres || kind == StoreMySQL }

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
	_ RecordStore = (*mysqlstore.Store)(nil)
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

// mysqlStore is the MySQL store on table in the database dsn names, in
// go-sql-driver/mysql's form (user:password@tcp(host:port)/db), as the
// store's user opens it. No connection is made until the first read.
func mysqlStore(dsn, table string) (opened, error) {
	if dsn == "" {
		return opened{}, fmt.Errorf("%w: --store mysql needs the database: give --database-url DSN (user:password@tcp(host:port)/db, as go-sql-driver/mysql takes it)", ErrUsage)
	}
	if table == "" {
		return opened{}, fmt.Errorf("%w: --store mysql needs the store's table: give --table NAME (as given to mysqlstore.New)", ErrUsage)
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		// The driver's parse error may quote the DSN: say only which flag
		// and the form, never the DSN.
		return opened{}, fmt.Errorf("%w: --database-url: not a MySQL DSN go-sql-driver/mysql accepts (user:password@tcp(host:port)/db)", ErrUsage)
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return opened{}, fmt.Errorf("%w: --database-url %s: not a MySQL DSN go-sql-driver/mysql accepts", ErrUsage, mysqlRedacted(cfg))
	}
	db := sql.OpenDB(conn)
	return opened{store: mysqlstore.New(db, table), where: "MySQL table " + table + " on " + mysqlRedacted(cfg), close: func() { _ = db.Close() }, scan: mysqlOutboxes{db: db, table: table}}, nil
}

// mysqlRedacted is where a MySQL DSN points, for messages: its user,
// address and database, without its password or parameters.
func mysqlRedacted(cfg *mysql.Config) string {
	return cfg.User + "@" + cfg.Net + "(" + cfg.Addr + ")/" + cfg.DBName
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

// ErrStore: a call to a Redis, PostgreSQL or MySQL store failed (the server
// unreachable, a password refused, a table missing). Nothing is known to
// have changed unless the message says so. Its exit code is 1, as an AWS
// call's.
var ErrStore = errors.New("store call failed")
