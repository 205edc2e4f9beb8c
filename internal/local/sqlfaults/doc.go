// Package sqlfaults is the COMMIT-fault tests the SQL stores (pgstore,
// mysqlstore) share, for the stores' own integration tests only: a
// COMMIT whose answer is lost, a connection dropped before its COMMIT, an
// answer lost while the database is unreachable, then back, and the count
// of effects over a few hundred keys delivered under all those faults and
// more (FaultsCountEffects). The logic and the assertions are written once
// here; each store's test gives a constructor (its store, its
// sqlproxy.Proxy in front of its server, its effects or orders read
// directly) and keeps its own test names.
package sqlfaults
