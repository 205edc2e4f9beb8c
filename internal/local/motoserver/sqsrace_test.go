//go:build integration

package motoserver_test

import "testing"

// TestSQSDeleteRaceIsPatched runs moto's SQS backend in-process with the
// two races python/sqs_once_races.py fixes forced to happen (a slowed receipt-handle
// check widens them): two overlapping deletes with a send between them, and
// a receive moving messages to the DLQ while a delete walks the list.
// Without the fix the sent message is lost, and the queues hold the wrong
// messages; with it both come out right. These races lost messages in
// loaded demo runs; Start refuses a moto_server that did not load the fix.
func TestSQSDeleteRaceIsPatched(t *testing.T) {
	t.Parallel()
	for _, script := range []string{"sqs_delete_race.py", "sqs_dlq_move_race.py"} {
		t.Run(script, func(t *testing.T) {
			t.Parallel()
			plain, patched := newPythonRun(t).runBoth(script)
			if plain == "present" {
				t.Errorf("%s, unpatched moto: %q: the race no longer shows; if moto fixed it upstream, its fix in python/sqs_once_races.py may go", script, plain)
			}
			if patched != "present" {
				t.Errorf("%s, patched moto: %q, want \"present\": the fix does not hold", script, patched)
			}
		})
	}
}
