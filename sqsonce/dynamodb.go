package sqsonce

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqs-once/sqs-once/internal/retrybudget"
)

// The table's schema: the one place it is declared. The partition key is
// AttrID (String); the TTL attribute is AttrExpiresAt.
const (
	// AttrID is the partition key: the record id, "<prefix>#<key>".
	AttrID = "id"
	// AttrStatus is the record's Status.
	AttrStatus = "status"
	// AttrExpiresAt is the TTL attribute, in epoch seconds: a COMPLETED
	// record's window end, or when a lock's record may be deleted.
	AttrExpiresAt     = "expiresAt"
	attrLockExpiresAt = "lockExpiresAt" // epoch milliseconds
	attrOwner         = "owner"
	// attrFence grows by one with every acquisition of the record; a new
	// record starts from the acquirer's clock in milliseconds.
	attrFence = "fence"
	// attrPayloadHash is the hash of the message the lock was taken for.
	attrPayloadHash = "payloadHash"
	// attrResult is a COMPLETED record's stored result (Binary).
	attrResult = "result"
)

// DynamoDBAPI is the part of the DynamoDB client the store uses.
// *dynamodb.Client implements it.
type DynamoDBAPI interface {
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

var _ DynamoDBAPI = (*dynamodb.Client)(nil)

// DynamoDBStore is the Store on a DynamoDB table: partition key "id"
// (String), TTL on "expiresAt". Every operation is one conditional call. A
// refused write reads the record it was refused by from the refusal
// (ReturnValuesOnConditionCheckFailure); only where the table does not
// return it (DynamoDB Local before 2.2 and other DynamoDB-compatible stores)
// does one strongly consistent GetItem read it, on that path alone.
type DynamoDBStore struct {
	api   DynamoDBAPI
	table string
}

var _ Store = (*DynamoDBStore)(nil)

// NewDynamoDBStore returns the Store on table through api.
func NewDynamoDBStore(api DynamoDBAPI, table string) *DynamoDBStore {
	return &DynamoDBStore{api: api, table: table}
}

// Table is the table's name.
func (s *DynamoDBStore) Table() string { return s.table }

// Acquire implements Store.
func (s *DynamoDBStore) Acquire(ctx context.Context, req AcquireRequest) (Lease, error) {
	// A second attempt only where the table returned no item with its
	// refusal and the record read after it no longer blocks: it was
	// released, expired or deleted in between.
	for attempt := 1; ; attempt++ {
		lease, retry, err := s.acquire(ctx, req)
		if !retry {
			return lease, err
		}
		if attempt == 2 {
			// Not in progress: nobody may hold the key, and a message
			// dropped as in progress (IN_PROGRESS=drop) would be lost. The
			// caller retries later.
			return Lease{}, &StoreError{Op: "acquire", ID: req.ID, Err: errors.New("refused twice, and the record read after each refusal does not hold the key: it changes under concurrent writers")}
		}
	}
}

// acquire is one attempt of Acquire; retry says the refusal was not
// explained by the record read after it.
func (s *DynamoDBStore) acquire(ctx context.Context, req AcquireRequest) (_ Lease, retry bool, _ error) {
	lease := Lease{ID: req.ID, Owner: req.Owner, LockExpiresAt: req.LockUntil}
	expr, err := acquireExpression(req)
	if err != nil {
		return Lease{}, false, err
	}
	out, err := s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           aws.String(s.table),
		Key:                                 s.key(req.ID),
		ConditionExpression:                 expr.Condition(),
		UpdateExpression:                    expr.Update(),
		ExpressionAttributeNames:            expr.Names(),
		ExpressionAttributeValues:           expr.Values(),
		ReturnValues:                        types.ReturnValueAllOld,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}, retrybudget.DynamoDB(ctx))
	if err != nil {
		rec, exists, err := s.refusal(ctx, "acquire", req.ID, err)
		switch {
		case err != nil:
			return Lease{}, false, err
		case exists && rec.Status == StatusProcessing && rec.Owner == req.Owner:
			// Our own attempt, applied and retried: it already added one.
			lease.Fence = rec.Fence
			return lease, false, nil
		case !exists || !rec.Blocks(req.Now):
			return Lease{}, true, nil
		}
		return Lease{}, false, &HeldError{Record: rec}
	}
	lease.TookOver = len(out.Attributes) > 0 && Status(stringAttr(out.Attributes, AttrStatus)) != StatusReleased
	if old, ok := numberAttrOK(out.Attributes, attrFence); ok {
		lease.Fence = old + 1
	} else {
		lease.Fence = FenceSeed(req.Now) + 1
	}
	return lease, false, nil
}

