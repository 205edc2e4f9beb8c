// Package motoserver starts and stops a local moto_server, the emulator of the
// SQS, DynamoDB, CloudFormation, S3 and IAM APIs that the tests and the local
// demo run against instead of AWS.
//
// Start runs moto_server with sqs-once's Python loaded (python/): fixes of
// two races in moto 5's SQS that lose messages (a delete rebuilding a
// queue's message list without the lock its sends take; a receive moving
// messages to the dead-letter queue while a delete walks that list), and
// the removal of costs that grow with the load and change no answer (a
// per-message clock through datetime, a walk of the whole queue per
// received message, a directory listing per request, re-parsing the same
// DynamoDB expressions, a log line per request). Start refuses a server
// that did not load them.
package motoserver
