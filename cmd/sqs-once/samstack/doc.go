// Package samstack translates a SAM template with the SAM translator and
// deploys the result to a local CloudFormation endpoint (moto_server), so
// tests and the local demo run against the stack the template really builds.
//
// Translate runs python3 with the samtranslator package, through the same
// transform entry point the SAM CLI and CloudFormation's own
// AWS::Serverless-2016-10-31 transform use, offline: local CodeUri values are
// replaced by an S3 location first, as `sam package` does. A translation is
// kept on disk, keyed by everything it depends on, and read back the next
// time (the translator spends seconds of CPU importing itself; CacheDirEnv,
// NoCacheEnv).
//
// Deploy translates, checks the parameter values against the template's
// constraints and rules (moto_server checks neither), uploads a placeholder
// code archive, creates the stack (a CreateStack the SDK retried after a
// lost answer takes the stack its first attempt made, told from another of
// that name by a tag of this call's own), waits for CREATE_COMPLETE and describes
// what was deployed: outputs, physical ids, and each function's configuration
// and event source mappings as read back from Lambda.
//
// Template gives typed access to a translated template (Resources,
// Parameters with their constraints, Conditions, the Rules check), and
// Resolver evaluates its intrinsic functions for given parameter values as
// CloudFormation would, offline; the tests use both to check the template
// for every allowed value rather than only for the one deployed.
//
// moto_server's CloudFormation is not CloudFormation. Where it falls short,
// Deploy either adapts (rewrites the template so moto yields what
// CloudFormation would, or applies a dropped property through the service's
// API after the stack is created) or reports the gap; every such step is
// listed in Stack.Adaptations, never done silently. Deploy is for local
// endpoints: deploy to AWS with `sam deploy`. Describe works on either.
//
// It is a test harness, not part of sqs-once's API: it lives in the CLI's
// module because the CLI's tests deploy the template with it, and the CLI's
// module may require no unpublished module (it is installed with `go
// install`); the harness (local/) imports it from here. It needs only the
// AWS SDK, which the CLI requires anyway.
package samstack
