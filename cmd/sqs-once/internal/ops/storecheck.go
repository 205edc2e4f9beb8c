package ops

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
	"github.com/sqs-once/sqs-once/sqsonce/store/redisstore"
)

// checkStore is the name of the store's check: the one Processor.Check runs.
const checkStore = "store"

// TableState is what the store's own check found of the idempotency
// table: "exists" (and set up as the processor needs), "missing",
// "TTL off" (works, but nothing deletes a record), "misconfigured" (every
// write refused: key schema, status), or "unknown" (the check could not
// run: access denied, no answer).
type TableState string

const (
	TableExists        TableState = "exists"
	TableMissing       TableState = "missing"
	TableNoTTL         TableState = "TTL off"
	TableMisconfigured TableState = "misconfigured"
	TableUnknown       TableState = "unknown"
)

// StoreCheck is the store's own check, as Processor.Check runs it: for
// DynamoDB dynamostore's Check (the table exists, its key schema, TTL on
// expiresAt), for Redis redisstore's (reachable, Redis 7, no eviction).
type StoreCheck struct {
	// Store is the processor's STORE: dynamodb or redis.
	Store string `json:"store"`
	// Table is the DynamoDB table checked ("" for Redis).
	Table string `json:"table,omitempty"`
	// State is the table's (or, for Redis, the server's) state.
	State TableState `json:"state"`
	// Error is the check's error, "" when it passed.
	Error string `json:"error,omitempty"`
	err   error
}

// checkDynamoTable runs dynamostore's Check on table, and sorts its error
// into a TableState.
func checkDynamoTable(ctx context.Context, db dynamostore.API, table string) *StoreCheck {
	sc := &StoreCheck{Store: StoreDynamoDB, Table: table, State: TableExists}
	sc.err = dynamostore.New(db, table).Check(ctx)
	if sc.err == nil {
		return sc
	}
	sc.Error = sc.err.Error()
	var noTable *ddbtypes.ResourceNotFoundException
	switch {
	case errors.As(sc.err, &noTable):
		sc.State = TableMissing
	case errors.Is(sc.err, store.ErrMisconfigured):
		var api interface{ ErrorCode() string }
		if errors.As(sc.err, &api) && api.ErrorCode() == "AccessDeniedException" {
			sc.State = TableUnknown
		} else {
			sc.State = TableMisconfigured
		}
	case errors.Is(sc.err, dynamostore.ErrNoTTL):
		sc.State = TableNoTTL
	default:
		sc.State = TableUnknown
	}
	return sc
}

// checkRedis runs redisstore's Check on the server the processor's
// REDIS_URL names (with its other REDIS_ variables): reachable from here,
// a Redis that has what the store needs, and no eviction.
func checkRedis(ctx context.Context, env map[string]string) *StoreCheck {
	sc := &StoreCheck{Store: StoreRedis, State: TableExists}
	s, err := redisstore.FromEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err == nil {
		sc.err = s.Check(ctx)
		_ = s.Close()
	} else {
		sc.err = err
	}
	if sc.err == nil {
		return sc
	}
	sc.Error = sc.err.Error()
	sc.State = TableUnknown
	if errors.Is(sc.err, store.ErrMisconfigured) {
		sc.State = TableMisconfigured
	}
	return sc
}

// readStore runs the store's own check on the store the stack's processor
// uses (its STORE, IDEMPOTENCY_TABLE and REDIS_ variables), or, without a
// processor to read, on table (the stack's output or --table; "" checks
// nothing).
func (m *Migration) readStore(ctx context.Context, db dynamostore.API, table string) {
	var env map[string]string
	if m.Processor != nil {
		env = maps.Clone(m.Processor.env)
	}
	if env[envStore] == StoreRedis {
		m.Store = checkRedis(ctx, env)
		return
	}
	if t := env[dynamostore.EnvTable]; t != "" {
		table = t
	}
	if table == "" {
		return
	}
	m.Store = checkDynamoTable(ctx, db, table)
}

