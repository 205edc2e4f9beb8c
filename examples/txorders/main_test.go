package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqs-once/sqs-once/sqsonce/sqsoncetest"
	"github.com/sqs-once/sqs-once/sqsonce/store"
)

// How a user tests a transactional handler without AWS: the processor on
// sqsoncetest's in-memory store, which keeps the writes dynamostore.Add
// added, and shows those of committed transactions. The tests that kill
// and pause the program on moto_server and PostgreSQL are in
// integration_test.go.
func TestAnOrderRowCommitsOnce(t *testing.T) {
	st := sqsoncetest.NewStore()
	b := newDynamo(dynamodb.NewFromConfig(aws.Config{Region: "us-east-1"}), options{records: "records", orders: "orders"})
	b.store = st
	o := options{order: "A-1001", amount: 1250}
	for i, want := range []string{"recorded by run", "already recorded"} {
		var out bytes.Buffer
		if code := process(context.Background(), b, o, strings.NewReader(""), &out, io.Discard); code != exitOK || !strings.Contains(out.String(), want) {
			t.Fatalf("run %d: exit %d, %q; want %d and %q", i+1, code, out.String(), exitOK, want)
		}
	}
	writes := st.Committed()[store.RecordID("txorders", "A-1001")]
	if len(writes) != 1 {
		t.Fatalf("committed %v, want one order row", writes)
	}
	put := writes[0].(types.TransactWriteItem).Put
	if aws.ToString(put.TableName) != "orders" || put.Item["orderId"].(*types.AttributeValueMemberS).Value != "A-1001" {
		t.Errorf("committed %+v, want the order's row in orders", put)
	}
}
