package dynamostore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/sqs-once/sqs-once/sqsonce/store"
)

// DynamoDB's limits on one TransactWriteItems: 100 actions, one of them
// the record's completion, and 4 MB of items in all.
const (
	// MaxWrites is the most writes a work may add to its transaction.
	MaxWrites = 99
	// MaxTransactionBytes is the aggregate size of a transaction's items,
	// as DynamoDB counts it (attribute names plus values).
	MaxTransactionBytes = 4 << 20
)

// TxAPI is what a transactional store (NewTransactional) needs of the
// client beyond API: the one call that commits the work's writes with the
// record's completion. *dynamodb.Client implements it. API is unchanged, so
// a fake or a wrapper of the client for the plain store need not have it.
type TxAPI interface {
	API
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
}

var (
	_                   TxAPI            = (*dynamodb.Client)(nil)
	_                   store.Transactor = (*Store)(nil)
	_                   store.Tx         = (*transaction)(nil)
	errNotTransactional                  = errors.New("the store was built by dynamostore.New, whose completion is a plain UpdateItem: build it with dynamostore.NewTransactional (a client with TransactWriteItems) for the work's writes to commit with it")
)

// NewTransactional returns the store on table through api whose locks'
// work may add its own writes (Add): Put, Update, Delete and
// ConditionCheck, on any table of the same account and region as the
// record's. They commit with the record's completion in one
// TransactWriteItems, the record's part conditioned on the lock's owner and
// fence: both or neither. A work that adds nothing completes as on a store
// from New, at the same cost.
//
// A transactional write costs twice the write capacity of a plain one
// (DynamoDB prepares and commits each item), for the record's completion
// and for each of the work's writes. A transaction holds at most MaxWrites
// of the work's writes beside the record's, and MaxTransactionBytes of
// items in all. The business tables must be in the same account and region
// as the record table: a transaction spans one. Check also verifies that
// the endpoint has TransactWriteItems (dynalite has not).
//
// A lost answer to the commit is settled without applying the writes
// twice: the SDK's retries carry a ClientRequestToken derived from the
// record, its owner and fence, and past the token's lifetime (10 minutes)
// or where it is ignored, the record's condition refuses the repeat and
// one strongly consistent GetItem of the record recognises the commit as
// the lock's own. The same token with other items (only another
// transaction of the same lease could send them) is DynamoDB's
// IdempotentParameterMismatchException: nothing of it applied, and the
// commit fails with store.ErrNotCommitted.
func NewTransactional(api TxAPI, table string) *Store {
	return &Store{api: api, txAPI: api, table: table}
}

// Begin implements store.Transactor: the transaction of lease's work, to
// which Add adds writes. It makes no call. On a store from New, Add refuses
// every write, so the transaction stays empty and the completion is the
// plain one.
func (s *Store) Begin(lease store.Lease) store.Tx {
	if s.txAPI == nil {
		// No allocation on the plain store's hot path: a zero-size value.
		return plainTx{}
	}
	return &transaction{s: s, lease: lease}
}

// plainTx is the transaction of a store from New: Add refuses every write,
// so it is always empty and never committed.
type plainTx struct{}

func (plainTx) Seal()                          {}
func (plainTx) Empty() bool                    { return true }
func (plainTx) Rollback(context.Context) error { return nil }
func (plainTx) Commit(context.Context, store.Completion) error {
	return fmt.Errorf("commit: %w: %w", errNotTransactional, store.ErrNotCommitted)
}

// transaction is the store's store.Tx: the work's writes, committed with
// the record's completion in one TransactWriteItems.
type transaction struct {
	s     *Store
	lease store.Lease

	mu     sync.Mutex
	writes []types.TransactWriteItem
	bytes  int
	// sealed once the work returned (Seal, Commit, Rollback): nothing
	// more may be added.
	sealed bool
	// done once rolled back: nothing may be committed.
	done bool
}

