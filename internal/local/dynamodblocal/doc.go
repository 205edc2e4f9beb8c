// Package dynamodblocal starts DynamoDB Local, Amazon's own implementation
// of the DynamoDB API (DynamoDBLocal.jar, run by Java 17), on a free
// loopback port for the tests, in memory, and stops it with them.
//
// It is the third DynamoDB the store's tests run against, beside
// moto_server and dynalite, and the one whose transactions are Amazon's
// code: TransactWriteItems honours a ClientRequestToken (a repeat with the
// same token and the same writes succeeds without applying them again; with
// other writes it fails with IdempotentParameterMismatchException), names
// each write's CancellationReason, and a refused write returns the old item
// when asked (ReturnValuesOnConditionCheckFailure ALL_OLD, since 1.25). moto
// ignores the token, and dynalite has no transactions at all.
//
// DynamoDB Local comes from npm: the package amplify-dynamodb-simulator
// (Version) ships DynamoDBLocal.jar (EngineVersion) with its native
// libraries for Linux (amd64 and arm64) and macOS, installed in the
// module's .tools directory (gitignored) by InstallCommand, as dynalite is;
// `make setup` runs it, and installs Java (JavaInstallCommand, as root)
// where java is missing. A test that needs either and does not find it
// fails with the command: it is never skipped.
//
// DynamoDB Local has no option for the address it listens on and binds
// every interface; the server here is started through a launcher of ours
// (Loopback.java, compiled once per user by the Java runtime's own
// compiler into the user's cache directory, or else run by Java's
// source-file launcher) that binds it to
// 127.0.0.1 alone, on a port the system chooses. A JVM takes seconds to
// start, so the tests of a package share one server (Shared, Config), each
// with tables of its own; Start gives a test a server of its own. Either
// ends with the test binary however it ends: the launcher exits when its
// standard input, a pipe the test binary holds, closes.
//
// The SDK checks the CRC32 each DynamoDB answer carries, and DynamoDB
// Local's error answers carry 0 (the SDK logs "response did not match
// expected checksum" through the client's logger): every client of the
// server is built with ClientOptions (NewClient, Server.Client), which
// turns that check off for it alone.
package dynamodblocal
