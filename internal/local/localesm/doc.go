// Package localesm is a local stand-in for Lambda's SQS event source mapping:
// pollers that long-poll a queue, hand batches to a handler in the exact
// events.SQSEvent shape Lambda delivers, and delete only the records the
// handler did not report in batchItemFailures (when the mapping has
// ReportBatchItemFailures; without it, the whole batch on success).
//
// It exists so the demo and the tests run the handlers of cmd/processor and
// cmd/dlq-replayer against a real SQS API (moto_server), with the failure
// semantics Lambda has:
//
//   - a function timeout longer than the queue's visibility timeout is
//     refused before any polling (Mapping.Check), as Lambda refuses it;
//   - a handler error, panic or timeout leaves the whole batch on the queue;
//   - with ReportBatchItemFailures, a batchItemFailures entry that is empty or
//     names a message that is not in the batch makes the whole batch a
//     failure, as Lambda does;
//   - the records left are not touched: the queue's visibility timeout and
//     redrive policy decide when they come back or go to the dead-letter queue;
//   - a handler still running at its timeout is abandoned, not waited for, like
//     a Lambda sandbox that is stopped; its records are not deleted.
//
// Several pollers run per queue so a handler really races itself.
package localesm
