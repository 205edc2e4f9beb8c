// Package events_test runs every sample event of this directory, the ones the
// README feeds to `sam local invoke`, through the handler it is meant for,
// against moto_server, so none of them goes stale (events_test.go, in the
// integration build). This file's checks need only Go.
package events_test

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

// tested lists every event file and the test that runs it.
var tested = map[string]string{
	"processor-batch-duplicate.json":  "TestProcessorBatchWithDuplicate",
	"processor-fifo-batch.json":       "TestProcessorFIFOBatch",
	"processor-replayed-record.json":  "TestProcessorReplayedRecord",
	"replayer-first-replay.json":      "TestReplayer",
	"replayer-last-attempt.json":      "TestReplayer",
	"replayer-over-limit.json":        "TestReplayer",
	"replayer-invalid-counter.json":   "TestReplayer",
	"replayer-binary-attributes.json": "TestReplayerBinaryAttributes",
	"replayer-expired.json":           "TestReplayerExpired",
}

func TestEveryEventIsTested(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.json")
	if err != nil {
		t.Fatal(err)
	}
	var events []string
	for _, f := range files {
		if f != "env.json" {
			events = append(events, f)
		}
	}
	want := slices.Sorted(maps.Keys(tested))
	if !slices.Equal(events, want) {
		t.Errorf("event files %v\nwith a test      %v", events, want)
	}
}

// load decodes an event strictly: a field Lambda does not send, or a typo in
// one it does, fails.
func load(t *testing.T, name string) events.SQSEvent {
	t.Helper()
	raw, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var ev events.SQSEvent
	if err := dec.Decode(&ev); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if len(ev.Records) == 0 {
		t.Fatalf("%s has no records", name)
	}
	return ev
}

// Every event decodes strictly, with no server: the integration build runs
// each through its handler.
func TestEventsDecodeStrictly(t *testing.T) {
	t.Parallel()
	for name := range tested {
		load(t, name)
	}
}
