package dynamostore

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

	"github.com/sqs-once/sqs-once/sqsonce/store"
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
	// attrOutbox is a COMPLETED record's staged messages not yet marked
	// sent (Binary, sqsonce's encoding).
	attrOutbox = "outbox"
)

// API is the part of the DynamoDB client the store's hot path uses (the
// lock's calls). *dynamodb.Client implements it, and AdminAPI too.
type API interface {
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
}

// AdminAPI is what the store's store.Admin methods (Forget, Locks) need of
// the client beyond API: calls the processor never makes, so a fake or a
// wrapper of the client for the hot path need not have them. Forget and
// Locks assert it of the client given to New.
type AdminAPI interface {
	API
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

var _ AdminAPI = (*dynamodb.Client)(nil)

// Store is the store.Store on a DynamoDB table: partition key "id"
// (String), TTL on "expiresAt". Every operation is one conditional call. A
// refused write reads the record it was refused by from the refusal
// (ReturnValuesOnConditionCheckFailure); only where the table does not
// return it (DynamoDB Local before 2.2 and other DynamoDB-compatible stores)
// does one strongly consistent GetItem read it, on that path alone.
type Store struct {
	api API
	// txAPI is api as a TxAPI on a store from NewTransactional, nil on one
	// from New: the work's writes are refused there.
	txAPI TxAPI
	table string
}

var (
	_ store.Store   = (*Store)(nil)
	_ store.Admin   = (*Store)(nil)
	_ store.Checker = (*Store)(nil)
)

// New returns the store on table through api.
func New(api API, table string) *Store {
	return &Store{api: api, table: table}
}

// Table is the table's name.
func (s *Store) Table() string { return s.table }

// Acquire implements store.Store.
func (s *Store) Acquire(ctx context.Context, req store.AcquireRequest) (store.Lease, error) {
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
			return store.Lease{}, &store.StoreError{Op: "acquire", ID: req.ID, Err: errors.New("refused twice, and the record read after each refusal does not hold the key: it changes under concurrent writers")}
		}
	}
}

// acquire is one attempt of Acquire; retry says the refusal was not
// explained by the record read after it.
func (s *Store) acquire(ctx context.Context, req store.AcquireRequest) (_ store.Lease, retry bool, _ error) {
	lease := store.Lease{ID: req.ID, Owner: req.Owner, LockExpiresAt: req.LockUntil}
	expr, err := acquireExpression(req)
	if err != nil {
		return store.Lease{}, false, err
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
	}, withinBudget(ctx))
	if err != nil {
		rec, exists, err := s.refusal(ctx, "acquire", req.ID, err)
		switch {
		case err != nil:
			return store.Lease{}, false, err
		case exists && rec.Status == store.StatusProcessing && rec.Owner == req.Owner:
			// Our own attempt, applied and retried: it already added one.
			lease.Fence = rec.Fence
			return lease, false, nil
		case !exists || !rec.Blocks(req.Now):
			return store.Lease{}, true, nil
		}
		return store.Lease{}, false, &store.HeldError{Record: rec}
	}
	lease.TookOver = len(out.Attributes) > 0 && store.Status(stringAttr(out.Attributes, AttrStatus)) != store.StatusReleased
	if old, ok := numberAttrOK(out.Attributes, attrFence); ok {
		lease.Fence = old + 1
	} else {
		lease.Fence = store.FenceSeed(req.Now) + 1
	}
	return lease, false, nil
}

// Renew implements store.Store. A repeat of an applied renewal passes its
// condition again: it sets the same expiry.
func (s *Store) Renew(ctx context.Context, lease store.Lease, lockUntil time.Time) (store.Lease, error) {
	if err := s.ownedUpdate(ctx, "renew", lease, renewExpression(lease.Owner, lockUntil)); err != nil {
		return lease, err
	}
	lease.LockExpiresAt = lockUntil
	return lease, nil
}

// Complete implements store.Store. A repeat of an applied completion passes its
// condition again (the owner is unchanged) and rewrites the same record.
func (s *Store) Complete(ctx context.Context, lease store.Lease, c store.Completion) error {
	return s.ownedUpdate(ctx, "complete", lease, completeExpression(lease.Owner, c))
}

