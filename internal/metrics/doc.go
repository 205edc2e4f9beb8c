// Package metrics builds CloudWatch Embedded Metric Format (EMF) documents:
// JSON log lines from which CloudWatch Logs extracts metrics, so a Lambda
// function publishes its metrics by writing to its log, with no API call, no
// permission beyond its logs', and nothing added to an invocation's time.
//
// A Set gathers one invocation's counts and values and writes them once, at
// the end, as one document per dimension set that has data (Set.Write).
// Parse reads a document back and checks it against the specification
// (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch_Embedded_Metric_Format_Specification.html),
// and Sum and Values aggregate parsed documents the way CloudWatch does:
// they are how the tests, and anyone reading the logs, see what CloudWatch
// would.
package metrics
