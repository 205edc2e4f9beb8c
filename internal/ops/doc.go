// Package ops is the operator's toolkit behind the sqs-once CLI: it reads and
// repairs a deployed stack's idempotency records (inspect, release, forget),
// shows its queues (status, peek) and moves dead letters back (redrive).
//
// Every AWS call goes through a narrow interface holding only the calls made
// (SQSAPI, DynamoAPI, MetricsAPI, StackAPI, FunctionAPI), so tests run the
// real logic against moto_server and inject faults at the HTTP layer. The
// record commands go through the processor's own store
// (sqsonce.DynamoDBStore), so the record's schema and the conditions of its
// writes are declared once, in package sqsonce. AWS
// errors are turned into this package's errors (ErrNotFound, ErrRefused,
// ErrChanged, ErrDeclined, ErrAWS) with errors.As, and the CLI (Main) maps
// them onto exit codes.
package ops
