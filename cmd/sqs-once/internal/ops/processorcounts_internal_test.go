package ops

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cftypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	"github.com/aws/smithy-go"
)

// fakeCounts is a CountsAPI: pages[i] answers the i-th call by metric name
// (each name's values; a name left out has no datapoint), or err fails
// every call. It keeps the requests.
type fakeCounts struct {
	pages []map[string][]float64
	err   error
	ins   []*cloudwatch.GetMetricDataInput
}

func (f *fakeCounts) GetMetricData(_ context.Context, in *cloudwatch.GetMetricDataInput, _ ...func(*cloudwatch.Options)) (*cloudwatch.GetMetricDataOutput, error) {
	f.ins = append(f.ins, in)
	if f.err != nil {
		return nil, f.err
	}
	page := len(f.ins) - 1
	out := &cloudwatch.GetMetricDataOutput{}
	for _, q := range in.MetricDataQueries {
		// CloudWatch answers every query, with no value where no
		// datapoint is.
		r := cwtypes.MetricDataResult{Id: q.Id, StatusCode: cwtypes.StatusCodeComplete}
		if page < len(f.pages) {
			r.Values = f.pages[page][aws.ToString(q.MetricStat.Metric.MetricName)]
		}
		out.MetricDataResults = append(out.MetricDataResults, r)
	}
	if page+1 < len(f.pages) {
		out.NextToken = aws.String("page" + strconv.Itoa(page+1))
	}
	return out, nil
}

// countsAt is 11:12:40 UTC: the period counted is 10:12 to 11:12.
var countsAt = time.Date(2026, 11, 29, 11, 12, 40, 0, time.UTC)

func readCounts(t *testing.T, f *fakeCounts, endpoint string) ProcessorCounts {
	t.Helper()
	c := &Counts{Metrics: f, MetricsEndpoint: endpoint, Now: func() time.Time { return countsAt }}
	return c.Processor(context.Background(), "orders-once-ProcessorFunction-ID")
}

// TestProcessorCountsRequest: the counts are the processor's own metrics,
// as its EMF lines declare them: namespace sqs-once, dimension FunctionName
// alone (the set every document declares, the Reason breakdown included),
// summed per minute over the last hour on whole minutes.
func TestProcessorCountsRequest(t *testing.T) {
	t.Parallel()
	f := &fakeCounts{pages: []map[string][]float64{{"Processed": {1}}}}
	readCounts(t, f, "")
	if len(f.ins) != 1 {
		t.Fatalf("%d calls, want 1", len(f.ins))
	}
	in := f.ins[0]
	if !in.StartTime.Equal(time.Date(2026, 11, 29, 10, 12, 0, 0, time.UTC)) || !in.EndTime.Equal(time.Date(2026, 11, 29, 11, 12, 0, 0, time.UTC)) {
		t.Errorf("period %v to %v, want the hour before 11:12", in.StartTime, in.EndTime)
	}
	names := map[string]bool{}
	for _, q := range in.MetricDataQueries {
		m := q.MetricStat
		names[aws.ToString(m.Metric.MetricName)] = true
		if aws.ToString(m.Metric.Namespace) != "sqs-once" || len(m.Metric.Dimensions) != 1 ||
			aws.ToString(m.Metric.Dimensions[0].Name) != "FunctionName" || aws.ToString(m.Metric.Dimensions[0].Value) != "orders-once-ProcessorFunction-ID" ||
			aws.ToString(m.Stat) != "Sum" || aws.ToInt32(m.Period) != 60 {
			t.Errorf("query %s: %+v %+v", aws.ToString(q.Id), *m.Metric, m)
		}
	}
	for _, want := range []string{"Processed", "Duplicate", "InProgress", "InProgressDropped", "AlreadyStarted", "Failed",
		"ForwardedToOperator", "UnrecordedCompletion", "LockLost", "BackoffApplied", "InProgressHidden"} {
		if !names[want] {
			t.Errorf("%s not asked for (asked: %v)", want, names)
		}
	}
}

