// Package sqlproxy is the COMMIT-fault proxy the SQL test servers
// (pgserver, mariaserver) share: it stands between a client and a server,
// forwards each message whole, and on request loses a COMMIT's answer or
// the connection before it, or crashes as a host that died, for the
// stores' fault tests. What differs between the wire protocols (how a
// message is framed, what a COMMIT and the end of its answer look like, a
// greeting to rewrite) is a Protocol, which each server's package gives;
// the connections, the faults and their timing are here, once.
package sqlproxy
