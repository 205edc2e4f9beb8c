package dynamostore

import (
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqs-once/sqs-once/sqsonce/store"
)

// The store's expressions are written out here once, in the form package
// expression would build them: only their values change from call to call.
// Building each with expression.NewBuilder cost a sixth of a new record's
// allocations and a tenth of its CPU (BenchmarkClient), and linked the
// expression and attributevalue packages into every function.
//
// Placeholders are lower case (#status stands for status, :nowms for the
// clock in milliseconds). DynamoDB refuses a name or value no expression of
// the call uses, so each call's maps hold exactly its expressions'.
const (
	// acquireCondition admits a new lock over no record, a released one, an
	// expired lock, or a completion whose window has ended (TTL deletes
	// expired items late, up to days after expiresAt, so an expired
	// completion must count as absent).
	acquireCondition = "(attribute_not_exists (#id)) OR (#status = :released) OR ((#status = :processing) AND (#lockexp < :nowms)) OR ((#status = :completed) AND (#expires < :nows))"
	// acquireUpdate writes the lock: its expiry and TTL, owner, payload hash
	// (set even when empty: a takeover must not inherit the hash of the
	// record it replaces) and the fence moved on by one, from the clock on
	// a new record; and removes a stored result and outbox (a takeover of
	// an ended window must not answer with the one, nor send the other).
	acquireUpdate = "REMOVE #result, #outbox\nSET #lockexp = :lockuntil, #expires = :ttl, #status = :processing, #owner = :owner, #hash = :hash, #fence = if_not_exists(#fence, :seed) + :one\n"

	// ownedProcessing is the condition of a renewal and a release: the
	// owner's lock, still held.
	ownedProcessing = "(#owner = :owner) AND (#status = :processing)"
	// renewUpdate moves a lock's expiry and its TTL: an abandoned lock is
	// garbage store.FenceRetention after it can be taken over.
	renewUpdate = "SET #lockexp = :lockuntil, #expires = :ttl\n"
	// ownedCondition is a completion's: the owner's record (a repeat of an
	// applied completion passes it again).
	ownedCondition = "#owner = :owner"
	// completeUpdate and its variants with a result, an outbox or both:
	// constants, so that the commonest completion (neither) builds no
	// string.
	completeUpdate             = "REMOVE #lockexp\nSET #status = :completed, #expires = :until\n"
	completeResultUpdate       = "REMOVE #lockexp\nSET #status = :completed, #expires = :until, #result = :result\n"
	completeOutboxUpdate       = "REMOVE #lockexp\nSET #status = :completed, #expires = :until, #outbox = :outbox\n"
	completeResultOutboxUpdate = "REMOVE #lockexp\nSET #status = :completed, #expires = :until, #result = :result, #outbox = :outbox\n"
	// markSentCondition is MarkSent's: the completion the caller read.
	markSentCondition = "(#status = :completed) AND (#owner = :owner) AND (#fence = :fence)"
	markSentUpdate    = "REMOVE #outbox\n"
	// commitCondition is a transactional completion's: the lease's lock,
	// owner and fence, still PROCESSING, so that a repeat of an applied
	// commit is refused and its writes never apply twice.
	commitCondition = "(#owner = :owner) AND (#fence = :fence) AND (#status = :processing)"
	releaseUpdate   = "SET #status = :released, #lockexp = :zero, #expires = :ttl\n"

	forgetCondition = "(#status = :completed) AND (#owner = :owner)"
	locksFilter     = "(begins_with (#id, :prefix)) AND (#status = :processing)"
)

// placeholders maps each name placeholder to its attribute.
var placeholders = map[string]string{
	"#id": AttrID, "#status": AttrStatus, "#expires": AttrExpiresAt, "#lockexp": attrLockExpiresAt,
	"#owner": attrOwner, "#fence": attrFence, "#hash": attrPayloadHash, "#result": attrResult,
	"#outbox": attrOutbox,
}

// storeExpr is one call's expressions, with the accessors of
// expression.Expression: nil for an expression the call has none of.
type storeExpr struct {
	condition, update, filter string
	names                     map[string]string
	values                    map[string]types.AttributeValue
}

// newStoreExpr is the call's expressions with values; names are those of
// placeholders the call uses, listed.
func newStoreExpr(condition, update, filter string, values map[string]types.AttributeValue, names ...string) storeExpr {
	e := storeExpr{condition: condition, update: update, filter: filter, values: values, names: make(map[string]string, len(names))}
	for _, n := range names {
		e.names[n] = placeholders[n]
	}
	return e
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func (e storeExpr) Condition() *string { return optional(e.condition) }
func (e storeExpr) Update() *string    { return optional(e.update) }
func (e storeExpr) Filter() *string    { return optional(e.filter) }

// Names and Values are the call's own maps, built for it: whatever a
// user's wrapper of the API does with them touches no other call's.
func (e storeExpr) Names() map[string]string                { return e.names }
func (e storeExpr) Values() map[string]types.AttributeValue { return e.values }

func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }
func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

