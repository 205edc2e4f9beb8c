package redisstore

import "github.com/redis/go-redis/v9"

// The record's hash fields. The record key holds the hash; its own expiry
// (PEXPIREAT) is the DynamoDB store's TTL, and the field expiresAt says
// what that expiry is, in epoch seconds, as the DynamoDB attribute does.
const (
	fieldStatus        = "status"
	fieldOwner         = "owner"
	fieldFence         = "fence"
	fieldLockExpiresAt = "lockExpiresAt" // epoch milliseconds
	fieldExpiresAt     = "expiresAt"     // epoch seconds
	fieldPayloadHash   = "payloadHash"
	fieldResult        = "result" // bytes, absent when the completion stored none
	fieldOutbox        = "outbox" // bytes, absent when the completion stored none or MarkSent removed it
)

// Every script takes KEYS[1], the record's hash, and KEYS[2], the fence
// counter (a string holding the last fence handed out for the id). Both
// keys carry the record id as their hash tag, so in Redis Cluster they are
// in one slot and a script may touch both.
//
// A script answers with a table whose first element says what happened:
//
//	{"ok", ...}        applied
//	{"refused", h...}  the condition failed; h is the record (HGETALL, a flat
//	                   field/value list, empty when there is no record)
//
// The Go side decides everything the DynamoDB store decides from a refusal
// (its own earlier attempt, a repeat, which error): the scripts hold only
// the conditions, so that the two stores' conditions can be read side by
// side.

// keepFence is shared by the writing scripts: it keeps the fence counter
// at least fence (nil: as it is; a counter lost, say to eviction, comes
// back from the record's fence) and keeps it until at least expireMs,
// never moving its expiry earlier. SET drops a key's expiry, so the old
// expiry is read first (PEXPIRETIME, Redis 7.0 and later: -1 no expiry, -2
// no key).
const keepFence = `
local function keepFence(fkey, fence, expireMs)
  local old = redis.call('PEXPIRETIME', fkey)
  local cur = tonumber(redis.call('GET', fkey))
  if fence ~= nil and (cur == nil or fence > cur) then
    redis.call('SET', fkey, string.format('%d', fence))
  end
  if old > expireMs then expireMs = old end
  if redis.call('EXISTS', fkey) == 1 then
    redis.call('PEXPIREAT', fkey, string.format('%d', expireMs))
  end
end
`

// acquireScript: ARGV owner, payloadHash, nowMs, nowSec, lockUntilMs,
// recordExpiresSec, recordExpireMs, fenceExpireMs, seed. The condition is
// the DynamoDB store's: no record, or RELEASED, or PROCESSING with
// lockExpiresAt before nowMs, or COMPLETED with expiresAt before nowSec. A
// record whose fields cannot be compared (not numbers, missing) fails it,
// as a DynamoDB condition on a missing attribute does, and comes back
// refused for the Go side to report.
//
// The fence: one more than the larger of the record's fence and the fence
// counter, both of which outlive a lock (the counter also outlives a
// deleted record, by FenceRetention after the record's last expiry); with
// neither, the seed (the clock in milliseconds) plus one, as the DynamoDB
// store does. Answer {"ok", fence, tookOver}.
var acquireScript = redis.NewScript(keepFence + `
local rec, fkey = KEYS[1], KEYS[2]
local owner, hash = ARGV[1], ARGV[2]
local nowMs, nowSec = tonumber(ARGV[3]), tonumber(ARGV[4])

local f = redis.call('HMGET', rec, 'status', 'lockExpiresAt', 'expiresAt', 'fence')
local exists = redis.call('EXISTS', rec) == 1
local free, tookOver = false, 0
if not exists then
  free = true
elseif f[1] == 'RELEASED' then
  free = true
elseif f[1] == 'PROCESSING' then
  local lock = tonumber(f[2])
  if lock ~= nil and lock < nowMs then free, tookOver = true, 1 end
elseif f[1] == 'COMPLETED' then
  local ends = tonumber(f[3])
  if ends ~= nil and ends < nowSec then free, tookOver = true, 1 end
end
if not free then
  return {'refused', redis.call('HGETALL', rec)}
end

local last = nil
if exists then last = tonumber(f[4]) end
if last == nil then last = tonumber(ARGV[9]) end
local counter = tonumber(redis.call('GET', KEYS[2]))
if counter ~= nil and counter > last then last = counter end
local fence = last + 1

-- A new lock starts from nothing: no result, no outbox (its messages would
-- be sent again as the new holder's), no hash of the record it replaces.
redis.call('DEL', rec)
redis.call('HSET', rec, 'status', 'PROCESSING', 'owner', owner, 'fence', string.format('%d', fence),
  'lockExpiresAt', ARGV[5], 'expiresAt', ARGV[6], 'payloadHash', hash)
redis.call('PEXPIREAT', rec, ARGV[7])
keepFence(fkey, fence, tonumber(ARGV[8]))
return {'ok', string.format('%d', fence), tookOver}
`)

