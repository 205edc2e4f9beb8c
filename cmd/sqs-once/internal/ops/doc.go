// Package ops is the operator's toolkit behind the sqs-once CLI: it reads and
// repairs a deployed stack's idempotency records (inspect, release, forget)
// and sends a completed key's pending messages (send-pending), shows its
// queues (status, peek), moves dead letters back (redrive), and puts a
// stack in front of a queue's existing Lambda consumer: preflight
// checks the queue, the consumer and the stack (ReadMigration, Checks), and
// cutover moves the queue from the consumer's event source mapping to the
// stack's, never both at once (CutoverPlan, Mappings).
//
// Every AWS call goes through a narrow interface holding only the calls
// made (SQSAPI, DynamoAPI, MetricsAPI, StackAPI, FunctionAPI, MappingAPI),
// so tests run the real logic against moto_server and inject faults at the
// HTTP layer. The record commands go through the processor's own store
// (dynamostore.Store), so the record's schema and the conditions of its
// writes are declared once, in package dynamostore. AWS errors are turned into
// this package's errors (ErrNotFound, ErrRefused, ErrChanged, ErrDeclined,
// ErrAWS, ErrIncomplete, ErrCheckFailed) with errors.As, and the CLI (Main)
// maps them onto exit codes; a not-found or AWS error gets a second line
// naming the region, stack, table and queues the command used.
package ops