// acquireExpression is the condition under which a new lock may be
// written, and the lock it writes.
func acquireExpression(req store.AcquireRequest) (storeExpr, error) {
	return newStoreExpr(acquireCondition, acquireUpdate, "", map[string]types.AttributeValue{
		":released":   str(string(store.StatusReleased)),
		":processing": str(string(store.StatusProcessing)),
		":completed":  str(string(store.StatusCompleted)),
		":nowms":      num(req.Now.UnixMilli()),
		":nows":       num(req.Now.Unix()),
		":lockuntil":  num(req.LockUntil.UnixMilli()),
		":ttl":        num(ttlSeconds(req.LockUntil.Add(store.FenceRetention))),
		":owner":      str(req.Owner),
		":hash":       str(req.PayloadHash),
		":seed":       num(store.FenceSeed(req.Now)),
		":one":        num(1),
	}, "#id", "#status", "#lockexp", "#expires", "#owner", "#hash", "#fence", "#result", "#outbox"), nil
}

func renewExpression(owner string, lockUntil time.Time) storeExpr {
	return newStoreExpr(ownedProcessing, renewUpdate, "", map[string]types.AttributeValue{
		":owner":      str(owner),
		":processing": str(string(store.StatusProcessing)),
		":lockuntil":  num(lockUntil.UnixMilli()),
		":ttl":        num(ttlSeconds(lockUntil.Add(store.FenceRetention))),
	}, "#owner", "#status", "#lockexp", "#expires")
}

func completeExpression(owner string, c store.Completion) storeExpr {
	values := map[string]types.AttributeValue{
		":owner":     str(owner),
		":completed": str(string(store.StatusCompleted)),
		":until":     num(c.Until.Unix()),
	}
	// Binary: stored as given, counted as its length against the item's
	// 400 KB. The outbox is written in the completion's own update: no
	// second call, committed if and only if the completion is.
	switch {
	case c.Result == nil && c.Outbox == nil:
		return newStoreExpr(ownedCondition, completeUpdate, "", values, "#owner", "#status", "#expires", "#lockexp")
	case c.Outbox == nil:
		values[":result"] = &types.AttributeValueMemberB{Value: c.Result}
		return newStoreExpr(ownedCondition, completeResultUpdate, "", values, "#owner", "#status", "#expires", "#lockexp", "#result")
	case c.Result == nil:
		values[":outbox"] = &types.AttributeValueMemberB{Value: c.Outbox}
		return newStoreExpr(ownedCondition, completeOutboxUpdate, "", values, "#owner", "#status", "#expires", "#lockexp", "#outbox")
	}
	values[":result"] = &types.AttributeValueMemberB{Value: c.Result}
	values[":outbox"] = &types.AttributeValueMemberB{Value: c.Outbox}
	return newStoreExpr(ownedCondition, completeResultOutboxUpdate, "", values, "#owner", "#status", "#expires", "#lockexp", "#result", "#outbox")
}

// markSentExpression removes rec's outbox if the record is still its
// completion.
func markSentExpression(rec store.Record) storeExpr {
	return newStoreExpr(markSentCondition, markSentUpdate, "", map[string]types.AttributeValue{
		":completed": str(string(store.StatusCompleted)),
		":owner":     str(rec.Owner),
		":fence":     num(rec.Fence),
	}, "#status", "#owner", "#fence", "#outbox")
}

// commitExpression is the record's part of a transactional completion:
// completeExpression's update under commitCondition.
func commitExpression(lease store.Lease, c store.Completion) storeExpr {
	e := completeExpression(lease.Owner, c)
	e.condition = commitCondition
	e.values[":fence"] = num(lease.Fence)
	e.values[":processing"] = str(string(store.StatusProcessing))
	e.names["#fence"] = placeholders["#fence"]
	return e
}

func releaseExpression(owner string, now time.Time) storeExpr {
	return newStoreExpr(ownedProcessing, releaseUpdate, "", map[string]types.AttributeValue{
		":owner":      str(owner),
		":processing": str(string(store.StatusProcessing)),
		":released":   str(string(store.StatusReleased)),
		":zero":       num(0),
		":ttl":        num(ttlSeconds(now.Add(store.FenceRetention))),
	}, "#owner", "#status", "#lockexp", "#expires")
}

func forgetExpression(owner string) storeExpr {
	return newStoreExpr(forgetCondition, "", "", map[string]types.AttributeValue{
		":completed": str(string(store.StatusCompleted)),
		":owner":     str(owner),
	}, "#status", "#owner")
}

func locksExpression(prefix string) storeExpr {
	return newStoreExpr("", "", locksFilter, map[string]types.AttributeValue{
		":prefix":     str(prefix + "#"),
		":processing": str(string(store.StatusProcessing)),
	}, "#id", "#status")
}