// MarkSent implements store.Store: one UpdateItem that removes the
// outbox under the condition that the record is still rec's completion
// (COMPLETED, owner and fence). A refusal is read (from the refusal, or
// one GetItem where the table returns none): a record that is gone is a
// success, any other store.ErrRecordChanged.
func (s *Store) MarkSent(ctx context.Context, rec store.Record) error {
	expr := markSentExpression(rec)
	_, err := s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           aws.String(s.table),
		Key:                                 s.key(rec.ID),
		ConditionExpression:                 expr.Condition(),
		UpdateExpression:                    expr.Update(),
		ExpressionAttributeNames:            expr.Names(),
		ExpressionAttributeValues:           expr.Values(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}, withinBudget(ctx))
	if err == nil {
		return nil
	}
	now, exists, err := s.refusal(ctx, "mark sent", rec.ID, err)
	switch {
	case err != nil:
		return err
	case !exists:
		return nil
	}
	return &store.StoreError{Op: "mark sent", ID: rec.ID, Err: fmt.Errorf("%w: the record is %s, not the completion %s", store.ErrRecordChanged, now, rec)}
}

// Release implements store.Store.
func (s *Store) Release(ctx context.Context, lease store.Lease, now time.Time) error {
	return s.ownedUpdate(ctx, "release", lease, releaseExpression(lease.Owner, now))
}

// ownedUpdate applies update to the lease's record under cond, an owner
// condition. A refusal is store.ErrLockLost, except for a release whose record is
// gone or already released by the same owner (a repeat): only a release
// reads the record where the refusal names none, since only there does it
// decide anything.
func (s *Store) ownedUpdate(ctx context.Context, op string, lease store.Lease, expr storeExpr) error {
	_, err := s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           aws.String(s.table),
		Key:                                 s.key(lease.ID),
		ConditionExpression:                 expr.Condition(),
		UpdateExpression:                    expr.Update(),
		ExpressionAttributeNames:            expr.Names(),
		ExpressionAttributeValues:           expr.Values(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}, withinBudget(ctx))
	if err == nil {
		return nil
	}
	if op != "release" {
		// Lost whatever holds the record now: read nothing more than the
		// refusal carries (a table that returns no item says no more).
		var ccf *types.ConditionalCheckFailedException
		if !errors.As(err, &ccf) {
			return &store.StoreError{Op: op, ID: lease.ID, Err: s.named(err)}
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
	case !exists || rec.Status == store.StatusReleased && rec.Owner == lease.Owner:
		return nil
	}
	return lockLost(op, lease, &rec)
}

// Read implements store.Store.
func (s *Store) Read(ctx context.Context, id string) (store.Record, error) {
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.table), Key: s.key(id), ConsistentRead: aws.Bool(true),
	}, withinBudget(ctx))
	if err != nil {
		return store.Record{}, &store.StoreError{Op: "read", ID: id, Err: s.named(err)}
	}
	if len(out.Item) == 0 {
		return store.Record{}, fmt.Errorf("record %q in table %s: %w", id, s.table, store.ErrNotFound)
	}
	return parseRecord(out.Item)
}

// admin is the client as an AdminAPI, or an error saying it is not one.
func (s *Store) admin(op string) (AdminAPI, error) {
	a, ok := s.api.(AdminAPI)
	if !ok {
		return nil, fmt.Errorf("dynamostore: %s on table %s: the store's DynamoDB client, a %T, has no DeleteItem and Scan; give New a *dynamodb.Client, or a wrapper that has both", op, s.table, s.api)
	}
	return a, nil
}

// Forget implements store.Admin.
func (s *Store) Forget(ctx context.Context, rec store.Record) error {
	api, err := s.admin("forget")
	if err != nil {
		return err
	}
	expr := forgetExpression(rec.Owner)
	_, err = api.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: aws.String(s.table), Key: s.key(rec.ID),
		ConditionExpression: expr.Condition(), ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}, withinBudget(ctx))
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
	return fmt.Errorf("record %q was %s when read and is now %s: %w", rec.ID, rec, now, store.ErrRecordChanged)
}