// Renew implements Store. A repeat of an applied renewal passes its
// condition again: it sets the same expiry.
func (s *DynamoDBStore) Renew(ctx context.Context, lease Lease, lockUntil time.Time) (Lease, error) {
	if err := s.ownedUpdate(ctx, "renew", lease, renewExpression(lease.Owner, lockUntil)); err != nil {
		return lease, err
	}
	lease.LockExpiresAt = lockUntil
	return lease, nil
}

// Complete implements Store. A repeat of an applied completion passes its
// condition again (the owner is unchanged) and rewrites the same record.
func (s *DynamoDBStore) Complete(ctx context.Context, lease Lease, until time.Time, result []byte) error {
	return s.ownedUpdate(ctx, "complete", lease, completeExpression(lease.Owner, until, result))
}

// Release implements Store.
func (s *DynamoDBStore) Release(ctx context.Context, lease Lease, now time.Time) error {
	return s.ownedUpdate(ctx, "release", lease, releaseExpression(lease.Owner, now))
}

// ownedUpdate applies update to the lease's record under cond, an owner
// condition. A refusal is ErrLockLost, except for a release whose record is
// gone or already released by the same owner (a repeat): only a release
// reads the record where the refusal names none, since only there does it
// decide anything.
func (s *DynamoDBStore) ownedUpdate(ctx context.Context, op string, lease Lease, expr storeExpr) error {
	_, err := s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           aws.String(s.table),
		Key:                                 s.key(lease.ID),
		ConditionExpression:                 expr.Condition(),
		UpdateExpression:                    expr.Update(),
		ExpressionAttributeNames:            expr.Names(),
		ExpressionAttributeValues:           expr.Values(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}, retrybudget.DynamoDB(ctx))
	if err == nil {
		return nil
	}
	if op != "release" {
		// Lost whatever holds the record now: read nothing more than the
		// refusal carries (a table that returns no item says no more).
		var ccf *types.ConditionalCheckFailedException
		if !errors.As(err, &ccf) {
			return &StoreError{Op: op, ID: lease.ID, Err: s.named(err)}
		}
		if rec, perr := parseRecord(ccf.Item); len(ccf.Item) > 0 && perr == nil {
			return lockLost(op, lease, &rec)
		}
		return lockLost(op, lease, nil)
	}
	rec, exists, err := s.refusal(ctx, op, lease.ID, err)
	switch {
	case err != nil:
		return err
	case !exists || rec.Status == StatusReleased && rec.Owner == lease.Owner:
		return nil
	}
	return lockLost(op, lease, &rec)
}

// Read implements Store.
func (s *DynamoDBStore) Read(ctx context.Context, id string) (Record, error) {
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.table), Key: s.key(id), ConsistentRead: aws.Bool(true),
	}, retrybudget.DynamoDB(ctx))
	if err != nil {
		return Record{}, &StoreError{Op: "read", ID: id, Err: s.named(err)}
	}
	if len(out.Item) == 0 {
		return Record{}, fmt.Errorf("record %q in table %s: %w", id, s.table, ErrNotFound)
	}
	return parseRecord(out.Item)
}

// Forget implements Store.
func (s *DynamoDBStore) Forget(ctx context.Context, rec Record) error {
	expr := forgetExpression(rec.Owner)
	_, err := s.api.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: aws.String(s.table), Key: s.key(rec.ID),
		ConditionExpression: expr.Condition(), ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}, retrybudget.DynamoDB(ctx))
	if err == nil {
		return nil
	}
	now, exists, err := s.refusal(ctx, "forget", rec.ID, err)
	switch {
	case err != nil:
		return err
	case !exists:
		// Gone: this call's own delete whose answer was lost and retried,
		// or another operator's; either way the key is forgotten.
		return nil
	}
	return fmt.Errorf("record %q was %s when read and is now %s: %w", rec.ID, rec, now, ErrRecordChanged)
}

