// Package demo is the local runner behind `make demo` (cmd/sqs-once-local):
// it creates the stack from template.yaml on moto_server, runs the processor
// and the DLQ replayer handlers behind local event source mappings
// (internal/localesm), sends a workload of orders with re-sends, poison,
// transient and permanent failures, records every side effect in an
// append-only ledger, and checks the invariants the project promises: every
// order's side effect exactly once (extra ones only inside the documented
// window), nothing lost, queues drained.
//
// With Options.Stack it sends the same workload to a deployed stack and
// checks what can be seen from outside: the idempotency table, the operator
// queue and the queues' depths.
package demo
