// Package dynamostore is the store.Store on a DynamoDB table: partition key
// "id" (String), TTL on "expiresAt", every operation one conditional call.
//
// New takes any client with the calls of API (the hot path); FromEnv builds
// the store as the deployed processor does, from IDEMPOTENCY_TABLE and an
// AWS configuration. The store also implements store.Checker (Check reads
// the table's schema and TTL) and store.Admin (Forget and Locks, for the
// operator's CLI, through a client that also has AdminAPI's calls). It
// sorts its own errors: a missing table, denied access or a schema that
// refuses the key match store.ErrMisconfigured, the rest
// store.ErrUnavailable, and every one unwraps to the SDK's error.
package dynamostore