// Locks scans the table for the PROCESSING records whose ids start with
// prefix+"#", page by page, calling progress (when not nil) with the items
// scanned so far; the earliest expiry first. A scan reads the whole table:
// its cost is the table's size.
func (s *DynamoDBStore) Locks(ctx context.Context, prefix string, progress func(scanned, found int)) ([]Record, error) {
	expr := locksExpression(prefix)
	in := &dynamodb.ScanInput{
		TableName: aws.String(s.table), FilterExpression: expr.Filter(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		ConsistentRead: aws.Bool(true),
	}
	var locks []Record
	scanned := 0
	for p := dynamodb.NewScanPaginator(s.api, in); p.HasMorePages(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			return locks, &StoreError{Op: "scan", ID: prefix + "#", Err: s.named(err)}
		}
		scanned += int(page.ScannedCount)
		for _, item := range page.Items {
			rec, err := parseRecord(item)
			if err != nil {
				// A lock the protocol did not write is still one an
				// operator must see.
				rec = Record{ID: stringAttr(item, AttrID), Status: StatusProcessing, Owner: stringAttr(item, attrOwner)}
			}
			locks = append(locks, rec)
		}
		if progress != nil {
			progress(scanned, len(locks))
		}
	}
	sort.SliceStable(locks, func(i, j int) bool { return locks[i].LockExpiresAt.Before(locks[j].LockExpiresAt) })
	return locks, nil
}

// refusal reads what a refused conditional write was refused by: the
// record the refusal carries, or, where the table returned none, the
// record as one consistent GetItem reads it. exists is false when there is
// no record. Any error other than a refusal is a *StoreError.
func (s *DynamoDBStore) refusal(ctx context.Context, op, id string, err error) (rec Record, exists bool, _ error) {
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return Record{}, false, &StoreError{Op: op, ID: id, Err: s.named(err)}
	}
	if len(ccf.Item) > 0 {
		rec, err := parseRecord(ccf.Item)
		return rec, err == nil, err
	}
	rec, err = s.Read(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return Record{}, false, nil
	}
	return rec, err == nil, err
}

// named adds the table to an error that does not say which table (a
// ResourceNotFoundException names none).
func (s *DynamoDBStore) named(err error) error {
	return fmt.Errorf("table %s: %w", s.table, err)
}

// parseRecord reads an item, refusing one the protocol did not write.
func parseRecord(item map[string]types.AttributeValue) (Record, error) {
	rec := Record{
		ID:          stringAttr(item, AttrID),
		Status:      Status(stringAttr(item, AttrStatus)),
		Owner:       stringAttr(item, attrOwner),
		Fence:       numberAttr(item, attrFence),
		PayloadHash: stringAttr(item, attrPayloadHash),
	}
	if v, ok := item[attrResult].(*types.AttributeValueMemberB); ok {
		rec.Result = v.Value
	}
	if n, ok := numberAttrOK(item, AttrExpiresAt); ok {
		rec.ExpiresAt = time.Unix(n, 0)
	}
	switch rec.Status {
	case StatusProcessing:
		n, ok := numberAttrOK(item, attrLockExpiresAt)
		if !ok {
			return rec, &RecordError{ID: rec.ID, Problem: fmt.Sprintf("a %s record without a numeric %s", rec.Status, attrLockExpiresAt)}
		}
		rec.LockExpiresAt = time.UnixMilli(n)
	case StatusCompleted:
		if _, ok := numberAttrOK(item, AttrExpiresAt); !ok {
			return rec, &RecordError{ID: rec.ID, Problem: fmt.Sprintf("a %s record without a numeric %s", rec.Status, AttrExpiresAt)}
		}
	case StatusReleased:
	default:
		return rec, &RecordError{ID: rec.ID, Problem: fmt.Sprintf("%s is %q, not %s, %s or %s", AttrStatus, rec.Status, StatusProcessing, StatusCompleted, StatusReleased)}
	}
	return rec, nil
}

func (s *DynamoDBStore) key(id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{AttrID: &types.AttributeValueMemberS{Value: id}}
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
