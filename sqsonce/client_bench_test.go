package sqsonce_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"

	"github.com/sqs-once/sqs-once/internal/instantaws"
	"github.com/sqs-once/sqs-once/sqsonce"
)

// clientCompletedItem is the record a duplicate's acquire is refused by, as
// DynamoDB returns it with ReturnValuesOnConditionCheckFailure ALL_OLD.
const clientCompletedItem = `{"id":{"S":"bench#dup"},"status":{"S":"COMPLETED"},"expiresAt":{"N":"99999999999"},"owner":{"S":"o-1"},"fence":{"N":"7"}}`

// BenchmarkClient is one record's processing by the deployed function's
// client side alone: the processor, the DynamoDB store and the AWS SDK
// (signing, serialising, HTTP over loopback, parsing), against DynamoDB and
// SQS endpoints that answer at once (package instantaws). The SDK
// configuration comes from config.LoadDefaultConfig as in cmd/processor, the
// log is Lambda's JSON at INFO and the metrics line is written, both to
// io.Discard. Each case reports the calls a record costs:
//
//	go test -run '^$' -bench Client -benchmem ./sqsonce
//
// The figures include the fake endpoint's own net/http serving, in the same
// process; BenchmarkClientFloor measures one bare round trip to it.
func BenchmarkClient(b *testing.B) {
	cases := []struct {
		name string
		// cache is Config.LocalCache; fixedKey makes every record the same
		// key (a duplicate of the first, handled before the loop).
		cache    int
		fixedKey bool
		acquire  instantaws.Answer
		fail     bool
		// ddbCalls is the floor of DynamoDB calls per record; the benchmark
		// fails when a record costs another number.
		ddbCalls int64
	}{
		{name: "new", acquire: instantaws.OK, ddbCalls: 2},
		{name: "duplicate", fixedKey: true, acquire: instantaws.ConditionalCheckFailed(clientCompletedItem), ddbCalls: 1},
		{name: "duplicate-warm", cache: 1000, fixedKey: true, acquire: instantaws.OK, ddbCalls: 0},
		{name: "failure", acquire: instantaws.OK, fail: true, ddbCalls: 2},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			srv := instantaws.Start()
			defer srv.Close()
			p := clientProcessor(b, srv.URL(), c.cache, c.fail)
			record := func(i int) events.SQSEvent {
				id := "m-" + strconv.Itoa(i)
				key := id
				if c.fixedKey {
					key = "dup"
				}
				return events.SQSEvent{Records: []events.SQSMessage{{
					MessageId: id, Body: `{"order":"` + key + `"}`, EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:orders",
					Attributes: map[string]string{"ApproximateReceiveCount": "1", "SentTimestamp": "1700000000000"},
				}}}
			}
			handle := func(ev events.SQSEvent) {
				resp, err := p.Handle(context.Background(), ev)
				if err != nil {
					b.Fatal(err)
				}
				if failed := len(resp.BatchItemFailures) > 0; failed != c.fail {
					b.Fatalf("record %s: retried %v, want %v", ev.Records[0].MessageId, failed, c.fail)
				}
			}
			// The warm duplicate's first delivery, which completes the key:
			// the loop's records are its duplicates.
			handle(record(-1))
			srv.Answer(instantaws.UpdateItem, c.acquire)
			ddb0, sqs0 := srv.CallsOf("DynamoDB_20120810"), srv.CallsOf("AmazonSQS")
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				handle(record(n))
				n++
			}
			ddb := srv.CallsOf("DynamoDB_20120810") - ddb0
			b.ReportMetric(float64(ddb)/float64(n), "ddb-calls/record")
			b.ReportMetric(float64(srv.CallsOf("AmazonSQS")-sqs0)/float64(n), "sqs-calls/record")
			if ddb != c.ddbCalls*int64(n) {
				b.Fatalf("%d DynamoDB calls for %d records, want %d a record", ddb, n, c.ddbCalls)
			}
		})
	}
}

// clientProcessor is the processor cmd/processor builds, its AWS
// configuration loaded as there but with the endpoint at url and static
// credentials.
func clientProcessor(b *testing.B, url string, cache int, fail bool) *sqsonce.Processor {
	b.Helper()
	awsCfg, err := config.LoadDefaultConfig(context.Background(),
		config.WithRegion("us-east-1"),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("AKIDBENCH", "bench-secret", "")),
		config.WithBaseEndpoint(url),
		config.WithEC2IMDSClientEnableState(imds.ClientDisabled), // never reach for instance metadata
	)
	if err != nil {
		b.Fatal(err)
	}
	key := sqsonce.KeyFunc(func(m events.SQSMessage) (string, error) { return m.Body[10 : len(m.Body)-2], nil })
	p, err := newClientProcessor(awsCfg, key, cache, func(context.Context, events.SQSMessage) error {
		if fail {
			return errors.New("downstream 503")
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return p
}

// BenchmarkClientFloor is one bare HTTP round trip to the fake endpoint, a
// POST of an UpdateItem-sized body: the part of BenchmarkClient's figures
// that is net/http's, client and fake server together, per call.
func BenchmarkClientFloor(b *testing.B) {
	srv := instantaws.Start()
	defer srv.Close()
	body := bytes.Repeat([]byte("x"), 700)
	client := &http.Client{}
	b.ReportAllocs()
	for b.Loop() {
		req, err := http.NewRequest(http.MethodPost, srv.URL(), bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("X-Amz-Target", instantaws.UpdateItem)
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
}
