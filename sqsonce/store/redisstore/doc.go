// Package redisstore is the store.Store on Redis (7.0 or later) or
// Valkey (7.2 or later): a lock record per key as a hash, every write one
// Lua script, the dedupe window and the lock's retention as key expiries.
//
// Its client is github.com/redis/go-redis/v9, the client the Redis project
// maintains: it speaks to Redis and Valkey alike (Valkey keeps the
// protocol), to one server, a Sentinel-managed primary or a Redis Cluster
// through one interface (redis.UniversalClient), runs a script by SHA-1 and
// sends its source only when the server lacks it (redis.Script), and
// retries a command whose connection dropped, which is how a write whose
// answer was lost is recognised on the retry. valkey-go and rueidis are
// also maintained, faster under heavy pipelining, and less widely used;
// the store's cost per record is two round trips either way. Only this
// package imports the client: a program that uses the DynamoDB store alone
// does not link it.
//
// # The records
//
// A record lives under "<prefix>{<id>}" (prefix DefaultKeyPrefix unless
// Options.KeyPrefix says otherwise), a hash with the fields status, owner,
// fence, lockExpiresAt (epoch milliseconds), expiresAt (epoch seconds),
// payloadHash and, on a completion that stored one, result (the bytes as
// given) and outbox (the work's staged messages, the bytes as given, until
// MarkSent removes the field; a record written before outboxes has none,
// and reads as none). The id in braces is the hash tag: a record's two
// keys are in one Redis Cluster slot, so one script may write both.
//
// The conditions are the DynamoDB store's, judged by the times the caller
// passes, never the server's clock: Acquire writes when there is no record,
// or it is RELEASED, or its lock expired before Now (milliseconds), or its
// window ended before Now (seconds); Renew and Release need the owner's
// PROCESSING record, Complete the owner's record (and writes the outbox
// in the same script as the status); MarkSent removes only the outbox of
// the COMPLETED record of the owner and fence read; Forget deletes only
// the owner's COMPLETED record. A repeat of an applied write is recognised by
// the owner token, as the DynamoDB store recognises it.
//
// Expiry is the server's (PEXPIREAT), the one place its clock counts: a
// lock's record expires FenceRetention after the lock (rounded up to the
// second), a released record FenceRetention after its release, and a
// completion when the last second of its window ends (ExpiresAt plus one
// second, since a duplicate is refused up to and including ExpiresAt in
// whole seconds). A server clock ahead of the processors' by d ends a
// window d early; keep the hosts on NTP.
//
// # The fence
//
// The fence grows on every acquisition and never goes back. Each id has a
// fence counter, "<prefix>{<id>}:fence", holding the last fence handed out;
// it expires FenceRetention after the record's latest expiry, so it
// outlives the record, and Forget leaves it. Acquire's fence is one more
// than the larger of the record's fence and the counter; with neither (a
// key never seen, or unseen for longer than its window plus
// FenceRetention), FenceSeed(Now) plus one: the clock in milliseconds,
// above every fence of a record gone that long, as with the DynamoDB store.
//
// # Errors
//
// A server that does not answer, a dropped connection, a server loading or
// read-only after a failover, or out of memory give a *store.StoreError
// matching store.ErrUnavailable. A key of another type (WRONGTYPE), a
// script or command the server or its ACL refuses, or a failed login give
// one matching store.ErrMisconfigured; a hash at the key without the
// fields the protocol writes is a *store.RecordError.
//
// # Durability
//
// Redis acknowledges a write before it is on disk or on a replica. A
// restart without persistence, or a failover to a replica that had not yet
// received the write, loses locks and completions, and a lost lock or
// completion lets a key run a second time. appendonly yes with appendfsync
// always (or everysec: up to a second lost) narrows it on restart;
// Options.WaitReplicas narrows it on failover. The docs' Redis page says
// when to choose this store over DynamoDB.
package redisstore