// Add adds the work's writes to the transaction in ctx (the one sqsonce
// begins for each lock on a store from NewTransactional, or on the
// in-memory store: store.TxFrom), to commit with the record's completion:
// each write has exactly one of Put, Update, Delete and ConditionCheck, on
// any table of the record table's account and region. A condition of the
// work's own that fails at the commit fails the work: sqsonce releases the
// lock, and its error is a *store.EffectError wrapping the SDK's
// *types.TransactionCanceledException, whose CancellationReasons list the
// writes in the order added (the record's last).
//
// Add refuses, before any call and adding none of writes, with an error
// naming the limit: no transaction in ctx (the work does not run under
// sqsonce on a store.Transactor, or is the work of a Do on a store
// without transactions, nested in another's: its writes would be the
// outer lock's); the work has returned (store.ErrTxEnded: a goroutine it
// left behind); a store from New; more than MaxWrites
// writes in all; items over MaxTransactionBytes in all (estimated by
// DynamoDB's size rules: a Put's item, an Update's key and values, a
// Delete's or ConditionCheck's key); a write with no action or more than
// one; a write to the lock's own record.
//
// On the in-memory store (memstore), Add stages each write in its
// transaction instead, so that a test of the work runs with no AWS and
// sees what it wrote, and whether it committed, in memstore's Committed.
func Add(ctx context.Context, writes ...types.TransactWriteItem) error {
	switch tx := store.TxFrom(ctx).(type) {
	case *transaction:
		return tx.add(writes)
	case plainTx:
		return fmt.Errorf("dynamostore.Add: %w", errNotTransactional)
	case stager:
		return stage(tx, writes)
	case nil:
		return errors.New("dynamostore.Add: no transaction in the context: the work must run under sqsonce (Handle, Do or DoResult) on a store that has transactions, dynamostore.NewTransactional or memstore, and be given the context sqsonce passes it (the work of a Do nested in another's has its own lock's transaction, none on a store without transactions)")
	default:
		return fmt.Errorf("dynamostore.Add: the transaction in the context is a %T, another store's: the work's writes go through that store's own helper", tx)
	}
}

// add checks writes and adds them, or none of them.
func (t *transaction) add(writes []types.TransactWriteItem) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.sealed {
		return fmt.Errorf("dynamostore.Add: record %q: %w", t.lease.ID, store.ErrTxEnded)
	}
	_, bytes, err := checkWrites(len(t.writes), t.bytes, writes, t.s.table, t.lease.ID)
	if err != nil {
		return err
	}
	t.writes = append(t.writes, writes...)
	t.bytes = bytes
	return nil
}

// stager is the in-memory store's transaction (memstore.Tx), which keeps
// writes of any kind: named by its methods, so that this package does not
// link a test store into every program that uses it.
type stager interface {
	Add(write any) error
	Writes() []any
}

// stage adds writes to a memstore transaction, under the limits Add
// applies on DynamoDB, so that a test on memstore fails where DynamoDB
// would. The transaction refuses them once sealed; a work's writes are
// added one at a time, so a seal between two of them leaves the earlier
// ones to commit and refuses the rest, as a seal between two calls of Add
// does: the work itself has returned, only a goroutine of it is adding.
func stage(tx stager, writes []types.TransactWriteItem) error {
	count, size := 0, 0
	for _, w := range tx.Writes() {
		if item, ok := w.(types.TransactWriteItem); ok {
			count++
			size += writeSize(item)
		}
	}
	if _, _, err := checkWrites(count, size, writes, "", ""); err != nil {
		return err
	}
	for _, w := range writes {
		if err := tx.Add(w); err != nil {
			return fmt.Errorf("dynamostore.Add: %w", err)
		}
	}
	return nil
}

// checkWrites checks writes against the limits, given the count and bytes
// already added, and returns the new totals. recordTable and recordID,
// when set, name the lock's record, which no write may touch.
func checkWrites(count, bytes int, writes []types.TransactWriteItem, recordTable, recordID string) (int, int, error) {
	if count+len(writes) > MaxWrites {
		return count, bytes, fmt.Errorf("dynamostore.Add: %d writes in one transaction, over the limit of %d (DynamoDB's 100 actions of a TransactWriteItems, one of them the record's completion): split the work, or write the rest outside the transaction", count+len(writes), MaxWrites)
	}
	for i, w := range writes {
		table, key, err := target(w)
		if err != nil {
			return count, bytes, fmt.Errorf("dynamostore.Add: write %d of %d: %w", i+1, len(writes), err)
		}
		if recordTable != "" && table == recordTable && stringAttr(key, AttrID) == recordID {
			return count, bytes, fmt.Errorf("dynamostore.Add: write %d of %d is to the lock's own record %q in table %s: the completion writes that item, and a transaction writes an item once", i+1, len(writes), recordID, table)
		}
		bytes += writeSize(w)
	}
	if bytes > MaxTransactionBytes {
		return count, bytes, fmt.Errorf("dynamostore.Add: the transaction's items come to about %d bytes, over DynamoDB's aggregate limit of 4 MB (%d bytes) for a TransactWriteItems: write the large items outside the transaction", bytes, MaxTransactionBytes)
	}
	return count + len(writes), bytes, nil
}

