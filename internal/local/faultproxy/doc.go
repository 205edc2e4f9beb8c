// Package faultproxy is a forwarding HTTP proxy that injects faults between an
// AWS SDK client and moto_server, so that tests exercise the SDK's real retry
// path instead of a mock's idea of it.
//
// A client points its BaseEndpoint at Proxy.URL; the proxy names each
// request's AWS operation (from X-Amz-Target for the JSON protocols, from the
// Action parameter for the query protocol) and decides its Fault: a scripted
// one (Script, ScriptWhen), else a random one (WithRandom), else Pass. The
// faults are the ways a call goes wrong on the wire, and they differ in the
// one thing a caller cannot see: whether the service applied the request.
//
//	FailBefore  500 without forwarding: not applied, the SDK retries.
//	FailAfter   forwarded and applied, response replaced by a 500: the SDK
//	            retries a request that already took effect (a lost response).
//	ResetAfter  forwarded and applied, then the connection is reset.
//	Throttle    the service's throttling error without forwarding.
//	Delay(d)    forwarded after d, unless the caller gives up first.
//
// Error bodies are shaped as the service sends them, so the SDK decodes them
// into its own error types (types.InternalServerError,
// types.ProvisionedThroughputExceededException, sqs types.RequestThrottled)
// and its retryer classifies them as it would in AWS.
package faultproxy
