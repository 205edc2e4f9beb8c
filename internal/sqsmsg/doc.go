// Package sqsmsg is the shared SQS message plumbing: the attribute names the
// suite puts on messages, a lossless conversion of Lambda event attributes into
// send attributes, and SendBatch, which sends any number of messages in as few
// SendMessageBatch calls as SQS allows and reports exactly which were not
// accepted.
package sqsmsg
