//go:build integration

package ops_test

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/sqs-once/sqs-once/cmd/sqs-once/internal/ops"
)

// processorLine is status's line of the processor's counts on an endpoint
// that does not serve CloudWatch.
var processorLine = regexp.MustCompile(`\nprocessor (\S+-ProcessorFunction-\S+) \(last hour, \d\d:\d\d to \d\d:\d\d UTC\): (.*)\n`)

// TestStatusProcessorCountsOnTheEmulator: status names the stack's own
// processor and the hour it counts; moto_server does not serve CloudWatch's
// GetMetricData to the SDK (a 404), so with AWS_ENDPOINT_URL set the counts
// are "not available on this endpoint", the SDK's error kept for --verbose
// and --json; on AWS's own endpoint the same 404 is a fault, shown whole.
func TestStatusProcessorCountsOnTheEmulator(t *testing.T) {
	t.Parallel()
	st, _, _, _ := queueTest(t)

	r := run(t, runOpts{}, "status", "--stack", st.Name)
	m := processorLine.FindStringSubmatch(r.stdout)
	if r.code != ops.ExitOK || m == nil {
		t.Fatalf("status: exit %d, no processor line:\n%s", r.code, r.stdout)
	}
	if !strings.HasPrefix(m[1], st.Name+"-ProcessorFunction-") ||
		m[2] != "not available on this endpoint (the endpoint set in place of AWS's does not serve CloudWatch's metrics of namespace sqs-once; --verbose shows the SDK's error)" {
		t.Errorf("status says of the processor %q: %q", m[1], m[2])
	}
	if strings.Contains(r.stdout, "404") || strings.Contains(r.stdout, "GetMetricData") {
		t.Errorf("status without --verbose shows the SDK's error:\n%s", r.stdout)
	}
	function := m[1]

	r = run(t, runOpts{}, "status", "--stack", st.Name, "--verbose")
	if m := processorLine.FindStringSubmatch(r.stdout); m == nil || !strings.Contains(m[2], "sqs-once): operation error CloudWatch: GetMetricData, https response error StatusCode: 404") {
		t.Errorf("status --verbose does not give the SDK's error after the note:\n%s", r.stdout)
	}

	r = run(t, runOpts{}, "status", "--stack", st.Name, "--json")
	var rep struct{ Processor *ops.ProcessorCounts }
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || rep.Processor == nil {
		t.Fatalf("status --json: %v, processor %v", err, rep.Processor)
	}
	p := rep.Processor
	if p.Function != function || p.Namespace != "sqs-once" || p.PeriodSeconds != 3600 || p.End.Sub(p.Start).Hours() != 1 ||
		p.Note != ops.MetricNotAvailable || !strings.Contains(p.Error, "StatusCode: 404") || p.Counts != nil {
		t.Errorf("status --json: processor %+v", *p)
	}

	r = run(t, runOpts{cfg: awsLike(t)}, "status", "--stack", st.Name)
	if m := processorLine.FindStringSubmatch(r.stdout); r.code != ops.ExitOK || m == nil ||
		!strings.HasPrefix(m[2], "unknown: CloudWatch: AWS call failed: operation error CloudWatch: GetMetricData, https response error StatusCode: 404") {
		t.Errorf("status on AWS's endpoint: exit %d, the 404 not shown as the fault it is there:\n%s", r.code, r.stdout)
	}

	// Without a stack there is no processor to count: no line.
	r = run(t, runOpts{}, "status", "--main-queue", output(t, "MainQueueUrl"))
	if r.code != ops.ExitOK || strings.Contains(r.stdout, "processor") {
		t.Errorf("status without --stack: exit %d\n%s", r.code, r.stdout)
	}
	t.Logf("status on the emulator:\n%s", run(t, runOpts{}, "status", "--stack", st.Name).stdout)
}
