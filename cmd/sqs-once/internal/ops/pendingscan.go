package ops

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
	"github.com/sqs-once/sqs-once/sqsonce/store/redisstore"
)

// DefaultPendingAge is how long a key's messages may be pending before
// status --pending counts it: the holder that committed sends them within
// its invocation, and a failed send is retried by the key's next delivery,
// a visibility timeout later (three minutes with the template's defaults).
const DefaultPendingAge = 5 * time.Minute

// pendingListed bounds the keys status --pending lists: the count says how
// many there are, and inspect and send-pending act on one key at a time.
const pendingListed = 10

// PendingKey is a key whose completion holds emitted messages not yet
// sent, as status --pending lists it.
type PendingKey struct {
	// Key is the record id's part after the prefix: the key's hash when
	// keys are hashed.
	Key      string `json:"key"`
	RecordID string `json:"recordId"`
	// CompletedAt is when the completion was written: its window's end
	// less the dedupe window (to the second). Nil when the window is not
	// known.
	CompletedAt *time.Time `json:"completedAt,omitempty"`
	// WindowEndsAt is the end of the completion's dedupe window; nil when
	// the record has none readable.
	WindowEndsAt *time.Time `json:"windowEndsAt,omitempty"`
	// WindowEnded: the next delivery of the key runs the handler again and
	// drops these messages, never sent.
	WindowEnded bool `json:"windowEnded,omitempty"`
}

// PendingCount is what status --pending found: the keys under the prefix
// whose completion holds messages not yet sent.
type PendingCount struct {
	// Scanned is how many records (items, keys, rows) the scan read.
	Scanned int `json:"scanned"`
	// Keys counts every key with messages pending, however recent.
	Keys int `json:"keys"`
	// Past counts the keys completed at least AgeSeconds ago: their first
	// send failed, and their redeliveries have not sent them either. Nil
	// when the dedupe window is not known, so neither is any completion's
	// time: then Keys is the count.
	Past       *int  `json:"past,omitempty"`
	AgeSeconds int64 `json:"ageSeconds"`
	// DedupeWindowSeconds is the window the completion times are derived
	// with (0: unknown), DedupeWindowFrom where it came from.
	DedupeWindowSeconds int64  `json:"dedupeWindowSeconds,omitempty"`
	DedupeWindowFrom    string `json:"dedupeWindowFrom,omitempty"`
	// Listed are up to ten of the keys counted (Past's, or all when the
	// window is not known), the earliest window end first: with one
	// window, the oldest completion first.
	Listed []PendingKey `json:"listed"`
}

// outboxRecord is a record that holds an outbox, as a scan reads it.
type outboxRecord struct {
	ID     string
	Status store.Status
	// ExpiresAt is zero when the record has none the scan could read.
	ExpiresAt time.Time
}

// outboxScanner lists the records under a prefix that hold an outbox
// (store.Record.Outbox: messages committed and not marked sent), with
// the number of records it read. store.Admin has no such scan (its Locks
// lists locks), so each store's is here, on the schema its package
// declares (dynamostore's attributes, redisstore's keys and fields,
// pgstore's and mysqlstore's columns); the integration tests write the records with the
// stores' own Complete, which keeps the two in step.
type outboxScanner interface {
	outboxes(ctx context.Context, prefix string, progress func(scanned, found int)) ([]outboxRecord, int, error)
}

// PendingKeys scans the store for this prefix's keys with emitted messages
// pending, and counts those completed at least age ago, their completion
// time being the window's end less window (0: not known, and neither is
// any key's age). Its cost is a scan's: every record of the store.
func (r *Records) PendingKeys(ctx context.Context, window, age time.Duration, progress func(scanned, found int)) (PendingCount, error) {
	sc, err := r.outboxScanner()
	if err != nil {
		return PendingCount{}, err
	}
	found, scanned, err := sc.outboxes(ctx, r.Prefix, progress)
	if err != nil {
		return PendingCount{}, r.fail("scan "+r.where()+" for pending messages", err)
	}
	now := r.Now()
	res := PendingCount{Scanned: scanned, AgeSeconds: int64(age / time.Second), DedupeWindowSeconds: int64(window / time.Second), Listed: []PendingKey{}}
	past := 0
	var counted []outboxRecord
	for _, o := range found {
		// A record with an outbox in another status is none the
		// protocol writes: Acquire drops the outbox of the completion it
		// replaces. Nothing would send it.
		if o.Status != store.StatusCompleted {
			continue
		}
		res.Keys++
		switch {
		case window <= 0:
			counted = append(counted, o)
		case o.ExpiresAt.IsZero() || !o.ExpiresAt.Add(-window).After(now.Add(-age)):
			past++
			counted = append(counted, o)
		}
	}
	if window > 0 {
		res.Past = &past
	}
	sort.SliceStable(counted, func(i, j int) bool { return counted[i].ExpiresAt.Before(counted[j].ExpiresAt) })
	for _, o := range counted[:min(len(counted), pendingListed)] {
		k := PendingKey{Key: strings.TrimPrefix(o.ID, r.Prefix+"#"), RecordID: o.ID}
		if !o.ExpiresAt.IsZero() {
			end := o.ExpiresAt
			k.WindowEndsAt = &end
			// In whole seconds, as Acquire judges a window's end.
			k.WindowEnded = end.Unix() < now.Unix()
			if window > 0 {
				at := end.Add(-window)
				k.CompletedAt = &at
			}
		}
		res.Listed = append(res.Listed, k)
	}
	return res, nil
}

