// Package proc is what the local servers' launchers (motoserver, dynalite,
// redisserver, pgserver, mariaserver) share: a free loopback port, the tail of a
// process's output for an error message, a process started and reaped with
// a stop that ends that process only (and, on Linux, ended by the kernel if
// this program exits without stopping it), and the repository's root, where
// make setup installs the tools. The SQL servers' launchers also share the
// steps of a start (server_unix.go): a program found, the system user to
// run it as when root, a temporary directory that user owns, a set-up
// program run, a server started and awaited on its log, and a few ports
// tried. It needs the standard library only.
package proc
