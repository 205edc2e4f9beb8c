// Package proc is what the local servers' launchers (motoserver, dynalite,
// redisserver, pgserver, mariaserver) share: a free loopback port, the tail of a
// process's output for an error message, a process started and reaped with
// a stop that ends that process only (and, on Linux, ended by the kernel if
// this program exits without stopping it), and the repository's root, where
// make setup installs the tools. It needs the standard library only.
package proc