// outboxScanner is the scan of r's store: the one the CLI opened
// (Records.scan), else the DynamoDB table's.
func (r *Records) outboxScanner() (outboxScanner, error) {
	if r.scan != nil {
		return r.scan, nil
	}
	if _, dynamo := r.store().(*dynamostore.Store); dynamo && r.DB != nil {
		return dynamoOutboxes{api: r.DB, table: r.Table}, nil
	}
	return nil, fmt.Errorf("%s: %w: this store cannot be scanned for pending messages", r.where(), ErrStore)
}

// dynamoAttrOutbox is dynamostore's outbox attribute (attrOutbox there,
// unexported): a COMPLETED item's messages not yet marked sent.
const dynamoAttrOutbox = "outbox"

// dynamoOutboxes scans a DynamoDB table: one Scan, page by page, whose
// filter keeps the prefix's items with an outbox and whose projection
// reads their id, status and window end only. A filter does not lower a
// scan's cost: every item is read. Eventually consistent (half the read
// units of a consistent scan): a count, not a decision on one record.
type dynamoOutboxes struct {
	api   DynamoAPI
	table string
}

func (d dynamoOutboxes) outboxes(ctx context.Context, prefix string, progress func(scanned, found int)) ([]outboxRecord, int, error) {
	in := &dynamodb.ScanInput{
		TableName:                aws.String(d.table),
		FilterExpression:         aws.String("begins_with(#id, :prefix) AND attribute_exists(#outbox)"),
		ProjectionExpression:     aws.String("#id, #status, #expires"),
		ExpressionAttributeNames: map[string]string{"#id": dynamostore.AttrID, "#outbox": dynamoAttrOutbox, "#status": dynamostore.AttrStatus, "#expires": dynamostore.AttrExpiresAt},
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{
			":prefix": &ddbtypes.AttributeValueMemberS{Value: prefix + "#"},
		},
	}
	var found []outboxRecord
	scanned := 0
	for p := dynamodb.NewScanPaginator(d.api, in); p.HasMorePages(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			return found, scanned, err
		}
		scanned += int(page.ScannedCount)
		for _, item := range page.Items {
			o := outboxRecord{}
			if v, ok := item[dynamostore.AttrID].(*ddbtypes.AttributeValueMemberS); ok {
				o.ID = v.Value
			}
			if v, ok := item[dynamostore.AttrStatus].(*ddbtypes.AttributeValueMemberS); ok {
				o.Status = store.Status(v.Value)
			}
			if v, ok := item[dynamostore.AttrExpiresAt].(*ddbtypes.AttributeValueMemberN); ok {
				o.ExpiresAt = epochSeconds(v.Value)
			}
			found = append(found, o)
		}
		if progress != nil {
			progress(scanned, len(found))
		}
	}
	return found, scanned, nil
}

// epochSeconds is s, epoch seconds as a store writes them, as a time; the
// zero time when s is not a number.
func epochSeconds(s string) time.Time {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return time.Time{}
	}
	return time.Unix(n, 0)
}

// Redis's record layout (redisstore): each record is a hash under
// "<redisstore.DefaultKeyPrefix>{<id>}", its fence a string beside it
// under "...}:fence"; these are its fields status --pending reads.
const (
	redisFieldStatus    = "status"
	redisFieldExpiresAt = "expiresAt"
	redisFieldOutbox    = "outbox"
)

// redisOutboxes walks a Redis server's keys (every primary of a Redis
// Cluster) with SCAN, as the store's Locks does, and reads each record's
// status and window end, and whether it has an outbox, one pipeline per
// page of keys, without the outbox itself.
type redisOutboxes struct {
	client redis.UniversalClient
}

