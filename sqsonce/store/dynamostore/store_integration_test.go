//go:build integration

package dynamostore_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sqs-once/sqs-once/internal/local/dynalite"
	"github.com/sqs-once/sqs-once/internal/local/dynamodblocal"
	"github.com/sqs-once/sqs-once/internal/local/motoserver"
	"github.com/sqs-once/sqs-once/internal/local/mototest"
	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
	"github.com/sqs-once/sqs-once/sqsonce/store/storetest"
)

// The store on three implementations of the DynamoDB API: DynamoDB Local,
// Amazon's own engine, and moto_server, which return the old item with a
// failed condition as DynamoDB does, and dynalite, which does not (as
// DynamoDB Local before 1.25 and 2.2, and other DynamoDB-compatible
// stores), so the store reads the record itself after a refusal.

// TestStoreOnLocal: the store passes the conformance suite on DynamoDB
// Local, the rules of store.Admin included.
func TestStoreOnLocal(t *testing.T) {
	t.Parallel()
	client := dynamodblocal.NewClient(dynamodblocal.Config(t))
	storetest.TestStore(t, func(t *testing.T) store.Store { return dynamostore.New(client, localTable(t, "idem", "id")) })
}

// TestStoreOnMoto: the store passes the conformance suite on moto_server,
// the emulator the processor's and the demo's tests run on.
func TestStoreOnMoto(t *testing.T) {
	t.Parallel()
	cfg := mototest.Config(t)
	// moto's writes made atomic per item, as DynamoDB's are.
	api := motoserver.Atomic(dynamodb.NewFromConfig(cfg))
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
