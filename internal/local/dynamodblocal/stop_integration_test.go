//go:build integration

package dynamodblocal

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// TestEndsWhenItsInputCloses: the launcher exits when its standard input
// closes, as the system closes it when the test binary exits, however it
// exits: the shared server, which no cleanup stops, never outlives the
// binary, on any system (Linux's parent-death signal is proc's, and Linux
// only).
func TestEndsWhenItsInputCloses(t *testing.T) {
	t.Parallel()
	s := Start(t)
	if err := s.stdin.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Exited():
	case <-time.After(30 * time.Second):
		t.Fatal("the server still runs 30 s after its input closed")
	}
}

// TestWritesNoFile: a server that ran a table's calls left nothing in its
// working directory but the launcher: no dynamodb-local-metadata.json,
// which DynamoDB Local writes when its telemetry is set up (and it then
// makes a client of Amazon Pinpoint to send it).
func TestWritesNoFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	s, err := launchIn(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	table := NewIdempotencyTable(t, s.Config())
	if _, err := s.Client().DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != "Loopback.java" {
			t.Errorf("the server wrote %s into its working directory", e.Name())
		}
	}
}
