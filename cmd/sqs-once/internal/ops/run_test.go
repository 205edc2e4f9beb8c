package ops_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/sqs-once/sqs-once/cmd/sqs-once/internal/ops"
)

// The helpers every test file shares; hermetic, so that the tests that need
// no server build and run without the integration tag.

type result struct {
	stdout, stderr string
	code           int
}

// run runs the CLI in-process as `sqs-once args...`, with stdin, a clock,
// and optionally another AWS configuration (a fault proxy's endpoint).
type runOpts struct {
	stdin string
	now   func() time.Time
	cfg   *aws.Config
	ctx   context.Context
}

func run(t *testing.T, o runOpts, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	stdio := ops.IO{Stdin: strings.NewReader(o.stdin), Stdout: &out, Stderr: &errOut, Now: o.now}
	if o.cfg != nil {
		cfg := *o.cfg
		stdio.LoadConfig = func(context.Context, string, string) (aws.Config, error) { return cfg, nil }
	}
	ctx := o.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	code := ops.Main(ctx, args, stdio)
	t.Logf("sqs-once %s -> %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out.String(), errOut.String())
	return result{out.String(), errOut.String(), code}
}

// offline is an AWS configuration for the tests that must not reach any
// AWS: dummy credentials, and an endpoint on the loopback where nothing
// listens, so a call the test did not expect fails rather than leaves the
// machine.
func offline() *aws.Config {
	return &aws.Config{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		BaseEndpoint: aws.String("http://127.0.0.1:1"),
		// One attempt: an unreachable endpoint fails at once.
		Retryer: func() aws.Retryer { return aws.NopRetryer{} },
	}
}
