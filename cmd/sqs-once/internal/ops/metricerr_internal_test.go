package ops

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go/encoding/cbor"
)

// cloudWatchAnswer is how a fake CloudWatch endpoint answers every call.
type cloudWatchAnswer struct {
	status int
	header map[string]string
	body   []byte
}

// cborError is an RPC v2 CBOR error as CloudWatch sends one: the error's
// type in the body, its query code in X-Amzn-Query-Error.
func cborError(status int, typ, queryCode string) cloudWatchAnswer {
	return cloudWatchAnswer{status: status,
		header: map[string]string{"Smithy-Protocol": "rpc-v2-cbor", "Content-Type": "application/cbor", "X-Amzn-Query-Error": queryCode},
		body:   cbor.Encode(cbor.Map{"__type": cbor.String("com.amazonaws.cloudwatch#" + typ), "message": cbor.String(typ + " from the fake")}),
	}
}

// metricCallError is the error the SDK's CloudWatch client returns for
// GetMetricStatistics when the endpoint answers a.
func metricCallError(t *testing.T, a cloudWatchAnswer) error {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		for k, v := range a.header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(a.status)
		_, _ = w.Write(a.body)
	}))
	t.Cleanup(srv.Close)
	client := cloudwatch.NewFromConfig(aws.Config{
		Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("test", "test", ""),
		BaseEndpoint: aws.String(srv.URL), Retryer: func() aws.Retryer { return aws.NopRetryer{} },
	})
	now := time.Now()
	_, err := client.GetMetricStatistics(context.Background(), &cloudwatch.GetMetricStatisticsInput{
		Namespace: aws.String("AWS/SQS"), MetricName: aws.String("ApproximateAgeOfOldestMessage"),
		StartTime: aws.Time(now.Add(-time.Minute)), EndTime: aws.Time(now), Period: aws.Int32(60),
	})
	if err == nil {
		t.Fatalf("the fake's answer %d %q was taken for datapoints", a.status, a.body)
	}
	return err
}

// TestMetricUnavailable: an endpoint that does not serve CloudWatch (a 404
// page, as moto_server answers, an undecodable body, an unknown operation)
// is told from a fault that must be shown: a refusal, throttling, a server
// error; and on AWS's own endpoint only the service's own "no such
// operation" is taken for "not available".
func TestMetricUnavailable(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name             string
		answer           cloudWatchAnswer
		custom, onAWS    bool
		wantInErrorChain string
	}{
		// moto_server 5: a 404 HTML page for the CBOR path.
		{"moto 404 page", cloudWatchAnswer{http.StatusNotFound, map[string]string{"Content-Type": "text/html"}, []byte("<!doctype html>\n<title>404 Not Found</title>")}, true, false, "404"},
		{"404 empty", cloudWatchAnswer{http.StatusNotFound, nil, nil}, true, false, "404"},
		{"501 not implemented", cloudWatchAnswer{http.StatusNotImplemented, map[string]string{"Content-Type": "text/plain"}, []byte("not implemented")}, true, false, "501"},
		{"405 method", cloudWatchAnswer{http.StatusMethodNotAllowed, map[string]string{"Content-Type": "text/plain"}, []byte("method not allowed")}, true, false, "405"},
		{"200 undecodable", cloudWatchAnswer{http.StatusOK, map[string]string{"Content-Type": "text/xml"}, []byte("<GetMetricStatisticsResponse/>")}, true, false, "deserialization failed"},
		{"unknown operation", cborError(http.StatusBadRequest, "UnknownOperationException", ""), true, true, "UnknownOperationException"},
		{"throttled", cborError(http.StatusBadRequest, "ThrottlingException", "Throttling;Sender"), false, false, "Throttling"},
		{"throttled 429", cloudWatchAnswer{http.StatusTooManyRequests, map[string]string{"Content-Type": "text/plain"}, []byte("slow down")}, false, false, "429"},
		{"access denied", cborError(http.StatusForbidden, "AccessDeniedException", "AccessDenied;Sender"), false, false, "AccessDenied"},
		{"401 page", cloudWatchAnswer{http.StatusUnauthorized, map[string]string{"Content-Type": "text/html"}, []byte("<html>Unauthorized</html>")}, false, false, "401"},
		{"403 page", cloudWatchAnswer{http.StatusForbidden, map[string]string{"Content-Type": "text/html"}, []byte("<html>Forbidden</html>")}, false, false, "403"},
		{"server error", cloudWatchAnswer{http.StatusInternalServerError, map[string]string{"Content-Type": "text/html"}, []byte("<html>oops</html>")}, false, false, "500"},
		{"unavailable", cborError(http.StatusServiceUnavailable, "ServiceUnavailable", "ServiceUnavailable;Receiver"), false, false, "ServiceUnavailable"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := metricCallError(t, tt.answer)
			if !strings.Contains(err.Error(), tt.wantInErrorChain) {
				t.Fatalf("the SDK's error %q does not say %q: not the answer meant", err, tt.wantInErrorChain)
			}
			if got := metricUnavailable(err, true); got != tt.custom {
				t.Errorf("with AWS_ENDPOINT_URL: metricUnavailable(%v) = %v, want %v", err, got, tt.custom)
			}
			if got := metricUnavailable(err, false); got != tt.onAWS {
				t.Errorf("on AWS's own endpoint: metricUnavailable(%v) = %v, want %v", err, got, tt.onAWS)
			}
			// What status shows for it: the note, the SDK's error kept.
			q := &Queues{SQS: oneQueue{}, Metrics: failingMetrics{err}, MetricsEndpoint: "http://127.0.0.1:5000", Now: time.Now}
			st, serr := q.Status(context.Background(), "main", "https://sqs.us-east-1.amazonaws.com/123456789012/orders")
			if serr != nil {
				t.Fatal(serr)
			}
			if (st.AgeNote == AgeNotAvailable) != tt.custom || st.AgeError != err.Error() {
				t.Errorf("status on an emulator = note %q, error %q", st.AgeNote, st.AgeError)
			}
			if !tt.custom && !strings.Contains(st.AgeNote, tt.wantInErrorChain) {
				t.Errorf("a fault's note %q does not show the error", st.AgeNote)
			}
		})
	}
}

// failingMetrics is a MetricsAPI that fails with err.
type failingMetrics struct{ err error }

func (f failingMetrics) GetMetricStatistics(context.Context, *cloudwatch.GetMetricStatisticsInput, ...func(*cloudwatch.Options)) (*cloudwatch.GetMetricStatisticsOutput, error) {
	return nil, f.err
}

// oneQueue answers GetQueueAttributes with one visible message; any other
// call would panic on the nil interface (the test makes none).
type oneQueue struct{ SQSAPI }

func (oneQueue) GetQueueAttributes(context.Context, *sqs.GetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	return &sqs.GetQueueAttributesOutput{Attributes: map[string]string{"ApproximateNumberOfMessages": "1"}}, nil
}
