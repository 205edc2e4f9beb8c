//go:build integration

package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/logging"

	"github.com/sqs-once/sqs-once/internal/local/faultproxy"
	"github.com/sqs-once/sqs-once/internal/local/localesm"
	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
)

// TestOutcomeCounterCountsEachRecordOnce logs as the processor does (the
// outcome and the message id set with With on a record's logger, or on the
// line itself) and checks that each record's last answer is counted once
// while the invocation runs (the progress line), a failure's second line
// (an unreleased lock) and lines inside a group not at all, that each answer
// is kept for its record of its invocation, and that a line logged after
// the invocation ended answers nothing.
func TestOutcomeCounterCountsEachRecordOnce(t *testing.T) {
	t.Parallel()
	tr := NewTracker()
	log := slog.New(newOutcomeCounter(slog.NewJSONHandler(io.Discard, nil), tr.Outcome))
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "req-1"})
	record := log.With("messageId", "m1", "key", "k1")
	record.With("outcome", "processed").InfoContext(ctx, "record processed")
	record.With("outcome", "duplicate").InfoContext(ctx, "duplicate suppressed")
	record.With("outcome", "duplicate").InfoContext(ctx, "duplicate suppressed")
	failed := log.With("messageId", "m3").With("outcome", "failed")
	failed.WarnContext(ctx, "lock not released; it expires on its own")
	failed.WarnContext(ctx, "record failed; retried later")
	log.WarnContext(ctx, "record not started", "messageId", "m2", "outcome", "not-started")
	record.With("outcome", "processed-unrecorded").ErrorContext(ctx, "record processed but its completion was not recorded")
	record.With("outcome", "in-progress").InfoContext(ctx, "record in progress elsewhere")
	log.WithGroup("target").InfoContext(ctx, "an answer", "outcome", "processed")
	log.InfoContext(ctx, "no outcome at all", "messageId", "m4")
	want := map[string]int{"in-progress": 1, "not-started": 1, "failed": 1}
	tr.mu.Lock()
	got := maps.Clone(tr.answered)
	tr.mu.Unlock()
	maps.DeleteFunc(got, func(_ string, n int) bool { return n == 0 })
	if !maps.Equal(got, want) {
		t.Errorf("answered %v, want %v", got, want)
	}
	tr.MainInvocation(localesm.Invocation{RequestID: "req-1", Records: []events.SQSMessage{{MessageId: "m1"}, {MessageId: "m2"}, {MessageId: "m3"}, {MessageId: "m4"}}})
	record.With("outcome", "processed").InfoContext(ctx, "too late: the invocation ended")
	obs := tr.Snapshot()
	for id, want := range map[string]string{"m1": "in-progress", "m2": "not-started", "m3": "failed", "m4": ""} {
		if got := obs.Receipts[id]; len(got) != 1 || got[0].Outcome != want || got[0].RequestID != "req-1" {
			t.Errorf("receipts of %s %+v, want one of req-1 answered %q", id, got, want)
		}
	}
}

