//go:build integration

package mysqlstore_test

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"testing"

	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/mysqlstore"
	"github.com/sqs-once/sqs-once/sqsonce/store/storetest"
)

// The MySQL store's own mutants: mistakes a MySQL store makes that the
// suite's memory-store mutants do not cover, each shown to fail a rule of
// the conformance suite on MariaDB. The suite takes a *testing.T and fails
// it, so each mutant runs in a child process (this test binary again,
// running TestMutantChild on the server of the parent), and the parent
// reads which of the child's subtests failed.

// The child's environment: the mutant (mysqlstore.Mutate's name), the
// suite ("store" or "transactions") and the DSN's parameters.
const (
	mutantEnv = "MYSQLSTORE_MUTANT"
	suiteEnv  = "MYSQLSTORE_MUTANT_SUITE"
	paramsEnv = "MYSQLSTORE_MUTANT_PARAMS"
)

// TestMutantChild runs a suite on a mutated store when the parent asks
// (mutantEnv set); in a run of its own it does nothing.
func TestMutantChild(t *testing.T) {
	name := os.Getenv(mutantEnv)
	if name == "" {
		return
	}
	db := newDB(t, os.Getenv(paramsEnv))
	s := newTable(t, db, "mutant_"+regexp.MustCompile(`\W`).ReplaceAllString(name, "_"))
	if !mysqlstore.Mutate(s, name) {
		t.Fatalf("no mutant %q", name)
	}
	switch os.Getenv(suiteEnv) {
	case "store":
		storetest.TestStore(t, func(t *testing.T) store.Store { return s })
	case "transactions":
		e := newEffects(t, db)
		storetest.TestTransactions(t, func(t *testing.T) (store.Transactor, storetest.Effects) { return s, e })
	default:
		t.Fatalf("no suite %q", os.Getenv(suiteEnv))
	}
}

// TestMutantsAreCaught: each MySQL mistake fails the rules it breaks, and
// the rows-affected one only where the DSN lacks clientFoundRows (which is
// why the store cannot rely on it: the user's DSN decides).
func TestMutantsAreCaught(t *testing.T) {
	for _, m := range []struct {
		name, bug, suite, params string
		rules                    []string // nil: the suite passes
	}{
		{"naive-rows-affected", "trusting rows-affected without clientFoundRows (no version bump)", "store", plainParams, []string{"Complete"}},
		{"naive-rows-affected", "the same, on a DSN with clientFoundRows=true, which hides it", "store", foundParams, nil},
		{"trust-statements", "committing the rest of a transaction whose statement failed (MySQL rolls back the statement alone)", "transactions", plainParams, []string{"UserConditionFails", "OutboxWithCommit"}},
	} {
		t.Run(m.name+"/"+m.suite+"/"+map[bool]string{true: "plain", false: "clientFoundRows"}[m.params == plainParams], func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run", "^TestMutantChild$", "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), mutantEnv+"="+m.name, suiteEnv+"="+m.suite, paramsEnv+"="+m.params, dsnEnv+"="+serverDSN)
			out, err := cmd.CombinedOutput()
			var failed []string
			for _, sub := range regexp.MustCompile(`(?m)^\s*--- FAIL: TestMutantChild/(\S+)`).FindAllStringSubmatch(string(out), -1) {
				failed = append(failed, sub[1])
			}
			if m.rules == nil {
				if err != nil {
					t.Errorf("mutant %s (%s): the suite failed %v; want it to pass:\n%s", m.name, m.bug, failed, out)
				}
				return
			}
			if err == nil {
				t.Fatalf("mutant %s (%s): the suite passed; want rules %v to fail", m.name, m.bug, m.rules)
			}
			for _, r := range m.rules {
				if !slices.Contains(failed, r) {
					t.Errorf("mutant %s (%s): rule %s did not fail (failed: %v):\n%s", m.name, m.bug, r, failed, out)
				}
			}
			t.Logf("mutant %s (%s) caught by %v", m.name, m.bug, failed)
		})
	}
}
