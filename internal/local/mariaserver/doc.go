// Package mariaserver starts a MariaDB server (10.11, Debian's
// mariadb-server package) on a free loopback port for one test binary or
// test, in a temporary data directory made by mariadb-install-db, tuned for
// speed over durability (the redo log flushed once a second, no
// performance_schema, no binary log: a test's database need not survive a
// crash), with a database "sqsonce" for the stores' tables, and stops it, by
// its process, removing the directory. mariadbd refuses to run as root: a
// test running as root runs it as the package's mysql user. Its Unix socket
// and pid file are in the temporary directory, apart from a system server's.
//
// Proxy stands between a client and the server and loses a COMMIT's answer
// or the connection before it, for the stores' fault tests.
//
// The package speaks to the server with the mariadb command-line client,
// never a Go driver: the product module must not require the MySQL driver,
// which only the MySQL store's users should get.
//
// `make test` installs MariaDB (local/setup) when it is missing. A test
// that needs the server and does not find it fails with the install
// command: it is never skipped.
package mariaserver
