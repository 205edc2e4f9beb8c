//go:build integration

package dynamostore_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sqs-once/sqs-once/internal/local/dynalite"
	"github.com/sqs-once/sqs-once/internal/local/motoserver"
	"github.com/sqs-once/sqs-once/internal/local/mototest"
	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
	"github.com/sqs-once/sqs-once/sqsonce/store/storetest"
)

// The store on two implementations of the DynamoDB API: moto_server, which
// returns the old item with a failed condition as DynamoDB does, and
// dynalite, which does not (as DynamoDB Local before 2.2 and other
// DynamoDB-compatible stores), so the store reads the record itself after a
// refusal.

// TestStoreOnMoto: the store passes the conformance suite on moto_server,
// the rules of store.Admin included.
func TestStoreOnMoto(t *testing.T) {
	t.Parallel()
	cfg := mototest.Config(t)
	client := dynamodb.NewFromConfig(cfg)
	api := motoserver.Atomic(client)
	storetest.TestStore(t, func(t *testing.T) store.Store { return dynamostore.New(api, mototest.NewIdempotencyTable(t, cfg)) })
}

// TestStoreOnDynalite: the store passes the conformance suite on dynalite,
// where every refusal is read back with GetItem.
func TestStoreOnDynalite(t *testing.T) {
	t.Parallel()
	cfg := dynalite.Config(t)
	client := dynamodb.NewFromConfig(cfg)
	storetest.TestStore(t, func(t *testing.T) store.Store { return dynamostore.New(client, dynalite.NewIdempotencyTable(t, cfg)) })
}