func (s redisOutboxes) outboxes(ctx context.Context, prefix string, progress func(scanned, found int)) ([]outboxRecord, int, error) {
	keyPrefix := redisstore.DefaultKeyPrefix + "{"
	// The record's own key ends with its hash tag's "}"; its fence's key
	// does not.
	match := redisGlobEscape(keyPrefix+prefix+"#") + "*}"
	var (
		mu      sync.Mutex
		found   []outboxRecord
		scanned int
	)
	scan := func(ctx context.Context, c redis.Cmdable) error {
		var cursor uint64
		for {
			keys, next, err := c.Scan(ctx, cursor, match, 100).Result()
			if err != nil {
				return err
			}
			if len(keys) > 0 {
				pipe := c.Pipeline()
				fields := make([]*redis.SliceCmd, len(keys))
				has := make([]*redis.BoolCmd, len(keys))
				for i, key := range keys {
					fields[i] = pipe.HMGet(ctx, key, redisFieldStatus, redisFieldExpiresAt)
					has[i] = pipe.HExists(ctx, key, redisFieldOutbox)
				}
				// HMGET answers nil for a missing field, never redis.Nil;
				// a key gone since the SCAN has no outbox.
				if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
					return err
				}
				mu.Lock()
				for i, key := range keys {
					scanned++
					if !has[i].Val() {
						continue
					}
					o := outboxRecord{ID: strings.TrimSuffix(strings.TrimPrefix(key, keyPrefix), "}")}
					if v := fields[i].Val(); len(v) == 2 {
						st, _ := v[0].(string)
						exp, _ := v[1].(string)
						o.Status, o.ExpiresAt = store.Status(st), epochSeconds(exp)
					}
					found = append(found, o)
				}
				if progress != nil {
					progress(scanned, len(found))
				}
				mu.Unlock()
			}
			if next == 0 {
				return nil
			}
			cursor = next
		}
	}
	var err error
	if cc, ok := s.client.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return scan(ctx, c) })
	} else {
		err = scan(ctx, s.client)
	}
	return found, scanned, err
}

// redisGlobEscape escapes what SCAN's MATCH reads as a pattern.
func redisGlobEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// pgOutboxes selects a PostgreSQL table's rows under the prefix with an
// outbox (pgstore's columns id, status, expires_at, outbox), beside the
// table's row count, in one statement: a sequential scan of the table. A
// row past its window's end is left out, as the store's Read leaves it
// out (Sweep deletes it).
type pgOutboxes struct {
	pool  *pgxpool.Pool
	table string
}

func (p pgOutboxes) outboxes(ctx context.Context, prefix string, progress func(scanned, found int)) ([]outboxRecord, int, error) {
	t := pgx.Identifier(strings.SplitN(p.table, ".", 2)).Sanitize()
	rows, err := p.pool.Query(ctx, `SELECT a.n, o.id, o.status, o.expires_at
FROM (SELECT count(*) AS n FROM `+t+`) AS a
LEFT JOIN (SELECT id, status, expires_at FROM `+t+` WHERE outbox IS NOT NULL AND starts_with(id, $1) AND expires_at >= floor(extract(epoch FROM clock_timestamp()))) AS o ON true
ORDER BY o.expires_at, o.id`, prefix+"#")
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	return scanOutboxes(rows, progress)
}

// mysqlOutboxes selects a MySQL table's rows under the prefix with an
// outbox (mysqlstore's columns id, status, expires_at, outbox), beside
// the table's row count, in one statement, as mysqlstore's Locks selects
// its locks: a scan of the table. The id is VARBINARY, so the prefix is
// compared byte for byte. A row past its window's end is left out, as the
// store's Read leaves it out (Sweep deletes it), by the server's clock.
type mysqlOutboxes struct {
	db    *sql.DB
	table string
}

func (m mysqlOutboxes) outboxes(ctx context.Context, prefix string, progress func(scanned, found int)) ([]outboxRecord, int, error) {
	t := mysqlIdent(m.table)
	p := []byte(prefix + "#")
	rows, err := m.db.QueryContext(ctx, `SELECT a.n, o.id, o.status, o.expires_at
FROM (SELECT COUNT(*) AS n FROM `+t+`) AS a
LEFT JOIN (SELECT id, status, expires_at FROM `+t+` WHERE outbox IS NOT NULL AND LEFT(id, ?) = ? AND expires_at >= UNIX_TIMESTAMP()) AS o ON TRUE
ORDER BY o.expires_at, o.id`, len(p), p)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	return scanOutboxes(rows, progress)
}

// sqlRows is what scanOutboxes reads of a query's rows: pgx's pgx.Rows
// and database/sql's *sql.Rows both have it.
type sqlRows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// scanOutboxes reads the rows of pgOutboxes' and mysqlOutboxes' statement
// (the table's row count, then id, status and expires_at of each row with
// an outbox, or NULLs when there is none).
func scanOutboxes(rows sqlRows, progress func(scanned, found int)) ([]outboxRecord, int, error) {
	var found []outboxRecord
	var scanned int64
	for rows.Next() {
		var id, status *string
		var expires *int64
		if err := rows.Scan(&scanned, &id, &status, &expires); err != nil {
			return nil, 0, err
		}
		if id == nil {
			continue // no row with an outbox: the count alone
		}
		o := outboxRecord{ID: *id}
		if status != nil {
			o.Status = store.Status(*status)
		}
		if expires != nil && *expires > 0 {
			o.ExpiresAt = time.Unix(*expires, 0)
		}
		found = append(found, o)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, err
	}
	if progress != nil {
		progress(int(scanned), len(found))
	}
	return found, int(scanned), nil
}

// mysqlIdent is table ("name" or "database.name", as mysqlstore.New takes
// it) as MySQL identifiers: each part in backquotes, a backquote doubled,
// as mysqlstore quotes it.
func mysqlIdent(table string) string {
	parts := strings.SplitN(table, ".", 2)
	for i, part := range parts {
		parts[i] = "`" + strings.ReplaceAll(part, "`", "``") + "`"
	}
	return strings.Join(parts, ".")
}
