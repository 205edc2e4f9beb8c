// Package instantaws is a DynamoDB and SQS endpoint that answers at once
// with canned JSON, so a benchmark of sqs-once's client side (the
// processor, the store, the AWS SDK) measures the client alone: no table,
// no emulator, no network beyond loopback.
//
// A Server listens on 127.0.0.1 (httptest). Each call is answered by the
// Answer set for its operation (the X-Amz-Target header of the AWS JSON
// protocol both services speak: "DynamoDB_20120810.UpdateItem",
// "AmazonSQS.ChangeMessageVisibilityBatch", ...), or by an empty success
// ("{}") when none is set. Answers are bytes built once: the server's own
// cost per call is net/http's, and the benchmarks measure it separately as a
// floor (a bare HTTP round trip).
//
// Calls counts the calls per operation, for the calls-per-record figures.
package instantaws
