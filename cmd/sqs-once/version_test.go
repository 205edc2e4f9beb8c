package main

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sqs-once/sqs-once/cmd/sqs-once/internal/ops"
	"github.com/sqs-once/sqs-once/internal/version"
)

// TestCLIPrintsTheVersion runs `sqs-once --version` in-process: it prints
// the release and needs no AWS configuration.
func TestCLIPrintsTheVersion(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	code := ops.Main(t.Context(), []string{"--version"}, ops.IO{
		Stdout: &stdout, Stderr: &stderr,
		LoadConfig: func(context.Context, string, string) (aws.Config, error) {
			t.Error("--version loaded the AWS configuration")
			return aws.Config{}, errors.New("not for --version")
		},
	})
	if want := "sqs-once version " + version.Version + "\n"; code != ops.ExitOK || stdout.String() != want || stderr.Len() != 0 {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit %d and %q", code, stdout.String(), stderr.String(), ops.ExitOK, want)
	}
}
