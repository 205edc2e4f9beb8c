// Package lambdaruntime is a minimal emulator of the AWS Lambda Runtime API
// (https://docs.aws.amazon.com/lambda/latest/dg/runtimes-api.html), so a
// test can run a real compiled Lambda binary and invoke it synchronously.
//
// A Server listens on a free port of 127.0.0.1. Start the binary with
// AWS_LAMBDA_RUNTIME_API=<Server.Addr>: aws-lambda-go's lambda.Start then
// long-polls GET /2018-06-01/runtime/invocation/next here, as it does in a
// Lambda sandbox, and posts the handler's result to .../{id}/response or
// .../{id}/error. Server.Invoke hands one event to the next poll and waits
// for that result, so a test synchronises on the runtime's own requests
// instead of on time.
//
// What it emulates, and how a test sees it:
//
//   - the next invocation carries the headers aws-lambda-go reads:
//     Lambda-Runtime-Aws-Request-Id, Lambda-Runtime-Deadline-Ms,
//     Lambda-Runtime-Invoked-Function-Arn and Lambda-Runtime-Trace-Id;
//   - the deadline is counted from the moment the runtime takes the event,
//     not from Invoke: a binary still in its init phase does not lose its
//     invocation's time to it (Lambda times the init phase separately);
//   - a result posted to /error, or a /response whose streamed body failed
//     (aws-lambda-go then sets the Lambda-Runtime-Function-Error-Type and
//     -Body trailers), is a FunctionError in the Result, as Lambda's Invoke
//     reports it with X-Amz-Function-Error;
//   - a function that has not answered by the deadline makes Invoke return
//     ErrTimeout. The emulator cannot stop the process as Lambda stops the
//     sandbox; it refuses the late answer (400), on which aws-lambda-go
//     exits, and the test kills the process it started;
//   - POST /2018-06-01/runtime/init/error fails every waiting and later
//     Invoke with that error (aws-lambda-go never posts it: a Go function
//     whose init fails exits, which only the test that started it can see).
//
// What it does not: the Extensions, Telemetry and Logs APIs (their paths
// answer 404, which aws-lambda-go tolerates), response streaming's
// incremental delivery (a streamed body is read whole), and the 6 MB
// request limit on events (an event of any size is delivered).
package lambdaruntime
