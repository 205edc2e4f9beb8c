package processor_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// BenchmarkStandardBatch measures a batch of 10 records whose business handler
// takes 200 ms, against moto_server. Run sequentially it would take over 2 s a
// batch; concurrently it takes about 200 ms plus the table round trips:
//
//	go test -run '^$' -bench StandardBatch ./internal/processor
func BenchmarkStandardBatch(b *testing.B) {
	bundle := setup(b)
	bundle.business.hook = func(context.Context, events.SQSMessage) { time.Sleep(200 * time.Millisecond) }
	for i := 0; b.Loop(); i++ {
		var records []events.SQSMessage
		for j := range 10 {
			records = append(records, record(fmt.Sprintf("b%d-%d", i, j), "x"))
		}
		if _, err := bundle.handler.Handle(context.Background(), events.SQSEvent{Records: records}); err != nil {
			b.Fatal(err)
		}
	}
}
