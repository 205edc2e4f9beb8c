//go:build integration

package motoserver

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqs-once/sqs-once/internal/retrybudget"
)

// mototestConfig is the SDK configuration of the moto_server that TestMain
// (mototest.Main, in the external test package: mototest imports this
// package, so these internal tests cannot) started and pointed the process's
// environment at; it refuses any other endpoint. Its clients carry
// retrybudget.SafeRequestBody, as mototest's do: without it, a create whose
// answer a lagging writer loses is sent again and conflicts with itself.
func mototestConfig(tb testing.TB) aws.Config {
	tb.Helper()
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		tb.Fatalf("load AWS config: %v", err)
	}
	if cfg.BaseEndpoint == nil || !strings.HasPrefix(*cfg.BaseEndpoint, "http://127.0.0.1:") {
		tb.Fatalf("AWS config endpoint %v is not a local moto_server: refusing to run against anything else", cfg.BaseEndpoint)
	}
	cfg.APIOptions = append(cfg.APIOptions, retrybudget.SafeRequestBody)
	return cfg
}

// newTable creates a table keyed by id (a string) for one test.
func newTable(tb testing.TB, cfg aws.Config) string {
	tb.Helper()
	name := "races-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	_, err := dynamodb.NewFromConfig(cfg).CreateTable(context.Background(), &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
	})
	// A table that exists already is this call's own: the SDK retried a
	// create whose answer was lost.
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		tb.Fatalf("create table %s: %v", name, err)
	}
	return name
}

func conditionalCreate(table, id string) *dynamodb.PutItemInput {
	return &dynamodb.PutItemInput{
		TableName:           aws.String(table),
		Item:                map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: id}},
		ConditionExpression: aws.String("attribute_not_exists(id)"),
	}
}

// TestOneWinnerPerRaceOnMoto races conditional creates of one item through
// the wrapper against moto_server: as in DynamoDB, exactly one passes the
// condition and the others fail it.
func TestOneWinnerPerRaceOnMoto(t *testing.T) {
	t.Parallel()
	cfg := mototestConfig(t)
	table := newTable(t, cfg)
	w := SerializeWrites(dynamodb.NewFromConfig(cfg))
	const racers, rounds = 20, 5
	for round := range rounds {
		id := "race-" + strconv.Itoa(round)
		start := make(chan struct{})
		var winners, losers atomic.Int32
		var wg sync.WaitGroup
		for range racers {
			wg.Go(func() {
				<-start
				_, err := w.PutItem(context.Background(), conditionalCreate(table, id))
				var ccf *types.ConditionalCheckFailedException
				switch {
				case err == nil:
					winners.Add(1)
				case errors.As(err, &ccf):
					losers.Add(1)
				default:
					t.Errorf("round %d: %v", round, err)
				}
			})
		}
		close(start)
		wg.Wait()
		if winners.Load() != 1 || losers.Load() != racers-1 {
			t.Errorf("round %d: %d winners and %d losers of %d racers, want exactly 1 winner", round, winners.Load(), losers.Load(), racers)
		}
	}
	if k := lockedItems(w); k != 0 {
		t.Errorf("%d item locks left after every write returned", k)
	}
}

// BenchmarkConditionalWritesDistinctKeys measures conditional creates of
// distinct items through the wrapper against moto_server, with a lock per item
// and with one lock for all, which serializes writes DynamoDB would run at
// once.
func BenchmarkConditionalWritesDistinctKeys(b *testing.B) {
	cfg := mototestConfig(b)
	table := newTable(b, cfg)
	for _, bc := range []struct {
		name string
		wrap func(DynamoTableWriter) DynamoWriter
	}{
		{"per-item", SerializeWrites},
		{"one-lock", serializeWithOneLock},
	} {
		b.Run(bc.name, func(b *testing.B) {
			w := bc.wrap(dynamodb.NewFromConfig(cfg))
			var seq atomic.Int64
			prefix := bc.name + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
			b.SetParallelism(8) // moto answers on many threads; keep it busy
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					id := prefix + "-" + strconv.FormatInt(seq.Add(1), 10)
					if _, err := w.PutItem(context.Background(), conditionalCreate(table, id)); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "writes/s")
		})
	}
}
