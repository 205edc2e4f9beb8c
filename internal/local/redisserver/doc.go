// Package redisserver starts a redis-server (or valkey-server) on a free
// loopback port for one test, without persistence, and stops it, by its
// process, when the test ends; Restart stops and starts it again on the same
// port with nothing kept, as a server restarted without persistence comes
// back. Proxy is a TCP proxy in front of it that can lose the answer to a
// command the server applied, as a connection dropped at that moment does.
//
// The server is Debian's redis-server package (Redis 7), which `make test`
// installs (local/setup) when it is missing. StartBinary starts
// valkey-server the same way, but no test does: Debian 12 does not package
// it, so the store is tested on Redis 7 only. A test that needs a server and
// does not find it fails with the install command: it is never skipped.
package redisserver