// renewScript: ARGV owner, lockUntilMs, recordExpiresSec, recordExpireMs,
// fenceExpireMs. Condition: the owner's PROCESSING record. A repeat passes
// it again and writes the same.
var renewScript = redis.NewScript(keepFence + `
local rec, fkey = KEYS[1], KEYS[2]
local f = redis.call('HMGET', rec, 'status', 'owner', 'fence')
if f[1] ~= 'PROCESSING' or f[2] ~= ARGV[1] then
  return {'refused', redis.call('HGETALL', rec)}
end
redis.call('HSET', rec, 'lockExpiresAt', ARGV[2], 'expiresAt', ARGV[3])
redis.call('PEXPIREAT', rec, ARGV[4])
keepFence(fkey, tonumber(f[3]), tonumber(ARGV[5]))
return {'ok'}
`)

// completeScript: ARGV owner, untilSec, recordExpireMs, fenceExpireMs,
// hasResult ("1" or "0"), result, hasOutbox ("1" or "0"), outbox.
// Condition: the owner's record, whatever its status, as the DynamoDB
// store's (a repeat passes it again). The outbox is written by this same
// script, with the status: a completion is never seen without the
// messages its work staged.
var completeScript = redis.NewScript(keepFence + `
local rec, fkey = KEYS[1], KEYS[2]
local f = redis.call('HMGET', rec, 'owner', 'fence')
if f[1] ~= ARGV[1] then
  return {'refused', redis.call('HGETALL', rec)}
end
redis.call('HSET', rec, 'status', 'COMPLETED', 'expiresAt', ARGV[2])
redis.call('HDEL', rec, 'lockExpiresAt')
if ARGV[5] == '1' then
  redis.call('HSET', rec, 'result', ARGV[6])
else
  redis.call('HDEL', rec, 'result')
end
if ARGV[7] == '1' then
  redis.call('HSET', rec, 'outbox', ARGV[8])
else
  redis.call('HDEL', rec, 'outbox')
end
redis.call('PEXPIREAT', rec, ARGV[3])
keepFence(fkey, tonumber(f[2]), tonumber(ARGV[4]))
return {'ok'}
`)

// markSentScript: ARGV owner, fence. Removes the outbox of the completion
// the caller read: COMPLETED, its owner and its fence (compared as the
// decimal strings both sides write, exactly). Everything else, the result
// and the expiries included, stays. No record is a success (nothing is
// left to send); so is the same completion without an outbox (a repeat,
// or another delivery marked it), by the same HDEL of nothing.
var markSentScript = redis.NewScript(`
local rec = KEYS[1]
if redis.call('EXISTS', rec) == 0 then return {'ok'} end
local f = redis.call('HMGET', rec, 'status', 'owner', 'fence')
if f[1] ~= 'COMPLETED' or f[2] ~= ARGV[1] or f[3] ~= ARGV[2] then
  return {'refused', redis.call('HGETALL', rec)}
end
redis.call('HDEL', rec, 'outbox')
return {'ok'}
`)

// releaseScript: ARGV owner, recordExpiresSec, recordExpireMs,
// fenceExpireMs. Condition: the owner's PROCESSING record. No record, or
// one the same owner already released (a repeat), is a success without a
// write.
var releaseScript = redis.NewScript(keepFence + `
local rec, fkey = KEYS[1], KEYS[2]
if redis.call('EXISTS', rec) == 0 then return {'ok'} end
local f = redis.call('HMGET', rec, 'status', 'owner', 'fence')
if f[1] == 'RELEASED' and f[2] == ARGV[1] then return {'ok'} end
if f[1] ~= 'PROCESSING' or f[2] ~= ARGV[1] then
  return {'refused', redis.call('HGETALL', rec)}
end
redis.call('HSET', rec, 'status', 'RELEASED', 'lockExpiresAt', '0', 'expiresAt', ARGV[2])
redis.call('PEXPIREAT', rec, ARGV[3])
keepFence(fkey, tonumber(f[3]), tonumber(ARGV[4]))
return {'ok'}
`)

// forgetScript: ARGV owner. Deletes the owner's COMPLETED record; the
// fence counter stays (it expires on its own), so the key's next lock
// still gets a larger fence. No record is a success.
var forgetScript = redis.NewScript(`
local rec = KEYS[1]
if redis.call('EXISTS', rec) == 0 then return {'ok'} end
local f = redis.call('HMGET', rec, 'status', 'owner')
if f[1] ~= 'COMPLETED' or f[2] ~= ARGV[1] then
  return {'refused', redis.call('HGETALL', rec)}
end
redis.call('DEL', rec)
return {'ok'}
`)

// scripts are all of them, for Check, which loads them.
var scripts = []*redis.Script{acquireScript, renewScript, completeScript, markSentScript, releaseScript, forgetScript}
