//go:build integration

package motoserver_test

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestSpeedPatchesChangeCostsNotAnswers runs the moto code paths that
// python/sqs_once_speed.py changes, in-process, with and without the
// patches: an expired message among 300, one conditional update text with
// other values, a transaction committed and one rolled back, the
// dispatcher's lookups. The answers must be the same; the costs must fall:
// no walk of the queue's attributes per received message, one lexing and
// one parse per expression text, no copy of a whole table per transaction,
// one lookup per host.
func TestSpeedPatchesChangeCostsNotAnswers(t *testing.T) {
	t.Parallel()
	py := newPythonRun(t)
	type result struct {
		Answers map[string]any
		Cost    map[string]int
	}
	decode := func(out string) result {
		t.Helper()
		var r result
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("speed_patches.py printed %q: %v", out, err)
		}
		return r
	}
	plainOut, patchedOut := py.runBoth("speed_patches.py")
	plain, patched := decode(plainOut), decode(patchedOut)

	if !reflect.DeepEqual(plain.Answers, patched.Answers) {
		t.Errorf("the patches change moto's answers:\n unpatched %v\n patched   %v", plain.Answers, patched.Answers)
	}
	if got := plain.Answers["sqs_expired_delivered"]; got != false {
		t.Errorf("an expired message was delivered (%v): the script no longer tests the retention check", got)
	}
	if got := plain.Answers["ddb_outcomes"]; !reflect.DeepEqual(got, []any{"ok", "ok", "refused"}) {
		t.Errorf("conditional updates answered %v, want ok, ok, refused: the script no longer tests values under one text", got)
	}
	if got := plain.Answers["tx_committed"]; got != "ok" || plain.Answers["tx_rolled_back"] != "canceled" {
		t.Errorf("transactions answered %v, %v, want ok, canceled: the script no longer tests a rollback", got, plain.Answers["tx_rolled_back"])
	}
	if !reflect.DeepEqual(plain.Answers["tx_after_commit"], plain.Answers["tx_after_rollback"]) {
		t.Errorf("a rolled-back transaction left %v, want the items as before it: %v", plain.Answers["tx_after_rollback"], plain.Answers["tx_after_commit"])
	}
	want := map[string]int{"table_copies": 0, "queue_attributes": 0, "condition_lexes": 1, "update_tokenizations": 1, "module_listings": 2}
	for name, n := range want {
		if patched.Cost[name] != n {
			t.Errorf("patched %s = %d, want %d", name, patched.Cost[name], n)
		}
		if plain.Cost[name] <= n {
			t.Errorf("unpatched %s = %d, want more than %d: the cost no longer shows; if moto removed it upstream, its patch may go", name, plain.Cost[name], n)
		}
	}
}
