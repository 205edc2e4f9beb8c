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
)

// Status is the state of a key in the table.
type Status string

const (
	StatusProcessing Status = "PROCESSING"
	StatusCompleted  Status = "COMPLETED"
)

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
)

// DynamoAPI is the part of the DynamoDB client the store uses.
type DynamoAPI interface {
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
}

var _ DynamoAPI = (*dynamodb.Client)(nil)

// Store performs the lock protocol's operations on one table, under one key
// prefix so that several consumers can share the table.
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

// Lease is one successful acquisition: the proof of ownership that complete
// and release must present.
type Lease struct {
	Key   string
	Owner string
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

// Acquire takes the lock on key until lockUntil, in one conditional PutItem. It
// succeeds when the key is absent, when its PROCESSING lock has expired, or
// when its COMPLETED window has ended but TTL has not yet deleted it. A
// refusal is a *HeldError (ErrDuplicate or ErrInProgress) read from the item
// the failed condition returns, without a second read.
func (s *Store) Acquire(ctx context.Context, key string, now, lockUntil time.Time) (Lease, error) {
	lease := Lease{Key: key, Owner: s.newOwner(), LockExpiresAt: lockUntil}
	expr, err := acquireExpression(now)
	if err != nil {
		return Lease{}, err
	}
	out, err := s.api.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.table),
		Item: map[string]types.AttributeValue{
			AttrID:            &types.AttributeValueMemberS{Value: s.recordID(key)},
			AttrStatus:        &types.AttributeValueMemberS{Value: string(StatusProcessing)},
			attrLockExpiresAt: millis(lockUntil),
			// An abandoned lock is garbage once it can be taken over.
			attrExpiresAt: ttlSeconds(lockUntil),
			attrOwner:     &types.AttributeValueMemberS{Value: lease.Owner},
		},
		ConditionExpression:                 expr.Condition(),
		ExpressionAttributeNames:            expr.Names(),
		ExpressionAttributeValues:           expr.Values(),
		ReturnValues:                        types.ReturnValueAllOld,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err != nil {
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) {
			return Lease{}, heldError(key, ccf.Item)
		}
		return Lease{}, &StoreError{Op: "acquire", Key: key, Err: err}
	}
	lease.TookOver = len(out.Attributes) > 0
	return lease, nil
}

// acquireExpression is the condition under which a new lock may be written.
func acquireExpression(now time.Time) (expression.Expression, error) {
	absent := expression.AttributeNotExists(expression.Name(AttrID))
	lockExpired := expression.Name(AttrStatus).Equal(expression.Value(string(StatusProcessing))).
		And(expression.Name(attrLockExpiresAt).LessThan(expression.Value(now.UnixMilli())))
	// TTL deletes expired items late, up to days after expiresAt, so an
	// expired completion must count as absent.
	windowEnded := expression.Name(AttrStatus).Equal(expression.Value(string(StatusCompleted))).
		And(expression.Name(attrExpiresAt).LessThan(expression.Value(now.Unix())))
	return expression.NewBuilder().
		WithCondition(absent.Or(lockExpired, windowEnded)).
		Build()
}

// heldError explains a refused acquisition from the item that blocked it.
func heldError(key string, item map[string]types.AttributeValue) error {
	status := Status(stringAttr(item, AttrStatus))
	switch status {
	case StatusCompleted:
		return &HeldError{Key: key, Status: status, Until: time.Unix(numberAttr(item, attrExpiresAt), 0)}
	case StatusProcessing:
		return &HeldError{Key: key, Status: status, Until: time.UnixMilli(numberAttr(item, attrLockExpiresAt))}
	}
	// Without the old item (or with one this protocol did not write) the safe
	// reading is "held": the message is retried later rather than run twice.
	return &HeldError{Key: key, Status: StatusProcessing}
}

// Complete marks the leased key COMPLETED until now+window. It fails with
// ErrLockLost if another holder has taken the key over since, so a slow holder
// never overwrites the record of the one that replaced it.
func (s *Store) Complete(ctx context.Context, lease Lease, now time.Time, window time.Duration) error {
	update := expression.Set(expression.Name(AttrStatus), expression.Value(string(StatusCompleted))).
		Set(expression.Name(attrExpiresAt), expression.Value(now.Add(window).Unix())).
		Remove(expression.Name(attrLockExpiresAt))
	expr, err := expression.NewBuilder().WithCondition(ownedBy(lease.Owner)).WithUpdate(update).Build()
	if err != nil {
		return err
	}
	_, err = s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       s.keyAttr(lease.Key),
		ConditionExpression:       expr.Condition(),
		UpdateExpression:          expr.Update(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
	})
	return s.ownedCallError("complete", lease.Key, err)
}

// Release deletes the leased key's lock so the message can be retried at
// once. It fails with ErrLockLost if another holder has taken the key over.
func (s *Store) Release(ctx context.Context, lease Lease) error {
	expr, err := expression.NewBuilder().WithCondition(ownedBy(lease.Owner)).Build()
	if err != nil {
		return err
	}
	_, err = s.api.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 aws.String(s.table),
		Key:                       s.keyAttr(lease.Key),
		ConditionExpression:       expr.Condition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
	})
	return s.ownedCallError("release", lease.Key, err)
}

func ownedBy(owner string) expression.ConditionBuilder {
	return expression.Name(attrOwner).Equal(expression.Value(owner))
}

func (s *Store) ownedCallError(op, key string, err error) error {
	if err == nil {
		return nil
	}
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return fmt.Errorf("%s %q: %w", op, key, ErrLockLost)
	}
	return &StoreError{Op: op, Key: key, Err: err}
}

func (s *Store) keyAttr(key string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{AttrID: &types.AttributeValueMemberS{Value: s.recordID(key)}}
}

func millis(t time.Time) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(t.UnixMilli(), 10)}
}

// ttlSeconds rounds up, so TTL never removes a lock before it has expired.
func ttlSeconds(t time.Time) types.AttributeValue {
	sec := t.Unix()
	if t.After(time.Unix(sec, 0)) {
		sec++
	}
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(sec, 10)}
}

func stringAttr(item map[string]types.AttributeValue, name string) string {
	if v, ok := item[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func numberAttr(item map[string]types.AttributeValue, name string) int64 {
	if v, ok := item[name].(*types.AttributeValueMemberN); ok {
		n, _ := strconv.ParseInt(v.Value, 10, 64)
		return n
	}
	return 0
}

func randomOwner() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}
