package dedupe

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqs-once/sqs-once/internal/retrybudget"
)

// Status is the state of a key in the table.
type Status string

const (
	StatusProcessing Status = "PROCESSING"
	StatusCompleted  Status = "COMPLETED"
	// StatusReleased is a lock given up after a failure: free to take at
	// once. The record stays, so that its fence keeps growing.
	StatusReleased Status = "RELEASED"
)

// FenceRetention is how long a lock's record outlives the lock before TTL
// may delete it (a completed record lives until its window ends): no holder
// can still be acting on a record that is deleted, and a record created
// again starts its fence from the clock, above every fence of the old one.
const FenceRetention = time.Hour

// Attribute names of a record. The table's partition key is AttrID (S) and
// its TTL attribute attrExpiresAt. AttrID and AttrStatus are exported for
// readers outside the lock protocol (the demo's check of a deployed stack),
// so they never hard-code the schema.
const (
	AttrID            = "id"
	AttrStatus        = "status"
	attrLockExpiresAt = "lockExpiresAt" // epoch milliseconds
	attrExpiresAt     = "expiresAt"     // epoch seconds, the TTL attribute
	attrOwner         = "owner"
	// attrFence grows by one with every acquisition of the record; a new
	// record starts from the acquirer's clock in milliseconds.
	attrFence = "fence"
	// attrPayloadHash is the hash of the message the lock was taken for ("":
	// not validated), so that a later message with the same key and another
	// payload is told apart from a duplicate.
	attrPayloadHash = "payloadHash"
)

// DynamoAPI is the part of the DynamoDB client the store uses.
type DynamoAPI interface {
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

var _ DynamoAPI = (*dynamodb.Client)(nil)

// Store performs the lock protocol's operations on one table, under one key
// prefix so that several consumers can share the table.
//
// Every operation is one conditional call, and every one is safe to repeat:
// the SDK re-sends a call whose answer was lost (a 500 after DynamoDB applied
// it, a reset connection), and conditional writes are not idempotent across
// such retries. Each operation therefore recognises its own earlier attempt
// in what the refused retry returns, instead of mistaking it for another
// holder's work.
type Store struct {
	api    DynamoAPI
	table  string
	prefix string
	// newOwner makes the token that identifies one acquisition.
	newOwner func() string
}

// NewStore returns a store for table whose record ids are "<prefix>#<key>".
func NewStore(api DynamoAPI, table, prefix string) *Store {
	return &Store{api: api, table: table, prefix: prefix, newOwner: randomOwner}
}

// Lease is one successful acquisition: the proof of ownership that renew,
// complete and release must present.
type Lease struct {
	Key   string
	Owner string
	// Fence is the fencing token of this acquisition: larger than every
	// earlier acquisition's of the key (one more than the last; a new record
	// starts from the clock in milliseconds). A downstream store that refuses writes
	// with a fence lower than one it has seen refuses a holder whose lock
	// was taken over.
	Fence int64
	// LockExpiresAt is when another holder may take the key over.
	LockExpiresAt time.Time
	// TookOver is set when the key was held by a lock that had expired or a
	// completion whose window had ended.
	TookOver bool
}

// RecordID is the partition key of key's record under prefix: the id a
// reader of the table looks up.
func RecordID(prefix, key string) string { return prefix + "#" + key }

func (s *Store) recordID(key string) string { return RecordID(s.prefix, key) }

// Acquire takes the lock on key until lockUntil, in one conditional
// UpdateItem that also moves the record's fence on: one more than before, or
// on a new record now in milliseconds plus one, so that the fence grows
// across a deletion too. It succeeds when the key is absent, when its lock
// was released or has expired, or when its COMPLETED window has ended but
// TTL has not yet deleted it. A refusal is a *HeldError
// (ErrDuplicate or ErrInProgress) read from the item the failed condition
// returns, without a second read; a record this protocol did not write is a
// *RecordError.
//
// A refusal by a live lock carrying this call's own owner token is this
// call's own earlier attempt, applied by DynamoDB but answered with an error
// the SDK retried: the lock is ours, and Acquire returns it.
func (s *Store) Acquire(ctx context.Context, key string, now, lockUntil time.Time) (Lease, error) {
	return s.AcquirePayload(ctx, key, "", now, lockUntil)
}

// AcquirePayload is Acquire that also records payloadHash, the hash of what
// the lock is taken for. A refusal by a record holding another non-empty hash
// is a *PayloadMismatchError instead of a *HeldError: the same key with
// another payload is a conflict, not a duplicate. "" validates nothing.
func (s *Store) AcquirePayload(ctx context.Context, key, payloadHash string, now, lockUntil time.Time) (Lease, error) {
	lease := Lease{Key: key, Owner: s.newOwner(), LockExpiresAt: lockUntil}
	expr, err := acquireExpression(now, lockUntil, lease.Owner, payloadHash)
	if err != nil {
		return Lease{}, err
	}
	out, err := s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           aws.String(s.table),
		Key:                                 s.keyAttr(key),
		ConditionExpression:                 expr.Condition(),
		UpdateExpression:                    expr.Update(),
		ExpressionAttributeNames:            expr.Names(),
		ExpressionAttributeValues:           expr.Values(),
		ReturnValues:                        types.ReturnValueAllOld,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}, retrybudget.DynamoDB(ctx))
	if err != nil {
		var ccf *types.ConditionalCheckFailedException
		if !errors.As(err, &ccf) {
			return Lease{}, &StoreError{Op: "acquire", Key: key, Err: err}
		}
		if ownedLock(ccf.Item, lease.Owner) {
			// Our own attempt, applied and retried: it already added one.
			lease.Fence = numberAttr(ccf.Item, attrFence)
			return lease, nil
		}
		return Lease{}, s.heldError(key, payloadHash, ccf.Item)
	}
	lease.TookOver = len(out.Attributes) > 0 && Status(stringAttr(out.Attributes, AttrStatus)) != StatusReleased
	if old, ok := numberAttrOK(out.Attributes, attrFence); ok {
		lease.Fence = old + 1
	} else {
		lease.Fence = fenceSeed(now) + 1
	}
	return lease, nil
}