// TestProcessorCounts: what status says of the counts CloudWatch gives:
// present (summed over the minutes and the pages), zero, some or all
// without a datapoint.
func TestProcessorCounts(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		pages  []map[string][]float64
		want   map[string]int64
		note   string
		line   string
		absent []string
	}{
		{"present", []map[string][]float64{
			{"Processed": {3, 0, 9}, "Duplicate": {1, 2}, "InProgress": {0}, "LockLost": {0}, "Failed": {2}},
			{"Processed": {0}, "Duplicate": {0}, "Failed": {1}},
		}, map[string]int64{"Processed": 12, "Duplicate": 3, "Failed": 3, "LockLost": 0, "ForwardedToOperator": 0}, "",
			"processor orders-once-ProcessorFunction-ID (last hour, 10:12 to 11:12 UTC): 12 Processed, 3 Duplicate, 3 Failed",
			[]string{"LockLost", "InProgress", "no datapoint"}},
		{"zero", []map[string][]float64{
			{"Processed": {0, 0}, "Duplicate": {0, 0}, "InProgress": {0}, "UnrecordedCompletion": {0}, "LockLost": {0}, "BackoffApplied": {0}},
		}, map[string]int64{"Processed": 0, "Duplicate": 0}, "",
			"processor orders-once-ProcessorFunction-ID (last hour, 10:12 to 11:12 UTC): 0 Processed, 0 Duplicate",
			[]string{"LockLost", "no datapoint"}},
		{"some without a datapoint", []map[string][]float64{{"Duplicate": {1}}},
			map[string]int64{"Processed": 0, "Duplicate": 1, "Failed": 0}, "",
			"processor orders-once-ProcessorFunction-ID (last hour, 10:12 to 11:12 UTC): 0 Processed, 1 Duplicate",
			[]string{"no datapoint"}},
		{"no datapoint", []map[string][]float64{{}},
			map[string]int64{"Processed": 0, "Duplicate": 0}, NoProcessorDatapoint,
			"processor orders-once-ProcessorFunction-ID (last hour, 10:12 to 11:12 UTC): no datapoint: the processor handled no message in the period",
			[]string{"0 Processed"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeCounts{pages: tt.pages}
			pc := readCounts(t, f, "")
			if len(f.ins) != len(tt.pages) || (len(f.ins) > 1 && aws.ToString(f.ins[1].NextToken) != "page1") {
				t.Errorf("%d calls for %d pages", len(f.ins), len(tt.pages))
			}
			if pc.Counts == nil || pc.Note != tt.note || pc.Error != "" {
				t.Fatalf("counts %v, note %q, error %q", pc.Counts, pc.Note, pc.Error)
			}
			for name, n := range tt.want {
				if got, ok := pc.Counts[name]; !ok || got != n {
					t.Errorf("%s = %d (present %v), want %d", name, got, ok, n)
				}
			}
			line := processorWords(pc, false)
			if !strings.HasPrefix(line, tt.line) {
				t.Errorf("status says\n  %s\nwant\n  %s", line, tt.line)
			}
			for _, no := range tt.absent {
				if strings.Contains(line, no) {
					t.Errorf("status says %q: %s", no, line)
				}
			}
		})
	}
}

