//go:build integration

package ops_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sqs-once/sqs-once/cmd/sqs-once/internal/ops"
	"github.com/sqs-once/sqs-once/internal/local/mototest"
)

// toMoto sends every request, addressed to AWS's own host names, to
// moto_server instead, Host header kept: moto tells the service from it.
type toMoto struct{ moto *url.URL }

func (r toMoto) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Host = req.URL.Host
	req.URL.Scheme, req.URL.Host = r.moto.Scheme, r.moto.Host
	return http.DefaultTransport.RoundTrip(req)
}

// awsLike is the AWS configuration of a CLI run on AWS's own endpoints,
// no AWS_ENDPOINT_URL, whose requests reach moto_server all the same: what
// the CLI prints and judges is what it would on AWS.
func awsLike(t *testing.T) *aws.Config {
	t.Helper()
	moto, err := url.Parse(mototest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg := mototest.Config(t)
	cfg.BaseEndpoint, cfg.ConfigSources = nil, nil
	cfg.HTTPClient = &http.Client{Transport: toMoto{moto}}
	return &cfg
}

// TestStatusAgeNotAvailableOnTheEmulator: moto_server does not serve
// CloudWatch's oldest-message age (a 404 the SDK cannot decode); with
// AWS_ENDPOINT_URL set, status says the metric is not available on this
// endpoint rather than print the SDK's error, which --verbose and --json
// keep. The same answer on AWS's own endpoint is a fault, and shown.
func TestStatusAgeNotAvailableOnTheEmulator(t *testing.T) {
	t.Parallel()
	st, _, _, _ := queueTest(t)

	// The CLI's own configuration chain, AWS_ENDPOINT_URL from the
	// environment, as make try's exports set it.
	r := run(t, runOpts{}, "status", "--stack", st.Name)
	text := words(r.stdout)
	if r.code != ops.ExitOK || !strings.Contains(text, "oldest: not available on this endpoint (the endpoint set in place of AWS's does not serve CloudWatch's ApproximateAgeOfOldestMessage; --verbose shows the SDK's error)") {
		t.Errorf("status on the emulator: exit %d, no 'not available on this endpoint' line", r.code)
	}
	for _, raw := range []string{"StatusCode", "404", "decode", "AWS call failed", "unknown"} {
		if strings.Contains(r.stdout, raw) {
			t.Errorf("status without --verbose shows the SDK's error (%q)", raw)
		}
	}
	if n := strings.Count(r.stdout, "oldest: "); n != 1 {
		t.Errorf("%d notes on the age; want one for the three queues", n)
	}

	r = run(t, runOpts{}, "status", "--stack", st.Name, "--verbose")
	if text := words(r.stdout); r.code != ops.ExitOK || !strings.Contains(text, "oldest: not available on this endpoint (the endpoint set in place of AWS's does not serve CloudWatch's ApproximateAgeOfOldestMessage): operation error CloudWatch: GetMetricStatistics, https response error StatusCode: 404") {
		t.Errorf("status --verbose does not give the SDK's error after the note")
	}

	r = run(t, runOpts{}, "status", "--stack", st.Name, "--json")
	var rep struct{ Queues []ops.QueueStatus }
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || len(rep.Queues) != 3 {
		t.Fatalf("status --json: %v, %d queues", err, len(rep.Queues))
	}
	for _, q := range rep.Queues {
		if q.AgeNote != ops.AgeNotAvailable || !strings.Contains(q.AgeError, "StatusCode: 404") {
			t.Errorf("status --json, queue %s: ageNote %q, ageError %q", q.Name, q.AgeNote, q.AgeError)
		}
	}

	// On AWS's own endpoint the same 404 is no emulator's gap: a fault,
	// shown whole.
	r = run(t, runOpts{cfg: awsLike(t)}, "status", "--stack", st.Name)
	text = words(r.stdout)
	if r.code != ops.ExitOK || !strings.Contains(text, "oldest: unknown: CloudWatch: AWS call failed: operation error CloudWatch: GetMetricStatistics, https response error StatusCode: 404") {
		t.Errorf("status on AWS's endpoint: exit %d, the 404 not shown as the fault it is there", r.code)
	}
	if strings.Contains(text, "not available on this endpoint") {
		t.Errorf("status on AWS's endpoint says the metric is not available there")
	}
}