// acquireExpression is the condition under which a new lock may be written,
// and the lock it writes.
func acquireExpression(now, lockUntil time.Time, owner, payloadHash string) (expression.Expression, error) {
	absent := expression.AttributeNotExists(expression.Name(AttrID))
	released := expression.Name(AttrStatus).Equal(expression.Value(string(StatusReleased)))
	lockExpired := expression.Name(AttrStatus).Equal(expression.Value(string(StatusProcessing))).
		And(expression.Name(attrLockExpiresAt).LessThan(expression.Value(now.UnixMilli())))
	// TTL deletes expired items late, up to days after expiresAt, so an
	// expired completion must count as absent.
	windowEnded := expression.Name(AttrStatus).Equal(expression.Value(string(StatusCompleted))).
		And(expression.Name(attrExpiresAt).LessThan(expression.Value(now.Unix())))
	fence := expression.Name(attrFence)
	update := lockUpdate(lockUntil).
		Set(expression.Name(AttrStatus), expression.Value(string(StatusProcessing))).
		Set(expression.Name(attrOwner), expression.Value(owner)).
		// Set even when empty: a takeover must not inherit the hash of the
		// record it replaces.
		Set(expression.Name(attrPayloadHash), expression.Value(payloadHash)).
		Set(fence, expression.Plus(expression.IfNotExists(fence, expression.Value(fenceSeed(now))), expression.Value(1)))
	return expression.NewBuilder().
		WithCondition(absent.Or(released, lockExpired, windowEnded)).
		WithUpdate(update).
		Build()
}

// fenceSeed is where a new record's fence starts: the clock in
// milliseconds. A record is deleted (by TTL) only FenceRetention after its
// last lock or at the end of its window, so as long as the hosts' clocks
// agree within that time, a record created again gets a fence above every
// fence the old one gave out.
func fenceSeed(now time.Time) int64 { return now.UnixMilli() }

// lockUpdate sets a lock's expiry, and its TTL: an abandoned lock is garbage
// FenceRetention after it can be taken over.
func lockUpdate(lockUntil time.Time) expression.UpdateBuilder {
	return expression.Set(expression.Name(attrLockExpiresAt), expression.Value(lockUntil.UnixMilli())).
		Set(expression.Name(attrExpiresAt), expression.Value(ttlSeconds(lockUntil.Add(FenceRetention))))
}

// ownedLock reports whether item is a PROCESSING lock held by owner.
func ownedLock(item map[string]types.AttributeValue, owner string) bool {
	return Status(stringAttr(item, AttrStatus)) == StatusProcessing && stringAttr(item, attrOwner) == owner
}

// heldError explains a refused acquisition from the item that blocked it.
func (s *Store) heldError(key, payloadHash string, item map[string]types.AttributeValue) error {
	if len(item) == 0 {
		// DynamoDB returns the item with every refusal; none means the
		// table answered unlike DynamoDB. Retrying later is the safe reading.
		return &HeldError{Key: key, Status: StatusProcessing}
	}
	status := Status(stringAttr(item, AttrStatus))
	var until string
	switch status {
	case StatusCompleted:
		until = attrExpiresAt
	case StatusProcessing:
		until = attrLockExpiresAt
	default:
		return &RecordError{ID: s.recordID(key), Problem: fmt.Sprintf("%s is %q, not %s or %s", AttrStatus, stringAttr(item, AttrStatus), StatusProcessing, StatusCompleted)}
	}
	n, ok := numberAttrOK(item, until)
	if !ok {
		return &RecordError{ID: s.recordID(key), Problem: fmt.Sprintf("a %s record without a numeric %s", status, until)}
	}
	stored := stringAttr(item, attrPayloadHash)
	if payloadHash != "" && stored != "" && stored != payloadHash {
		return &PayloadMismatchError{Key: key, Status: status}
	}
	if status == StatusCompleted {
		return &HeldError{Key: key, Status: status, Until: time.Unix(n, 0), PayloadHash: stored}
	}
	return &HeldError{Key: key, Status: status, Until: time.UnixMilli(n), PayloadHash: stored}
}

