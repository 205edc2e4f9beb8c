// Package dynalite starts dynalite (github.com/architect/dynalite, an npm
// package), an independent in-memory implementation of the DynamoDB API,
// on a free loopback port for one test, and stops it when the test ends.
//
// It is the second DynamoDB the store's tests run against besides
// moto_server, and the one that answers as DynamoDB Local before 2.2 and
// other DynamoDB-compatible stores do: a write refused by its condition
// does not carry the old item, even when the request asks for it
// (ReturnValuesOnConditionCheckFailure ALL_OLD), so the store must read the
// record itself. It has no UpdateTimeToLive: its tables have no TTL, and
// nothing deletes an expired record (the protocol treats an expired record
// as absent, so no test needs the deletion).
//
// dynalite is installed in one place, the module's .tools directory
// (gitignored), at the version this package pins (Version), by the command
// InstallCommand gives; `make check-tools` and .ci/run install or ask for
// it. A test that needs it and does not find it fails with that command:
// it is never skipped.
package dynalite