// checkTheStore judges the store's own check: any error fails, with the
// commands that fix it.
func (m *Migration) checkTheStore() Check {
	sc := m.Store
	c := Check{Name: checkStore}
	if sc.Store == StoreRedis {
		if sc.err == nil {
			c.Status, c.Detail = CheckOK, "the processor's Redis (REDIS_URL) answers, and evicts nothing (maxmemory-policy noeviction)"
			return c
		}
		c.Status, c.Detail = CheckFail, sc.Error
		if sc.State == TableMisconfigured && strings.Contains(sc.Error, "maxmemory-policy") {
			c.Change = []string{"redis-cli -u \"$REDIS_URL\" CONFIG SET maxmemory-policy noeviction   (ElastiCache: set maxmemory-policy to noeviction in the cluster's parameter group; docs/redis.md)"}
		} else {
			c.Change = []string{"make the Redis server the processor's REDIS_URL names reachable from here, Redis 7.0 or later (docs/redis.md); then run this again"}
		}
		return c
	}
	where := "table " + sc.Table
	switch sc.State {
	case TableExists:
		c.Status, c.Detail = CheckOK, where+" exists, partition key id (String), TTL on "+dynamostore.AttrExpiresAt
		return c
	case TableMissing:
		c.Status, c.Detail = CheckFail, where+inRegion(m.Region)+" does not exist: every message would fail"
		c.Change = createTable(sc.Table, m.awsFlags("dynamodb"))
	case TableNoTTL:
		c.Status, c.Detail = CheckFail, sc.Error
		c.Change = []string{enableTTL(sc.Table, m.awsFlags("dynamodb"))}
	case TableMisconfigured:
		c.Status, c.Detail = CheckFail, sc.Error
		c.Change = append([]string{"the processor cannot write to " + where + " as it is: create one it can, and deploy the stack with it (docs/table.md):"}, createTable(sc.Table+"-v2", m.awsFlags("dynamodb"))...)
	default:
		c.Status, c.Detail = CheckFail, "the table could not be checked: "+sc.Error
		c.Change = []string{"the check needs dynamodb:DescribeTable and dynamodb:DescribeTimeToLive on " + where + "; then run this again"}
	}
	return c
}

// createTable is what creates the table as the processor needs it
// (docs/table.md): partition key id, a String, no sort key, TTL on
// expiresAt. flags are awsFlags' for dynamodb.
func createTable(table, flags string) []string {
	return []string{
		fmt.Sprintf("aws dynamodb create-table --table-name %s --attribute-definitions AttributeName=%s,AttributeType=S --key-schema AttributeName=%s,KeyType=HASH --billing-mode PAY_PER_REQUEST%s", table, dynamostore.AttrID, dynamostore.AttrID, flags),
		fmt.Sprintf("aws dynamodb wait table-exists --table-name %s%s", table, flags),
		enableTTL(table, flags),
	}
}

// enableTTL turns TTL on for the table, on expiresAt. flags are awsFlags'
// for dynamodb.
func enableTTL(table, flags string) string {
	return "aws dynamodb update-time-to-live --table-name " + table + flags + " --time-to-live-specification Enabled=true,AttributeName=" + dynamostore.AttrExpiresAt
}

var _ dynamostore.API = (*dynamodb.Client)(nil)

// tableWords is the table's state for status: "exists", or what is wrong
// and what to run (flags: awsFlags' for dynamodb).
func tableWords(sc *StoreCheck, flags string) string {
	switch sc.State {
	case TableExists:
		return string(sc.State)
	case TableMissing:
		return "MISSING: every message fails; sqs-once preflight names the command that creates it"
	case TableNoTTL:
		return "TTL off: nothing deletes the processor's records; " + enableTTL(sc.Table, flags)
	}
	return string(sc.State) + ": " + sc.Error
}
