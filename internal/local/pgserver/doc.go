// Package pgserver starts a PostgreSQL server (15, Debian's postgresql-15
// package) on a free loopback port for one test binary or test, in a
// temporary data directory made by initdb, tuned for speed over durability
// (fsync off: a test's database need not survive a crash), and stops it,
// by its process, removing the directory. initdb and postgres refuse to run
// as root: a test running as root runs them as the package's postgres user.
//
// Proxy stands between a client and the server and loses a COMMIT's answer
// or the connection before it, for the stores' fault tests: package
// sqlproxy's proxy, given PostgreSQL's protocol.
//
// `make test` installs PostgreSQL (local/setup) when it is missing. A test
// that needs the server and does not find it fails with the install
// command: it is never skipped.
package pgserver