// TestProcessorCountsNotRead: a read that fails is said, not returned: on
// an emulator that does not serve CloudWatch "not available on this
// endpoint" (the SDK's error with --verbose), the classification the
// queues' age uses; a refusal or throttling is shown as the error it is.
func TestProcessorCountsNotRead(t *testing.T) {
	t.Parallel()
	moto404 := metricCallError(t, cloudWatchAnswer{http.StatusNotFound, map[string]string{"Content-Type": "text/html"}, []byte("<!doctype html>\n<title>404 Not Found</title>")})
	throttled := &smithy.GenericAPIError{Code: "Throttling", Message: "Rate exceeded"}
	denied := &smithy.GenericAPIError{Code: "AccessDenied", Message: "not authorized to perform: cloudwatch:GetMetricData"}
	for _, tt := range []struct {
		name     string
		err      error
		endpoint string
		line     string // without --verbose
		verbose  string // what --verbose adds
	}{
		{"emulator 404", moto404, "http://127.0.0.1:5000",
			"processor orders-once-ProcessorFunction-ID (last hour, 10:12 to 11:12 UTC): not available on this endpoint (the endpoint set in place of AWS's does not serve CloudWatch's metrics of namespace sqs-once; --verbose shows the SDK's error)",
			"StatusCode: 404"},
		{"404 on AWS", moto404, "", "unknown: CloudWatch: AWS call failed: ", "StatusCode: 404"},
		{"throttled on the emulator", throttled, "http://127.0.0.1:5000", "unknown: CloudWatch: AWS call failed: api error Throttling: Rate exceeded", ""},
		{"access denied", denied, "", "unknown: CloudWatch: AWS call failed: api error AccessDenied: not authorized to perform: cloudwatch:GetMetricData", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pc := readCounts(t, &fakeCounts{err: tt.err}, tt.endpoint)
			if pc.Counts != nil || pc.Error != tt.err.Error() {
				t.Errorf("counts %v, error %q; want none, the SDK's error kept", pc.Counts, pc.Error)
			}
			if (pc.Note == MetricNotAvailable) != (tt.endpoint != "" && tt.err == moto404) {
				t.Errorf("note %q", pc.Note)
			}
			line := processorWords(pc, false)
			if !strings.Contains(line, tt.line) {
				t.Errorf("status says\n  %s\nwant\n  %s", line, tt.line)
			}
			if pc.Note == MetricNotAvailable && strings.Contains(line, "404") {
				t.Errorf("status without --verbose shows the SDK's error: %s", line)
			}
			if v := processorWords(pc, true); !strings.Contains(v, tt.verbose) || (pc.Note == MetricNotAvailable && !strings.HasSuffix(v, "): "+tt.err.Error())) {
				t.Errorf("status --verbose says %s", v)
			}
		})
	}
}

// resources is a StackAPI listing the given logical ids' physical ids,
// or failing with err.
type resources struct {
	StackAPI
	ids map[string]string
	err error
}

func (r resources) ListStackResources(context.Context, *cloudformation.ListStackResourcesInput, ...func(*cloudformation.Options)) (*cloudformation.ListStackResourcesOutput, error) {
	if r.err != nil {
		return nil, r.err
	}
	out := &cloudformation.ListStackResourcesOutput{}
	for l, p := range r.ids {
		out.StackResourceSummaries = append(out.StackResourceSummaries, cftypes.StackResourceSummary{LogicalResourceId: aws.String(l), PhysicalResourceId: aws.String(p)})
	}
	return out, nil
}

// TestStackProcessor: the counts are those of the stack's own processor,
// found by its logical id; a stack without one, or whose resources cannot
// be listed, says so in the line.
func TestStackProcessor(t *testing.T) {
	t.Parallel()
	f := &fakeCounts{pages: []map[string][]float64{{"Processed": {4}}}}
	c := &Counts{Metrics: f, Now: func() time.Time { return countsAt }}
	pc := c.StackProcessor(context.Background(), resources{ids: map[string]string{"ProcessorFunction": "orders-once-ProcessorFunction-ID", "DlqReplayerFunction": "other"}}, "orders-once")
	if pc.Function != "orders-once-ProcessorFunction-ID" || pc.Counts["Processed"] != 4 {
		t.Errorf("counts of %q: %v", pc.Function, pc.Counts)
	}
	pc = c.StackProcessor(context.Background(), resources{ids: map[string]string{"DlqReplayerFunction": "other"}}, "orders-once")
	if line := processorWords(pc, false); pc.Counts != nil || line != "processor: unknown: no ProcessorFunction in stack orders-once" {
		t.Errorf("a stack without a processor: %q", line)
	}
	pc = c.StackProcessor(context.Background(), resources{err: &smithy.GenericAPIError{Code: "AccessDenied", Message: "no"}}, "orders-once")
	if line := processorWords(pc, false); pc.Counts != nil || !strings.HasPrefix(line, "processor: unknown: list the resources of stack orders-once") || !strings.Contains(line, "AccessDenied") {
		t.Errorf("resources not listed: %q", line)
	}
	if len(f.ins) != 1 {
		t.Errorf("%d CloudWatch calls; want one, for the stack with a processor", len(f.ins))
	}
}
