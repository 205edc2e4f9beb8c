package ops

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqs-once/sqs-once/internal/dedupe"
)

// Attribute names of an idempotency record, as internal/dedupe writes them
// (README, "The processor"). dedupe exports only the id and status; the
// tests write records with dedupe.Store and read them here, so a rename on
// either side fails them.
const (
	attrLockExpiresAt = "lockExpiresAt" // epoch milliseconds
	attrExpiresAt     = "expiresAt"     // epoch seconds, the TTL attribute
	attrOwner         = "owner"
	attrFence         = "fence"
)

// Records reads and repairs the idempotency records of one table and prefix.
type Records struct {
	DB     DynamoAPI
	Table  string
	Prefix string
	// Now is the clock lock expiry is judged by; injected so tests need not
	// sleep for a lock to expire.
	Now func() time.Time
}

// Record is one key's record, read back in plain terms.
type Record struct {
	Key      string        `json:"key"`
	RecordID string        `json:"recordId"`
	Status   dedupe.Status `json:"status"`
	Owner    string        `json:"owner,omitempty"`
	Fence    int64         `json:"fence"`
	// LockExpiresAt is set on a PROCESSING record.
	LockExpiresAt *time.Time `json:"lockExpiresAt,omitempty"`
	// ExpiresAt is the TTL: the end of a COMPLETED record's dedupe window;
	// for a lock, when TTL may delete the record (an hour after the lock).
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
	// Live is set on a PROCESSING record whose lock has not expired: a
	// holder may be running the handler right now.
	Live bool `json:"live"`
	// Remaining is the time left on a live lock, or in an open dedupe window.
	Remaining time.Duration `json:"remainingNanos"`
}

func (r *Records) recordID(key string) string { return dedupe.RecordID(r.Prefix, key) }

func (r *Records) keyAttr(key string) map[string]ddbtypes.AttributeValue {
	return map[string]ddbtypes.AttributeValue{dedupe.AttrID: &ddbtypes.AttributeValueMemberS{Value: r.recordID(key)}}
}

// Get reads key's record, strongly consistent: an operator deciding to
// release a lock must see the latest write. No record is ErrNotFound.
func (r *Records) Get(ctx context.Context, key string) (Record, error) {
	if key == "" {
		return Record{}, fmt.Errorf("%w: empty key", ErrUsage)
	}
	out, err := r.DB.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(r.Table), Key: r.keyAttr(key), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return Record{}, awsError("read record "+r.recordID(key), err)
	}
	if len(out.Item) == 0 {
		return Record{}, fmt.Errorf("key %q (record id %s in table %s): %w: no record; the key was never processed under this prefix, or its record expired", key, r.recordID(key), r.Table, ErrNotFound)
	}
	return r.parse(key, out.Item), nil
}

func (r *Records) parse(key string, item map[string]ddbtypes.AttributeValue) Record {
	rec := Record{
		Key:      key,
		RecordID: stringAttr(item, dedupe.AttrID),
		Status:   dedupe.Status(stringAttr(item, dedupe.AttrStatus)),
		Owner:    stringAttr(item, attrOwner),
	}
	rec.Fence, _ = numberAttr(item, attrFence)
	now := r.Now()
	if n, ok := numberAttr(item, attrExpiresAt); ok {
		t := time.Unix(n, 0)
		rec.ExpiresAt = &t
	}
	if rec.Status == dedupe.StatusProcessing {
		if n, ok := numberAttr(item, attrLockExpiresAt); ok {
			t := time.UnixMilli(n)
			rec.LockExpiresAt = &t
			// The processor takes a lock over only once lockExpiresAt < now
			// (strictly), so a lock is live up to and including its expiry.
			rec.Live = !t.Before(now)
			if rec.Live {
				rec.Remaining = t.Sub(now)
			}
		} else {
			// A lock without an expiry is not one the protocol wrote:
			// treat it as live, the safe reading.
			rec.Live = true
		}
	}
	if rec.Status == dedupe.StatusCompleted && rec.ExpiresAt != nil && rec.ExpiresAt.After(now) {
		rec.Remaining = rec.ExpiresAt.Sub(now)
	}
	return rec
}

// LiveLockError is release's refusal of a lock that has not expired.
type LiveLockError struct{ Record Record }

