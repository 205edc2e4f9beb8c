//go:build integration

package motoserver_test

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"
)

// TestSpeedPatchesChangeCostsNotAnswers runs the moto code paths that
// python/sqs_once_speed.py changes, in-process, with and without the
// patches: an expired message among 300, one conditional update text with
// other values, updates the expression checks refuse (twice each), one
// condition parsed twice, a transaction committed and one rolled back, the
// dispatcher's lookups, the action lookup. The answers must be the same;
// the costs must fall: no walk of the queue's attributes per received
// message, one lexing and one parse per expression text, no deepcopy of
// the update's tree, its tree-only checks run once per text, fewer abstract
// isinstance tests, a condition parsed once for the same text, names and
// values (a request's handler and its backend parse it alike), no copy of a
// whole table per transaction, one lookup per host, one listing of a
// handler's methods.
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
	if got, ok := plain.Answers["ddb_refusals"].([]any); !ok || len(got) != 6 || slices.Contains(got, any("ok")) {
		t.Errorf("the refused updates answered %v, want six refusals: the script no longer tests that a failed check fails again", plain.Answers["ddb_refusals"])
	}
	// The tree's walks still test some nodes' abstract classes (moto's own
	// code does, inside the checks): at least half of the tests are gone.
	if p, u := patched.Cost["abstract_isinstance"], plain.Cost["abstract_isinstance"]; 2*p >= u {
		t.Errorf("abstract isinstance tests: patched %d, unpatched %d, want fewer than half", p, u)
	}
	want := map[string]int{
		"table_copies": 0, "queue_attributes": 0, "condition_lexes": 1, "update_tokenizations": 1, "module_listings": 2,
		"update_tree_deepcopies": 0, "static_update_checks": 3, "method_listings": 1, "condition_parses": 1,
	}
	for name, n := range want {
		if patched.Cost[name] != n {
			t.Errorf("patched %s = %d, want %d", name, patched.Cost[name], n)
		}
		if plain.Cost[name] <= n {
			t.Errorf("unpatched %s = %d, want more than %d: the cost no longer shows; if moto removed it upstream, its patch may go", name, plain.Cost[name], n)
		}
	}
}