// target is the table and key of w's one action, or an error when w has
// none or more than one.
func target(w types.TransactWriteItem) (string, map[string]types.AttributeValue, error) {
	var actions []string
	var table *string
	var key map[string]types.AttributeValue
	if w.Put != nil {
		actions, table, key = append(actions, "Put"), w.Put.TableName, w.Put.Item
	}
	if w.Update != nil {
		actions, table, key = append(actions, "Update"), w.Update.TableName, w.Update.Key
	}
	if w.Delete != nil {
		actions, table, key = append(actions, "Delete"), w.Delete.TableName, w.Delete.Key
	}
	if w.ConditionCheck != nil {
		actions, table, key = append(actions, "ConditionCheck"), w.ConditionCheck.TableName, w.ConditionCheck.Key
	}
	switch {
	case len(actions) == 0:
		return "", nil, errors.New("no action: set one of Put, Update, Delete and ConditionCheck")
	case len(actions) > 1:
		return "", nil, fmt.Errorf("%d actions (%v): a TransactWriteItem has exactly one", len(actions), actions)
	case aws.ToString(table) == "":
		return "", nil, fmt.Errorf("a %s without a TableName", actions[0])
	}
	return aws.ToString(table), key, nil
}

// writeSize estimates the bytes w's item counts for against the
// transaction's 4 MB: a Put's item; an Update's key and the values it
// writes; a Delete's or ConditionCheck's key.
func writeSize(w types.TransactWriteItem) int {
	switch {
	case w.Put != nil:
		return itemSize(w.Put.Item)
	case w.Update != nil:
		n := itemSize(w.Update.Key)
		for _, v := range w.Update.ExpressionAttributeValues {
			n += valueSize(v)
		}
		return n
	case w.Delete != nil:
		return itemSize(w.Delete.Key)
	case w.ConditionCheck != nil:
		return itemSize(w.ConditionCheck.Key)
	}
	return 0
}

// itemSize is an item's size by DynamoDB's rules: each attribute's name
// (UTF-8 bytes) plus its value.
func itemSize(item map[string]types.AttributeValue) int {
	n := 0
	for name, v := range item {
		n += len(name) + valueSize(v)
	}
	return n
}

// valueSize is a value's size by DynamoDB's rules: a string's UTF-8 bytes,
// a binary's bytes, a number's at most 21 (about one byte per two
// significant digits, plus one), 1 for a Boolean or null, and for a list or
// map 3 bytes plus one per element plus the elements (and a map's names).
func valueSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return numberSize(v.Value)
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberSS:
		n := 0
		for _, s := range v.Value {
			n += len(s)
		}
		return n
	case *types.AttributeValueMemberNS:
		n := 0
		for _, s := range v.Value {
			n += numberSize(s)
		}
		return n
	case *types.AttributeValueMemberBS:
		n := 0
		for _, b := range v.Value {
			n += len(b)
		}
		return n
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += 1 + valueSize(e)
		}
		return n
	case *types.AttributeValueMemberM:
		n := 3
		for name, e := range v.Value {
			n += 1 + len(name) + valueSize(e)
		}
		return n
	}
	return 0
}

// numberSize counts a number as DynamoDB does, rounded up: one byte per
// two significant digits, plus one, at most 21.
func numberSize(s string) int {
	digits := 0
	for _, r := range s {
		if r >= '0' && r <= '9' {
			digits++
		}
	}
	return min((digits+1)/2+1, 21)
}

// Seal implements store.Tx.
func (t *transaction) Seal() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sealed = true
}

// Empty implements store.Tx.
func (t *transaction) Empty() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.writes) == 0
}

// Rollback implements store.Tx: the writes were never sent, so it only
// drops them.
func (t *transaction) Rollback(context.Context) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.writes, t.bytes, t.sealed, t.done = nil, 0, true, true
	return nil
}

// Commit implements store.Tx: one TransactWriteItems of the work's writes
// and the record's completion (COMPLETED until until, result stored, the
// lock expiry removed) under the condition that the record is still the
// lease's PROCESSING lock, owner and fence. The condition refuses a repeat
// of an applied commit too, so the writes never apply twice, even where
// the ClientRequestToken is ignored (moto); what an error leaves unclear,
// one strongly consistent read of the record settles.
func (t *transaction) Commit(ctx context.Context, c store.Completion) error {
	t.mu.Lock()
	t.sealed = true
	writes, done := t.writes, t.done
	t.mu.Unlock()
	if done {
		return fmt.Errorf("commit %q: the transaction was rolled back: %w", t.lease.ID, store.ErrNotCommitted)
	}
	s := t.s
	expr := commitExpression(t.lease, c)
	items := make([]types.TransactWriteItem, 0, len(writes)+1)
	items = append(items, writes...)
	items = append(items, types.TransactWriteItem{Update: &types.Update{
		TableName:                           aws.String(s.table),
		Key:                                 s.key(t.lease.ID),
		ConditionExpression:                 expr.Condition(),
		UpdateExpression:                    expr.Update(),
		ExpressionAttributeNames:            expr.Names(),
		ExpressionAttributeValues:           expr.Values(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}})
	_, err := s.txAPI.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
		TransactItems:      items,
		ClientRequestToken: aws.String(requestToken(t.lease)),
	}, withinBudget(ctx))
	if err == nil {
		return nil
	}
	return t.settle(ctx, err, len(writes))
}

