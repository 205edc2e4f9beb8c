// Package sqsonce runs a function once per idempotency key, for AWS Lambda
// SQS consumers and for any other Go code, with a lock in a store.Store:
// a DynamoDB table (package sqsonce/store/dynamostore), Redis
// (store/redisstore), or memory in a test (store/memstore).
//
// The guarantee: a Handler (or the function given to Processor.Do) runs at
// most once per key within the dedupe window, and a message is deleted from
// its queue only when the handler succeeded, it was a duplicate of a
// completed key, or the operator queue accepted it. Each key is locked by one
// conditional write that also moves a fencing token on; the lock is renewed
// while the handler runs when a LockTimeout is set; success marks the key
// COMPLETED for the window, failure releases it. The limits: a crash between
// your side effect and the completion, a completion that cannot be written,
// or a holder paused longer than its lock can run a key twice (pass Key and
// Fence to a downstream that accepts them to close these), and a key seen
// again after the window runs again. The docs' guarantees page lists every
// case, and sqsonce/model checks the protocol with spin.
//
// A Lambda function needs three lines around its handler (and their error
// checks):
//
//	store, err := dynamostore.FromEnv(os.LookupEnv, awsCfg) // IDEMPOTENCY_TABLE
//	p, err := sqsonce.FromEnv(os.LookupEnv, sqsonce.Config{Store: store, AWS: awsCfg}, handle) // IDEMPOTENCY_KEY, ...
//	lambda.Start(p.Handle)
//
// Any Go program configures it in Go instead: New with a Config whose Key is
// KeyFromBody("/orderId"), KeyFromAttribute, KeyFromMessageID or KeyFunc.
// Without a handler of your own, Config.Target hands the records the
// processor holds to what consumes them today (package sqsonce/targets: a
// Lambda function, a queue, a topic or a bus).
//
// Tests need no AWS: package sqsonce/sqsoncetest has an in-memory store with
// a clock the test controls and a context carrying a key and fence for a
// Handler's own unit test; storetest.TestStore is the conformance suite
// every store passes (a store of your own too).
//
// The DynamoDB table needs partition key "id" (String) and TTL on
// "expiresAt"; the docs' table page has the commands and a CloudFormation
// snippet that create it. Processor.Check asks the store to check its
// set-up (for the DynamoDB store, the table's key schema and TTL, naming the
// table and region): call it in a deploy step or a test, not at a
// function's start-up.
//
// Config.Metrics (standard output with FromEnv) receives the processor's
// metrics once per invocation, in CloudWatch's embedded metric format:
// records processed, duplicates, failures by reason, and the completions
// that could not be recorded and the locks lost, each a side effect that may
// run twice. No CloudWatch API call: CloudWatch Logs extracts them.
//
// The event source mapping must report batch item failures
// (FunctionResponseTypes: [ReportBatchItemFailures]): Handle answers with a
// partial batch response.
package sqsonce
