//go:build integration

package dynamostore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sqs-once/sqs-once/internal/local/dynalite"
	"github.com/sqs-once/sqs-once/internal/local/mototest"
	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
)

// TestCheckTransactionalOnMoto: moto_server has TransactWriteItems, so a
// transactional store's Check passes where the plain store's does.
func TestCheckTransactionalOnMoto(t *testing.T) {
	t.Parallel()
	cfg := mototest.Config(t)
	table := mototest.NewIdempotencyTable(t, cfg)
	enableTTL(t, cfg, table, dynamostore.AttrExpiresAt)
	if err := dynamostore.NewTransactional(dynamodb.NewFromConfig(cfg), table).Check(context.Background()); err != nil {
		t.Errorf("Check of the transactional store: %v", err)
	}
}

// TestCheckTransactionalOnDynalite: dynalite has no TransactWriteItems: a
// transactional store fails Check, misconfigured, naming the missing call
// and what to use instead; the plain store on the same table passes as
// before (with its TTL warning alone).
func TestCheckTransactionalOnDynalite(t *testing.T) {
	t.Parallel()
	cfg := dynalite.Config(t)
	table := dynalite.NewIdempotencyTable(t, cfg)
	client := dynamodb.NewFromConfig(cfg)

	err := dynamostore.NewTransactional(client, table).Check(context.Background())
	wantCheckError(t, err, true, true,
		"the endpoint has no TransactWriteItems (UnknownOperationException",
		"dynamostore.NewTransactional", "use DynamoDB, DynamoDB Local or moto_server", "dynamostore.New")

	err = dynamostore.New(client, table).Check(context.Background())
	wantCheckError(t, err, false, true, "warning: TTL is DISABLED")
	if errors.Is(err, store.ErrMisconfigured) {
		t.Errorf("plain store's Check: %v matches ErrMisconfigured", err)
	}
}