// Locks implements store.Admin: it scans the table, page by page, calling
// progress with the items scanned so far. A scan reads the whole table: its
// cost is the table's size.
func (s *Store) Locks(ctx context.Context, prefix string, progress func(scanned, found int)) ([]store.Record, error) {
	api, err := s.admin("scan")
	if err != nil {
		return nil, err
	}
	expr := locksExpression(prefix)
	in := &dynamodb.ScanInput{
		TableName: aws.String(s.table), FilterExpression: expr.Filter(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		ConsistentRead: aws.Bool(true),
	}
	var locks []store.Record
	scanned := 0
	for p := dynamodb.NewScanPaginator(api, in); p.HasMorePages(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			return locks, &store.StoreError{Op: "scan", ID: prefix + "#", Err: s.named(err)}
		}
		scanned += int(page.ScannedCount)
		for _, item := range page.Items {
			rec, err := parseRecord(item)
			if err != nil {
				// A lock the protocol did not write is still one an
				// operator must see.
				rec = store.Record{ID: stringAttr(item, AttrID), Status: store.StatusProcessing, Owner: stringAttr(item, attrOwner)}
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
// no record. Any error other than a refusal is a *store.StoreError.
func (s *Store) refusal(ctx context.Context, op, id string, err error) (rec store.Record, exists bool, _ error) {
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return store.Record{}, false, &store.StoreError{Op: op, ID: id, Err: s.named(err)}
	}
	if len(ccf.Item) > 0 {
		rec, err := parseRecord(ccf.Item)
		return rec, err == nil, err
	}
	rec, err = s.Read(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Record{}, false, nil
	}
	return rec, err == nil, err
}

// named adds the table to an error that does not say which table (a
// ResourceNotFoundException names none), and sorts it: what no retry fixes
// matches store.ErrMisconfigured.
func (s *Store) named(err error) error {
	err = fmt.Errorf("table %s: %w", s.table, err)
	if misconfigured(err) {
		return misconfiguredError{err}
	}
	return err
}

// parseRecord reads an item, refusing one the protocol did not write.
func parseRecord(item map[string]types.AttributeValue) (store.Record, error) {
	rec := store.Record{
		ID:          stringAttr(item, AttrID),
		Status:      store.Status(stringAttr(item, AttrStatus)),
		Owner:       stringAttr(item, attrOwner),
		Fence:       numberAttr(item, attrFence),
		PayloadHash: stringAttr(item, attrPayloadHash),
	}
	if v, ok := item[attrResult].(*types.AttributeValueMemberB); ok {
		rec.Result = v.Value
	}
	if v, ok := item[attrOutbox].(*types.AttributeValueMemberB); ok {
		rec.Outbox = v.Value
	}
	if n, ok := numberAttrOK(item, AttrExpiresAt); ok {
		rec.ExpiresAt = time.Unix(n, 0)
	}
	switch rec.Status {
	case store.StatusProcessing:
		n, ok := numberAttrOK(item, attrLockExpiresAt)
		if !ok {
			return rec, &store.RecordError{ID: rec.ID, Problem: fmt.Sprintf("a %s record without a numeric %s", rec.Status, attrLockExpiresAt)}
		}
		rec.LockExpiresAt = time.UnixMilli(n)
	case store.StatusCompleted:
		if _, ok := numberAttrOK(item, AttrExpiresAt); !ok {
			return rec, &store.RecordError{ID: rec.ID, Problem: fmt.Sprintf("a %s record without a numeric %s", rec.Status, AttrExpiresAt)}
		}
	case store.StatusReleased:
	default:
		return rec, &store.RecordError{ID: rec.ID, Problem: fmt.Sprintf("%s is %q, not %s, %s or %s", AttrStatus, rec.Status, store.StatusProcessing, store.StatusCompleted, store.StatusReleased)}
	}
	return rec, nil
}

func (s *Store) key(id string) map[string]types.AttributeValue {
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
