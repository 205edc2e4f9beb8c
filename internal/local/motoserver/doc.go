// Package motoserver starts and stops a local moto_server, the emulator of the
// SQS, DynamoDB, CloudFormation, S3 and IAM APIs that the tests and the local
// demo run against instead of AWS.
//
// Start runs moto_server with one fix loaded (sitecustomize.py): moto 5's
// SQS delete rebuilds a queue's message list without the lock its sends
// take, and two overlapping deletes with a send between them lose the sent
// message. Start refuses a server that did not load the fix.
package motoserver
