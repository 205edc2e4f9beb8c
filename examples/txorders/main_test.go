package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqs-once/sqs-once/sqsonce"
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
	o := options{order: "A-1001", amount: 1250, orders: "orders"}
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

// failingSender is a Config.Sender that refuses its first fail calls (a
// throttled queue, an answer lost) and records what it accepted after.
type failingSender struct {
	fail  int
	calls [][]sqsonce.Outgoing
}

func (s *failingSender) Send(_ context.Context, msgs []sqsonce.Outgoing) []error {
	s.calls = append(s.calls, msgs)
	errs := make([]error, len(msgs))
	if len(s.calls) <= s.fail {
		for i := range errs {
			errs[i] = errors.New("throttled")
		}
	}
	return errs
}

// The emitted OrderAccepted, on the in-memory store: a send that fails
// leaves the order recorded and its message pending (exit 1, run again);
// the next run sends it, with the same emit id, without running the
// handler again; the run after that sends nothing.
func TestAnEmittedMessageIsSentAfterTheCommit(t *testing.T) {
	st := sqsoncetest.NewStore()
	sender := &failingSender{fail: 1}
	b := newDynamo(dynamodb.NewFromConfig(aws.Config{Region: "us-east-1"}), options{records: "records", orders: "orders"})
	b.store, b.sender = st, sender
	o := options{order: "A-1001", amount: 1250, orders: "orders", emit: "https://sqs.us-east-1.amazonaws.com/123456789012/shipments"}
	for i, c := range []struct {
		code int
		want string
	}{{exitFailed, "recorded, its message not sent yet"}, {exitOK, "already recorded"}, {exitOK, "already recorded"}} {
		var out bytes.Buffer
		if code := process(context.Background(), b, o, strings.NewReader(""), &out, io.Discard); code != c.code || !strings.Contains(out.String(), c.want) {
			t.Fatalf("run %d: exit %d, %q; want %d and %q", i+1, code, out.String(), c.code, c.want)
		}
	}
	if n := len(st.Committed()[store.RecordID("txorders", "A-1001")]); n != 1 {
		t.Errorf("%d order rows committed, want 1", n)
	}
	if len(sender.calls) != 2 {
		t.Fatalf("%d sends, want 2 (the refused one, then the next run's)", len(sender.calls))
	}
	first, second := sender.calls[0], sender.calls[1]
	if len(first) != 1 || len(second) != 1 {
		t.Fatalf("sent %v, then %v: want one message each time", first, second)
	}
	if first[0].ID == "" || first[0].ID != second[0].ID {
		t.Errorf("emit ids %q, then %q: want one id, the same on every send", first[0].ID, second[0].ID)
	}
	if m := second[0]; m.To != "sqs:"+o.emit || !strings.Contains(m.Body, `"orderId":"A-1001"`) || m.Attributes["type"] != "OrderAccepted" {
		t.Errorf("sent %+v, want OrderAccepted for A-1001 to %s", m, o.emit)
	}
}

// -database defaults to the store's environment variable, so that the
// connection string, a secret, need not be on the command line; a flag
// given wins.
func TestDatabaseDefaultsToTheStoresVariable(t *testing.T) {
	t.Setenv("DATABASE_URL", "postgres://u@pg/db")
	t.Setenv("MYSQL_DSN", "u:p@tcp(my:3306)/db")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-store", "postgres", "-order", "A"}, "postgres://u@pg/db"},
		{[]string{"-store", "mysql", "-order", "A"}, "u:p@tcp(my:3306)/db"},
		{[]string{"-store", "mysql", "-database", "v@tcp(other:3306)/x", "-order", "A"}, "v@tcp(other:3306)/x"},
		{[]string{"-store", "dynamodb", "-order", "A"}, ""},
	} {
		o, err := parse(c.args, io.Discard)
		if err != nil || o.database != c.want {
			t.Errorf("%v: -database %q (%v), want %q", c.args, o.database, err, c.want)
		}
	}
	if _, err := parse([]string{"-store", "mariadb", "-order", "A"}, io.Discard); err == nil || !strings.Contains(err.Error(), `"mysql"`) {
		t.Errorf("-store mariadb: %v, want a usage error naming \"mysql\"", err)
	}
}