// Renew extends the leased lock to lockUntil. It fails with ErrLockLost when
// the record is no longer this lease's PROCESSING lock. A retried renewal
// whose first attempt was applied passes its condition again: it sets the
// same expiry.
func (s *Store) Renew(ctx context.Context, lease Lease, lockUntil time.Time) (Lease, error) {
	cond := ownedBy(lease.Owner).And(expression.Name(AttrStatus).Equal(expression.Value(string(StatusProcessing))))
	if err := s.ownedUpdate(ctx, "renew", lease.Key, cond, lockUpdate(lockUntil)); err != nil {
		return lease, err
	}
	lease.LockExpiresAt = lockUntil
	return lease, nil
}

// Complete marks the leased key COMPLETED until now+window. It fails with
// ErrLockLost if another holder has taken the key over since, so a slow holder
// never overwrites the record of the one that replaced it. A retried
// completion whose first attempt was applied passes its condition again (the
// owner is unchanged) and rewrites the same record.
func (s *Store) Complete(ctx context.Context, lease Lease, now time.Time, window time.Duration) error {
	update := expression.Set(expression.Name(AttrStatus), expression.Value(string(StatusCompleted))).
		Set(expression.Name(attrExpiresAt), expression.Value(now.Add(window).Unix())).
		Remove(expression.Name(attrLockExpiresAt))
	return s.ownedUpdate(ctx, "complete", lease.Key, ownedBy(lease.Owner), update)
}

// ownedUpdate applies update to key's record under cond, an owner condition;
// a refusal is ErrLockLost.
func (s *Store) ownedUpdate(ctx context.Context, op, key string, cond expression.ConditionBuilder, update expression.UpdateBuilder) error {
	expr, err := expression.NewBuilder().WithCondition(cond).WithUpdate(update).Build()
	if err != nil {
		return err
	}
	_, err = s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           aws.String(s.table),
		Key:                                 s.keyAttr(key),
		ConditionExpression:                 expr.Condition(),
		UpdateExpression:                    expr.Update(),
		ExpressionAttributeNames:            expr.Names(),
		ExpressionAttributeValues:           expr.Values(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}, retrybudget.DynamoDB(ctx))
	if err != nil {
		return s.lostError(op, key, err)
	}
	return nil
}

// Release gives the leased lock up, so the message can be retried at once:
// the record becomes RELEASED, which any acquirer may take, and keeps its
// fence (a deleted record would restart it). It fails with ErrLockLost if
// another holder has taken the key over. A retried release whose first
// attempt was applied passes its owner condition again; a refusal because
// the record is gone (deleted by hand) is a success: the key is free.
func (s *Store) Release(ctx context.Context, lease Lease, now time.Time) error {
	update := expression.Set(expression.Name(AttrStatus), expression.Value(string(StatusReleased))).
		Set(expression.Name(attrLockExpiresAt), expression.Value(0)).
		Set(expression.Name(attrExpiresAt), expression.Value(ttlSeconds(now.Add(FenceRetention))))
	err := s.ownedUpdate(ctx, "release", lease.Key, ownedBy(lease.Owner), update)
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) && len(ccf.Item) == 0 {
		return nil
	}
	return err
}

func ownedBy(owner string) expression.ConditionBuilder {
	return expression.Name(attrOwner).Equal(expression.Value(owner))
}

// lostError turns a refused owner-conditional call into ErrLockLost, saying
// what holds the key now.
func (s *Store) lostError(op, key string, err error) error {
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return &StoreError{Op: op, Key: key, Err: err}
	}
	now := "the record is gone"
	if len(ccf.Item) > 0 {
		now = fmt.Sprintf("the record is %s, fence %d", stringAttr(ccf.Item, AttrStatus), numberAttr(ccf.Item, attrFence))
	}
	return fmt.Errorf("%s %q: %w (%w)", op, key, ErrLockLost, &lostDetail{now: now, ccf: ccf})
}

// lostDetail says what holds the key now, and keeps the refusal for callers
// that read it (errors.As finds the ConditionalCheckFailedException).
type lostDetail struct {
	now string
	ccf *types.ConditionalCheckFailedException
}

func (d *lostDetail) Error() string { return d.now }
func (d *lostDetail) Unwrap() error { return d.ccf }

func (s *Store) keyAttr(key string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{AttrID: &types.AttributeValueMemberS{Value: s.recordID(key)}}
}

// ttlSeconds rounds up, so TTL never removes a lock before it has expired.
func ttlSeconds(t time.Time) int64 {
	sec := t.Unix()
	if t.After(time.Unix(sec, 0)) {
		sec++
	}
	return sec
}

func stringAttr(item map[string]types.AttributeValue, name string) string {
	if v, ok := item[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

// numberAttr is the number, or 0 when absent (a record older than the fence
// has none).
func numberAttr(item map[string]types.AttributeValue, name string) int64 {
	n, _ := numberAttrOK(item, name)
	return n
}

func numberAttrOK(item map[string]types.AttributeValue, name string) (int64, bool) {
	v, ok := item[name].(*types.AttributeValueMemberN)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(v.Value, 10, 64)
	return n, err == nil
}

func randomOwner() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}
