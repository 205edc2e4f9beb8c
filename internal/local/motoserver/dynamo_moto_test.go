//go:build integration

package motoserver_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqs-once/sqs-once/internal/local/motoserver"
	"github.com/sqs-once/sqs-once/internal/local/mototest"
)

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
	cfg := mototest.Config(t)
	table := mototest.NewIdempotencyTable(t, cfg)
	w := motoserver.SerializeWrites(dynamodb.NewFromConfig(cfg))
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
	if k := motoserver.LockedItems(w); k != 0 {
		t.Errorf("%d item locks left after every write returned", k)
	}
}

// BenchmarkConditionalWritesDistinctKeys measures conditional creates of
// distinct items through the wrapper against moto_server, with a lock per item
// and with one lock for all, which serializes writes DynamoDB would run at
// once.
func BenchmarkConditionalWritesDistinctKeys(b *testing.B) {
	cfg := mototest.Config(b)
	table := mototest.NewIdempotencyTable(b, cfg)
	for _, bc := range []struct {
		name string
		wrap func(motoserver.DynamoTableWriter) motoserver.DynamoWriter
	}{
		{"per-item", motoserver.SerializeWrites},
		{"one-lock", motoserver.SerializeWritesWithOneLock},
	} {
		b.Run(bc.name, func(b *testing.B) {
			w := bc.wrap(dynamodb.NewFromConfig(cfg))
			var seq atomic.Int64
			prefix := mototest.Name(bc.name)
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