func (e *LiveLockError) Error() string {
	return fmt.Sprintf("key %q is locked by owner %s (fence %d) for %s more, until %s: a processor may be running its handler right now. "+
		"Wait for the lock to expire (the processor then takes it over itself), or release it with --force. "+
		"--force risks a second side effect: another message with this key can run the handler while the holder is still running "+
		"(the holder learns it only at its next lock renewal, which cancels its handler as lock lost; a side effect already under way goes on)",
		e.Record.Key, e.Record.Owner, e.Record.Fence, e.Record.Remaining.Round(time.Second), e.Record.LockExpiresAt.UTC().Format(time.RFC3339))
}

func (e *LiveLockError) Is(target error) bool { return target == ErrRefused }

// StateError is a command refused because the record is not in the state
// the command is for.
type StateError struct {
	Record Record
	Want   dedupe.Status
	Hint   string
}

func (e *StateError) Error() string {
	return fmt.Sprintf("key %q is %s, not %s: %s", e.Record.Key, e.Record.Status, e.Want, e.Hint)
}

func (e *StateError) Is(target error) bool { return target == ErrRefused }

// Release frees a stuck PROCESSING lock. The write is conditional on the
// record still being the lock that was read (same owner and fence), so a
// lock taken over meanwhile is never touched. It returns the lock as it was
// read, before the release.
//
// It marks the record RELEASED, as the processor's own release does, rather
// than deleting it: the processor takes a RELEASED key at once, and the
// record keeps its fence, so the next holder's fence is still above the
// released holder's (a deleted record restarts from the clock; README,
// "Fencing token").
func (r *Records) Release(ctx context.Context, key string, force bool) (Record, error) {
	rec, err := r.Get(ctx, key)
	if err != nil {
		return Record{}, err
	}
	if rec.Status != dedupe.StatusProcessing {
		hint := "there is no lock to release"
		if rec.Status == dedupe.StatusCompleted {
			hint = "the key is done; `forget` it to let it run again"
		}
		return rec, &StateError{Record: rec, Want: dedupe.StatusProcessing, Hint: hint}
	}
	if rec.Live && !force {
		return rec, &LiveLockError{Record: rec}
	}
	now := r.Now()
	cond := expression.Name(dedupe.AttrStatus).Equal(expression.Value(string(dedupe.StatusProcessing))).
		And(expression.Name(attrOwner).Equal(expression.Value(rec.Owner))).
		And(expression.Name(attrFence).Equal(expression.Value(rec.Fence)))
	update := expression.Set(expression.Name(dedupe.AttrStatus), expression.Value(string(dedupe.StatusReleased))).
		Set(expression.Name(attrLockExpiresAt), expression.Value(0)).
		Set(expression.Name(attrExpiresAt), expression.Value(ceilUnix(now.Add(dedupe.FenceRetention))))
	expr, err := expression.NewBuilder().WithCondition(cond).WithUpdate(update).Build()
	if err != nil {
		return rec, err
	}
	_, err = r.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(r.Table), Key: r.keyAttr(key),
		ConditionExpression: expr.Condition(), UpdateExpression: expr.Update(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		ReturnValuesOnConditionCheckFailure: ddbtypes.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err != nil {
		var ccf *ddbtypes.ConditionalCheckFailedException
		if !errors.As(err, &ccf) {
			return rec, awsError("release "+rec.RecordID, err)
		}
		// The SDK retries a call whose answer was lost: finding the record
		// released with the same owner and fence is this call's own write.
		now := r.parse(key, ccf.Item)
		if now.Status == dedupe.StatusReleased && now.Owner == rec.Owner && now.Fence == rec.Fence {
			return rec, nil
		}
		return rec, changedError(rec, ccf.Item, r)
	}
	return rec, nil
}

// Forget deletes a COMPLETED record so that the key runs again. confirm is
// asked with the record read; false cancels with ErrDeclined. The delete is
// conditional on the record being the completion that was read, which it
// returns.
func (r *Records) Forget(ctx context.Context, key string, confirm func(Record) (bool, error)) (Record, error) {
	rec, err := r.Get(ctx, key)
	if err != nil {
		return Record{}, err
	}
	if rec.Status != dedupe.StatusCompleted {
		hint := "only a completed key can be forgotten"
		if rec.Status == dedupe.StatusProcessing {
			hint = "it is being processed or stuck; see `release`"
		}
		return rec, &StateError{Record: rec, Want: dedupe.StatusCompleted, Hint: hint}
	}
	ok, err := confirm(rec)
	if err != nil {
		return rec, err
	}
	if !ok {
		return rec, fmt.Errorf("forget %q: %w", key, ErrDeclined)
	}
	cond := expression.Name(dedupe.AttrStatus).Equal(expression.Value(string(dedupe.StatusCompleted))).
		And(expression.Name(attrOwner).Equal(expression.Value(rec.Owner))).
		And(expression.Name(attrFence).Equal(expression.Value(rec.Fence)))
	expr, err := expression.NewBuilder().WithCondition(cond).Build()
	if err != nil {
		return rec, err
	}
	_, err = r.DB.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: aws.String(r.Table), Key: r.keyAttr(key),
		ConditionExpression: expr.Condition(), ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		ReturnValuesOnConditionCheckFailure: ddbtypes.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err != nil {
		var ccf *ddbtypes.ConditionalCheckFailedException
		if !errors.As(err, &ccf) {
			return rec, awsError("forget "+rec.RecordID, err)
		}
		// Gone: this call's own delete whose answer was lost and retried,
		// or another operator's; either way the key is forgotten.
		if len(ccf.Item) == 0 {
			return rec, nil
		}
		return rec, changedError(rec, ccf.Item, r)
	}
	return rec, nil
}

func changedError(was Record, item map[string]ddbtypes.AttributeValue, r *Records) error {
	now := "gone"
	if len(item) > 0 {
		n := r.parse(was.Key, item)
		now = fmt.Sprintf("%s, owner %s, fence %d", n.Status, n.Owner, n.Fence)
	}
	return fmt.Errorf("key %q was %s (owner %s, fence %d) when read and is now %s: %w; nothing was written, inspect it again",
		was.Key, was.Status, was.Owner, was.Fence, now, ErrChanged)
}

// Locks scans the table for this prefix's PROCESSING records, page by page,
// calling progress with the items scanned so far. A scan reads the whole
// table (its cost is the table's size), which is why status does it only
// when asked.
func (r *Records) Locks(ctx context.Context, progress func(scanned, found int)) ([]Record, error) {
	filter := expression.Name(dedupe.AttrID).BeginsWith(r.Prefix + "#").
		And(expression.Name(dedupe.AttrStatus).Equal(expression.Value(string(dedupe.StatusProcessing))))
	expr, err := expression.NewBuilder().WithFilter(filter).Build()
	if err != nil {
		return nil, err
	}
	in := &dynamodb.ScanInput{
		TableName: aws.String(r.Table), FilterExpression: expr.Filter(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		ConsistentRead: aws.Bool(true),
	}
	var locks []Record
	scanned := 0
	p := dynamodb.NewScanPaginator(r.DB, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return locks, awsError("scan "+r.Table, err)
		}
		scanned += int(page.ScannedCount)
		for _, item := range page.Items {
			id := stringAttr(item, dedupe.AttrID)
			locks = append(locks, r.parse(strings.TrimPrefix(id, r.Prefix+"#"), item))
		}
		if progress != nil {
			progress(scanned, len(locks))
		}
	}
	sort.Slice(locks, func(i, j int) bool {
		a, b := locks[i].LockExpiresAt, locks[j].LockExpiresAt
		if a == nil || b == nil {
			return a == nil && b != nil
		}
		return a.Before(*b)
	})
	return locks, nil
}

func stringAttr(item map[string]ddbtypes.AttributeValue, name string) string {
	if v, ok := item[name].(*ddbtypes.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func numberAttr(item map[string]ddbtypes.AttributeValue, name string) (int64, bool) {
	v, ok := item[name].(*ddbtypes.AttributeValueMemberN)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(v.Value, 10, 64)
	return n, err == nil
}

// ceilUnix rounds up, as the processor does, so TTL never removes a record
// before its time.
func ceilUnix(t time.Time) int64 {
	sec := t.Unix()
	if t.After(time.Unix(sec, 0)) {
		sec++
	}
	return sec
}
