// Package demo is the local runner behind `make demo` (local/cmd/sqs-once-local):
// it creates the stack from template.yaml on moto_server, runs the processor
// and the DLQ replayer handlers behind local event source mappings
// (internal/local/localesm), sends a workload of orders with re-sends, poison,
// transient and permanent failures, records every side effect in an
// append-only ledger, and checks the invariants the project promises: every
// order's side effect exactly once (extra ones only inside the documented
// window), nothing lost, queues drained. It follows every message through
// the dead-letter queue and counts the healthy ones (of keys whose handler
// succeeds) that went there, with 0 as the target (HealthyDeadLettered).
//
// With Options.Target (-target sqs) the processor runs no handler: deployed
// with the template's Target parameter, it forwards each key's message to a
// second queue the runner creates. The runner reads that queue as a
// consumer would and counts per key: exactly once, more than once (and
// what explains each extra copy), never arrived, body and attributes
// intact.
//
// With Options.Stack it sends the same workload to a deployed stack and
// checks what can be seen from outside: the idempotency table, the operator
// queue and the queues' depths.
package demo
