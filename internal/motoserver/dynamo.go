package motoserver

import (
	"context"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// DynamoWriter is the set of conditional writes the idempotency store makes.
type DynamoWriter interface {
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
}

// SerializeWrites makes moto's conditional writes atomic, as DynamoDB's are.
// moto_server serves requests on several threads and checks a write's
// condition and applies the write without a lock between the two, so two
// racing writers can both pass a condition that DynamoDB would let only one
// pass. Every condition is still evaluated by moto; the wrapper only stops two
// writes from interleaving. Use it for anything that races writers against
// moto_server (tests, the local demo), never against AWS.
func SerializeWrites(api DynamoWriter) DynamoWriter { return &serialized{api: api} }

type serialized struct {
	mu  sync.Mutex
	api DynamoWriter
}

func (s *serialized) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.api.PutItem(ctx, in, o...)
}

func (s *serialized) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.api.UpdateItem(ctx, in, o...)
}

func (s *serialized) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.api.DeleteItem(ctx, in, o...)
}
