package demo

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
)

// The business table's attributes: an item per side effect committed, keyed
// by its order and its number in the ledger, with what the ledger line says.
const (
	effectKey          = "key"
	effectSeq          = "seq"
	effectAt           = "at"
	effectSend         = "send"
	effectMessageID    = "messageId"
	effectRequestID    = "requestId"
	effectReceiveCount = "receiveCount"
	effectReplayCount  = "replayCount"
	effectCrash        = "crash"
)

// effectServer is what the business table needs of one server that holds
// it: *dynamodb.Client.
type effectServer interface {
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	dynamodb.ScanAPIClient
}

var _ effectServer = (*dynamodb.Client)(nil)

// effectTable is -tx's business table. It lives beside the idempotency
// table on every server that holds part of it (the partitions), since a
// transaction reaches one server: the record's, and the effect goes with
// it. Its servers are reached directly, never through -chaos's proxies:
// the report reads what is there.
type effectTable struct {
	name    string
	servers []effectServer
}

// newEffectTable creates the table name on each server.
func newEffectTable(ctx context.Context, name string, servers []effectServer) (*effectTable, error) {
	for _, s := range servers {
		if _, err := s.CreateTable(ctx, &dynamodb.CreateTableInput{
			TableName: aws.String(name),
			KeySchema: []ddbtypes.KeySchemaElement{
				{AttributeName: aws.String(effectKey), KeyType: ddbtypes.KeyTypeHash},
				{AttributeName: aws.String(effectSeq), KeyType: ddbtypes.KeyTypeRange},
			},
			AttributeDefinitions: []ddbtypes.AttributeDefinition{
				{AttributeName: aws.String(effectKey), AttributeType: ddbtypes.ScalarAttributeTypeS},
				{AttributeName: aws.String(effectSeq), AttributeType: ddbtypes.ScalarAttributeTypeN},
			},
			BillingMode: ddbtypes.BillingModePayPerRequest,
		}); err != nil {
			return nil, fmt.Errorf("create the business table %s: %w", name, err)
		}
	}
	return &effectTable{name: name, servers: servers}, nil
}

// stage adds e's item to the work's transaction: it is written only if
// the transaction commits, with the key's completion.
func (t *effectTable) stage(ctx context.Context, e Entry) error {
	return dynamostore.Add(ctx, ddbtypes.TransactWriteItem{Put: &ddbtypes.Put{
		TableName: aws.String(t.name),
		Item:      effectItem(e),
	}})
}

// read returns every side effect committed to the table, in ledger order.
func (t *effectTable) read(ctx context.Context) ([]Entry, error) {
	var out []Entry
	for _, s := range t.servers {
		pages := dynamodb.NewScanPaginator(s, &dynamodb.ScanInput{TableName: aws.String(t.name), ConsistentRead: aws.Bool(true)})
		for pages.HasMorePages() {
			page, err := pages.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("read the business table %s: %w", t.name, err)
			}
			for _, item := range page.Items {
				e, err := entryOf(item)
				if err != nil {
					return nil, fmt.Errorf("business table %s: %w", t.name, err)
				}
				out = append(out, e)
			}
		}
	}
	slices.SortFunc(out, func(a, b Entry) int { return a.Seq - b.Seq })
	return out, nil
}

func effectItem(e Entry) map[string]ddbtypes.AttributeValue {
	s := func(v string) ddbtypes.AttributeValue { return &ddbtypes.AttributeValueMemberS{Value: v} }
	item := map[string]ddbtypes.AttributeValue{
		effectKey:          s(e.Key),
		effectSeq:          &ddbtypes.AttributeValueMemberN{Value: strconv.Itoa(e.Seq)},
		effectAt:           s(e.At.Format(time.RFC3339Nano)),
		effectSend:         s(e.Send),
		effectMessageID:    s(e.MessageID),
		effectRequestID:    s(e.RequestID),
		effectReceiveCount: s(e.ReceiveCount),
		effectCrash:        &ddbtypes.AttributeValueMemberBOOL{Value: e.Crash},
	}
	if e.ReplayCount != "" {
		item[effectReplayCount] = s(e.ReplayCount)
	}
	return item
}

// entryOf reads an item effectItem wrote.
func entryOf(item map[string]ddbtypes.AttributeValue) (Entry, error) {
	str := func(name string) string {
		v, _ := item[name].(*ddbtypes.AttributeValueMemberS)
		if v == nil {
			return ""
		}
		return v.Value
	}
	var e Entry
	n, ok := item[effectSeq].(*ddbtypes.AttributeValueMemberN)
	if !ok {
		return Entry{}, fmt.Errorf("an item without its number %q", effectSeq)
	}
	seq, err := strconv.Atoi(n.Value)
	if err != nil {
		return Entry{}, fmt.Errorf("item number %q: %w", n.Value, err)
	}
	at, err := time.Parse(time.RFC3339Nano, str(effectAt))
	if err != nil {
		return Entry{}, fmt.Errorf("item %d: %w", seq, err)
	}
	e.Seq, e.At, e.Key, e.Send = seq, at, str(effectKey), str(effectSend)
	e.MessageID, e.RequestID, e.ReceiveCount, e.ReplayCount = str(effectMessageID), str(effectRequestID), str(effectReceiveCount), str(effectReplayCount)
	if c, ok := item[effectCrash].(*ddbtypes.AttributeValueMemberBOOL); ok {
		e.Crash = c.Value
	}
	return e, nil
}