// TestChaosLogNamesFaultedCompletions: only a fault in an UpdateItem that
// sets COMPLETED marks its record; the acquire (which names COMPLETED in its
// condition and asks for the old item), a delay and a pass do not.
func TestChaosLogNamesFaultedCompletions(t *testing.T) {
	t.Parallel()
	body := func(in *dynamodb.UpdateItemInput) []byte {
		t.Helper()
		raw, err := json.Marshal(map[string]any{
			"Key":                       map[string]map[string]string{dynamostore.AttrID: {"S": in.Key[dynamostore.AttrID].(*ddbtypes.AttributeValueMemberS).Value}},
			"ExpressionAttributeValues": map[string]map[string]string{":s": {"S": in.ExpressionAttributeValues[":s"].(*ddbtypes.AttributeValueMemberS).Value}},
			"ReturnValues":              string(in.ReturnValues),
		})
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	update := func(id string, status store.Status, rv ddbtypes.ReturnValue) *dynamodb.UpdateItemInput {
		return &dynamodb.UpdateItemInput{
			Key:                       map[string]ddbtypes.AttributeValue{dynamostore.AttrID: &ddbtypes.AttributeValueMemberS{Value: id}},
			ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":s": &ddbtypes.AttributeValueMemberS{Value: string(status)}},
			ReturnValues:              rv,
		}
	}
	c := newChaosLog()
	c.observe("UpdateItem", body(update("p#completed", store.StatusCompleted, "")), nil, faultproxy.FailAfter)
	c.observe("UpdateItem", body(update("p#acquired", store.StatusCompleted, ddbtypes.ReturnValueAllOld)), nil, faultproxy.ResetAfter)
	c.observe("UpdateItem", body(update("p#delayed", store.StatusCompleted, "")), nil, faultproxy.Delay(1))
	c.observe("UpdateItem", body(update("p#passed", store.StatusCompleted, "")), nil, faultproxy.Pass)
	c.observe("SendMessageBatch", []byte(`{}`), nil, faultproxy.Throttle)
	for id, want := range map[string]bool{"p#completed": true, "p#acquired": false, "p#delayed": false, "p#passed": false} {
		if got := c.hitCompletion(id); got != want {
			t.Errorf("%s: faulted completion %v, want %v", id, got, want)
		}
	}
	// A fault on any call of an invocation marks the invocation (its time
	// was spent), whichever key the call was for; a call that passed does
	// not.
	h := func(id string) http.Header { return http.Header{invocationHeader: {id}} }
	c.observe("DescribeTable", []byte(`{}`), h("req-slowed"), faultproxy.Delay(1))
	c.observe("UpdateItem", body(update("p#other", store.StatusCompleted, "")), h("req-clean"), faultproxy.Pass)
	for id, want := range map[string]bool{"req-slowed": true, "req-clean": false, "": false} {
		if got := c.hitInvocation(id); got != want {
			t.Errorf("invocation %q: faulted %v, want %v", id, got, want)
		}
	}
	st := c.stats(ChaosHeavy, 3)
	if st.Calls != 7 || st.Faults["FailAfter"] != 1 || st.Faults["ResetAfter"] != 1 || st.Faults["Delay"] != 2 || st.Faults["Throttle"] != 1 ||
		st.ByOp["SendMessageBatch"]["Throttle"] != 1 || st.CompletionFaults != 1 || st.Crashes != 3 {
		t.Errorf("stats %+v", st)
	}
}

// TestCallsNameTheirInvocation: a call the processor makes through the SDK
// inside an invocation reaches the server with the invocation's request id
// in invocationHeader (the SDK hands the call's context to the HTTP client),
// and a call outside any invocation carries none.
func TestCallsNameTheirInvocation(t *testing.T) {
	t.Parallel()
	seen := make(chan string, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Get(invocationHeader)
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		_, _ = w.Write([]byte(`{"Table":{"TableName":"t"}}`))
	}))
	defer srv.Close()
	client := dynamodb.NewFromConfig(aws.Config{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		BaseEndpoint: aws.String(srv.URL),
		HTTPClient:   tagInvocation{awshttp.NewBuildableClient()},
		Retryer:      func() aws.Retryer { return aws.NopRetryer{} },
	})
	inv := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "req-7"})
	for ctx, want := range map[context.Context]string{inv: "req-7", context.Background(): ""} {
		if _, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String("t")}); err != nil {
			t.Fatal(err)
		}
		if got := <-seen; got != want {
			t.Errorf("header %q, want %q", got, want)
		}
	}
}

// TestSDKLinesGoToTheFunctionLog: the AWS SDK's own log lines (a response
// body it could not drain, a retry) land in the functions' log, tagged,
// and nowhere else: the terminal keeps only the progress line and report.
func TestSDKLinesGoToTheFunctionLog(t *testing.T) {
	t.Parallel()
	var file bytes.Buffer
	sdkLogger(newFunctionLogger(&file)).Logf(logging.Warn, "failed to close HTTP response body: %s", "checksum")
	var line map[string]any
	if err := json.Unmarshal(file.Bytes(), &line); err != nil {
		t.Fatalf("function log %q: %v", file.String(), err)
	}
	if line["message"] != "failed to close HTTP response body: checksum" || line["source"] != "aws-sdk-go-v2" || line["level"] != "WARN" {
		t.Errorf("function log line %v", line)
	}
}
