package ops_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sqs-once/sqs-once/cmd/sqs-once/internal/ops"
)

// status --pending tells a completion's time by the processor's
// DEDUPE_WINDOW, read as the processor reads it: whole seconds, blank is
// its default of a day; a value it refuses, or an environment not read,
// is no window, and status says every key's age is unknown.
func TestResolveReadsTheProcessorsDedupeWindow(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		err  error
		want time.Duration
		from string
	}{
		{map[string]string{"DEDUPE_WINDOW": "3600"}, nil, time.Hour, "the processor's DEDUPE_WINDOW"},
		{map[string]string{"DEDUPE_WINDOW": " "}, nil, 24 * time.Hour, "processor default, DEDUPE_WINDOW unset"},
		{map[string]string{}, nil, 24 * time.Hour, "processor default, DEDUPE_WINDOW unset"},
		{map[string]string{"DEDUPE_WINDOW": "1h"}, nil, 0, ""},
		{map[string]string{"DEDUPE_WINDOW": "31622401"}, nil, 0, ""},
		// lambda:GetFunctionConfiguration refused: not read.
		{nil, errors.New("AccessDenied"), 0, ""},
	} {
		calls := 0
		got, err := ops.Resolve(context.Background(), fakeStack{}, fakeFunction{env: tc.env, err: tc.err, calls: &calls}, ops.Targets{Stack: "orders"})
		if err != nil {
			t.Fatal(err)
		}
		if got.DedupeWindow != tc.want || got.DedupeWindowFrom != tc.from {
			t.Errorf("processor environment %v: window %v from %q; want %v from %q", tc.env, got.DedupeWindow, got.DedupeWindowFrom, tc.want, tc.from)
		}
	}
}

// status --pending's durations are checked before any call.
func TestStatusPendingFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--pending-age", "-1m"}, "--pending-age"},
		{[]string{"--dedupe-window", "500ms"}, "--dedupe-window"},
		{[]string{"--dedupe-window", "367d"}, "--dedupe-window"},
		{[]string{"--dedupe-window", "8785h"}, "--dedupe-window"},
	} {
		args := append([]string{"status", "--pending", "--table", "t", "--key-prefix", "p"}, tc.args...)
		r := run(t, runOpts{cfg: offline()}, args...)
		if r.code != ops.ExitUsage || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("sqs-once %s: exit %d, stderr %q; want exit %d naming %s", strings.Join(args, " "), r.code, r.stderr, ops.ExitUsage, tc.want)
		}
	}
}