// Cancellation reasons' codes (types.CancellationReason.Code).
const (
	reasonNone            = "None"
	reasonConditionFailed = "ConditionalCheckFailed"
	reasonValidation      = "ValidationError"
)

// settle sorts a failed commit's error; the record's reason is the n-th.
func (t *transaction) settle(ctx context.Context, err error, n int) error {
	var api smithy.APIError
	if errors.As(err, &api) && api.ErrorCode() == "IdempotentParameterMismatchException" {
		// The token was used, within its 10 minutes, by a request with
		// other items: DynamoDB applied nothing of this one. Only another
		// transaction of the same lease can have used it (the token is the
		// lease's), never a repeat of this one, whose writes are sealed: so
		// this one cannot commit as it is, and reading the record would
		// mistake the other's commit for this one's.
		return &store.StoreError{Op: "commit", ID: t.lease.ID, Err: fmt.Errorf("%w: its ClientRequestToken was used by another request of the same lease with other items: %w", store.ErrNotCommitted, err)}
	}
	var canceled *types.TransactionCanceledException
	if errors.As(err, &canceled) {
		reasons := canceled.CancellationReasons
		record, user := "", false
		for i, r := range reasons {
			code := aws.ToString(r.Code)
			switch {
			case i == n:
				record = code
			case code == reasonConditionFailed:
				user = true
			case code == reasonValidation:
				return &store.StoreError{Op: "commit", ID: t.lease.ID, Err: t.s.named(misconfiguredError{err})}
			}
		}
		switch {
		case record == reasonConditionFailed:
			// Not the lease's lock any more, or our own commit applied
			// already and repeated.
			return t.recognise(ctx, err, false)
		case user && record == reasonNone:
			// The record's condition passed, the work's own failed: the
			// work's failure, unless this is a repeat of our own applied
			// commit, which may fail the work's conditions first.
			return t.recognise(ctx, err, true)
		case record == reasonValidation:
			return &store.StoreError{Op: "commit", ID: t.lease.ID, Err: t.s.named(misconfiguredError{err})}
		}
		// A conflict with another transaction, throttling, or reasons not
		// given: nothing was applied by this attempt, the record tells
		// whether an earlier one was.
	} else if misconfigured(err) {
		return &store.StoreError{Op: "commit", ID: t.lease.ID, Err: t.s.named(err)}
	}
	return t.recognise(ctx, err, false)
}

// recognise reads the record after err: our own commit, applied -> nil;
// refused by the work's own condition (effect) -> a *store.EffectError;
// still the lease's lock -> err as an unknown outcome (matching
// store.ErrUnavailable: Commit may be called again); anything else -> the
// lock lost. A read that fails leaves the outcome unknown.
func (t *transaction) recognise(ctx context.Context, err error, effect bool) error {
	rec, rerr := t.s.Read(ctx, t.lease.ID)
	var now *store.Record
	switch {
	case errors.Is(rerr, store.ErrNotFound):
	case rerr != nil:
		return &store.StoreError{Op: "commit", ID: t.lease.ID, Err: errors.Join(t.s.named(err), fmt.Errorf("reading the record after it: %w", rerr))}
	default:
		now = &rec
	}
	ours := now != nil && rec.Owner == t.lease.Owner && rec.Fence == t.lease.Fence
	switch {
	case ours && rec.Status == store.StatusCompleted:
		return nil
	case effect:
		return &store.EffectError{ID: t.lease.ID, Err: err}
	case ours && rec.Status == store.StatusProcessing:
		return &store.StoreError{Op: "commit", ID: t.lease.ID, Err: t.s.named(err)}
	}
	return lockLost("commit", t.lease, now)
}

// requestToken is the commit's ClientRequestToken: the same for every
// attempt of one lease's commit, another for any other lease, at most 36
// characters.
func requestToken(lease store.Lease) string {
	h := sha256.New()
	h.Write([]byte(lease.ID))
	h.Write([]byte{0})
	h.Write([]byte(lease.Owner))
	h.Write([]byte{0})
	h.Write([]byte(strconv.FormatInt(lease.Fence, 10)))
	return "sqso" + hex.EncodeToString(h.Sum(nil))[:32]
}
