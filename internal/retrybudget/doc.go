// Package retrybudget fits the AWS SDK's retries of one call into the time
// its context has left, so that a throttle or a 500 late in a Lambda
// invocation ends the call in time instead of pushing the function past its
// timeout (which discards the partial batch response and redelivers the whole
// batch).
//
// The SDK's standard retryer backs off up to 20 s between attempts and does
// not look at the context's deadline when it chooses a delay: it starts the
// sleep and is cut off by the deadline. Here a retry is refused as soon as
// its delay, plus the time an attempt needs, would not end before the
// deadline, and the call returns the last attempt's error at once, wrapped so
// that errors.As still finds the AWS error.
//
// SafeRequestBody keeps the SDK from retrying a call the service has
// answered, which it otherwise does when net/http's writer goroutine lags
// behind the answer (a busy CPU): a send made twice, a receive whose
// messages stay hidden.
package retrybudget
