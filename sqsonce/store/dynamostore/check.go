package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/sqs-once/sqs-once/sqsonce/store"
)

// ErrNoTTL: the table deletes none of the processor's records, because TTL
// is off or on an attribute other than expiresAt. The processor still works
// (it treats an expired record as absent), but the table grows by a record
// for every key it ever saw. Processor.Check's error matches it.
var ErrNoTTL = errors.New("sqsonce: no TTL on " + AttrExpiresAt)

// tableDescriber is what Check needs of the DynamoDB store's client beyond
// API. API leaves both calls out because the hot path never
// makes them, so a fake or a wrapper of the client need not have them;
// *dynamodb.Client has both.
type tableDescriber interface {
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	DescribeTimeToLive(ctx context.Context, in *dynamodb.DescribeTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error)
}

// Check implements store.Checker: it reads the table's set-up once and
// returns an error that says what is wrong with it, or nil. Call it (or
// sqsonce's Processor.Check, which calls it) in a deploy step, a smoke test
// or an operator's tool, with credentials that may describe the table; not
// at a Lambda function's start-up, where it would add two calls to every
// cold start and need permissions the processor otherwise does without.
//
// It calls DescribeTable and DescribeTimeToLive (IAM actions
// dynamodb:DescribeTable and dynamodb:DescribeTimeToLive on the table) and
// reports, naming the table and, when the store's client is a
// *dynamodb.Client, its region:
//
//   - a table that does not exist, is not ACTIVE, or may not be described
//     (access denied);
//   - a partition key other than "id" of type String, or a sort key: every
//     write of the processor would be refused;
//   - TTL off, or on an attribute other than "expiresAt" (a warning: see
//     ErrNoTTL);
//   - on a store from NewTransactional, an endpoint without
//     TransactWriteItems (dynalite): one TransactWriteItems of no items,
//     which writes nothing, tells (IAM needs no more: DynamoDB authorizes
//     a transaction by its items' actions).
//
// The error matches store.ErrMisconfigured when the processor cannot work
// on the table as it is, ErrNoTTL when TTL is wrong (both when both are),
// and store.ErrUnavailable when a call failed in a way a retry may fix
// (throttled, no answer). A TTL problem alone fails Check too: a table that
// grows without bound is a cost someone should decide on. A caller that
// accepts one, as on a local emulator without TTL, tests for ErrNoTTL
// without store.ErrMisconfigured. The error unwraps to the SDK's errors. A
// client that has no DescribeTable and DescribeTimeToLive (a wrapper that
// embeds only API) cannot be checked: that is an error too, matching none
// of these.
func (s *Store) Check(ctx context.Context) error {
	r := &tableReport{table: s.table}
	if c, ok := s.api.(*dynamodb.Client); ok {
		r.region = c.Options().Region
	}
	d, ok := s.api.(tableDescriber)
	if !ok {
		return fmt.Errorf("sqsonce: %s not checked: the store's DynamoDB client, a %T, has no DescribeTable and DescribeTimeToLive; give New a *dynamodb.Client, or a wrapper that has both", r.where(), s.api)
	}
	table, err := d.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(s.table)}, withinBudget(ctx))
	if err != nil {
		// Nothing more to learn: no table, or no right to see it.
		r.failed("DescribeTable", err)
		return r.err()
	}
	r.schema(table.Table)
	ttl, err := d.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(s.table)}, withinBudget(ctx))
	if err != nil {
		r.failed("DescribeTimeToLive", err)
	} else {
		r.ttl(ttl.TimeToLiveDescription)
	}
	if s.txAPI != nil {
		r.transactions(ctx, s.txAPI)
	}
	return r.err()
}

// transactions checks that the endpoint of a transactional store has
// TransactWriteItems, with a request of no items, which writes nothing and
// consumes no capacity: DynamoDB refuses it as invalid (a ValidationException
// on its length), moto applies it, an endpoint without transactions
// (dynalite) answers UnknownOperationException.
func (r *tableReport) transactions(ctx context.Context, api TxAPI) {
	_, err := api.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{}}, withinBudget(ctx))
	var apiErr smithy.APIError
	switch {
	case err == nil:
	case errors.As(err, &apiErr) && apiErr.ErrorCode() == "ValidationException" && !unsupported(apiErr.ErrorMessage()):
		// Known, and refused for its empty list alone.
	case errors.As(err, &apiErr) && (apiErr.ErrorCode() == "UnknownOperationException" || apiErr.ErrorCode() == "ValidationException"):
		r.causes = append(r.causes, err)
		r.broken("the endpoint has no TransactWriteItems (%s: %s), which a store from dynamostore.NewTransactional commits the work's writes with: use DynamoDB, DynamoDB Local or moto_server (a local emulator without transactions, as dynalite, serves only dynamostore.New, where the work's writes are not transactional)", apiErr.ErrorCode(), apiErr.ErrorMessage())
	default:
		r.failed("TransactWriteItems", err)
	}
}

// unsupported reports whether a ValidationException's message says the
// operation is not supported, as some DynamoDB-compatible stores answer an
// operation they lack.
func unsupported(msg string) bool {
	msg = strings.ToLower(msg)
	return strings.Contains(msg, "not supported") || strings.Contains(msg, "unsupported") || strings.Contains(msg, "unknown operation")
}

// tableReport collects what check finds, each problem with its weight.
type tableReport struct {
	table, region string
	problems      []string
	// misconfigured, unavailable and noTTL say which sentinels the error
	// matches; causes are the SDK's errors behind the problems.
	misconfigured, unavailable, noTTL bool
	causes                            []error
}

// where names the table, and its region when known.
func (r *tableReport) where() string {
	if r.region == "" {
		return "table " + r.table
	}
	return "table " + r.table + " in region " + r.region
}

// broken records a problem that makes every write of the processor fail.
func (r *tableReport) broken(format string, args ...any) {
	r.misconfigured = true
	r.problems = append(r.problems, fmt.Sprintf(format, args...))
}

// warn records a TTL problem (the processor works, the table grows) and
// what to do about it; fix "" is the usual one: enable TTL on
// AttrExpiresAt.
func (r *tableReport) warn(problem, fix string) {
	r.noTTL = true
	if fix == "" {
		fix = "enable TTL on " + AttrExpiresAt + ": " + r.enableTTL()
	}
	r.problems = append(r.problems, "warning: "+problem+": nothing deletes the processor's records, so the table grows by one for every key (the processor still works, since it treats an expired record as absent); "+fix)
}

// enableTTL is the command that turns TTL on for the table.
func (r *tableReport) enableTTL() string {
	cmd := "aws dynamodb update-time-to-live --table-name " + r.table
	if r.region != "" {
		cmd += " --region " + r.region
	}
	return cmd + " --time-to-live-specification Enabled=true,AttributeName=" + AttrExpiresAt
}

// failed records a describe call's error.
func (r *tableReport) failed(op string, err error) {
	r.causes = append(r.causes, err)
	var notFound *types.ResourceNotFoundException
	var api smithy.APIError
	switch {
	case errors.As(err, &notFound):
		r.broken("no such table (%s: ResourceNotFoundException): create it with partition key %q (String) and TTL on %q (sqs-once's docs/table.md has the commands), or point the processor at the table's name and region", op, AttrID, AttrExpiresAt)
	case errors.As(err, &api) && api.ErrorCode() == "AccessDeniedException":
		r.broken("access denied to dynamodb:%s (%s): the credentials that run Check need dynamodb:DescribeTable and dynamodb:DescribeTimeToLive on the table; the processor itself needs neither", op, api.ErrorMessage())
	case op == "DescribeTimeToLive" && errors.As(err, &api) && api.ErrorCode() == "UnknownOperationException":
		r.warn("TTL unknown: the service has no DescribeTimeToLive, so most likely no TTL either", "a local emulator may lack it; on DynamoDB, enable TTL on "+AttrExpiresAt)
	case misconfigured(err):
		r.broken("%s: %v", op, err)
	default:
		r.unavailable = true
		r.problems = append(r.problems, fmt.Sprintf("%s failed, so the table is not fully checked; try again: %v", op, err))
	}
}

// keyTypes are the names of DynamoDB's key attribute types.
var keyTypes = map[types.ScalarAttributeType]string{
	types.ScalarAttributeTypeS: "S (String)",
	types.ScalarAttributeTypeN: "N (Number)",
	types.ScalarAttributeTypeB: "B (Binary)",
}

// schema checks the table's status and key schema against what the store
// writes: items addressed by AttrID alone, a String.
func (r *tableReport) schema(t *types.TableDescription) {
	if t == nil {
		r.broken("DescribeTable answered without a table description")
		return
	}
	switch t.TableStatus {
	case types.TableStatusActive, types.TableStatusUpdating, "":
		// Writable; "" is an emulator that does not say.
	default:
		r.broken("the table is %s, not ACTIVE: it takes no writes", t.TableStatus)
	}
	var partition, sort string
	for _, k := range t.KeySchema {
		switch k.KeyType {
		case types.KeyTypeHash:
			partition = aws.ToString(k.AttributeName)
		case types.KeyTypeRange:
			sort = aws.ToString(k.AttributeName)
		}
	}
	attrType := map[string]types.ScalarAttributeType{}
	for _, a := range t.AttributeDefinitions {
		attrType[aws.ToString(a.AttributeName)] = a.AttributeType
	}
	switch {
	case partition != AttrID:
		r.broken("the partition key is %q, not %q: every write of the processor names %q alone and is refused; create a table with partition key %q (String)", partition, AttrID, AttrID, AttrID)
	case attrType[AttrID] != types.ScalarAttributeTypeS:
		typ := keyTypes[attrType[AttrID]]
		if typ == "" {
			typ = fmt.Sprintf("%q", attrType[AttrID])
		}
		r.broken("the partition key %q is of type %s, not S (String): every write of the processor is refused", AttrID, typ)
	}
	if sort != "" {
		r.broken("the table has a sort key, %q: the processor addresses a record by %q alone, so every write is refused; create a table without a sort key", sort, AttrID)
	}
}

// ttl checks that TTL deletes by AttrExpiresAt. ENABLING counts: DynamoDB
// takes up to an hour to turn it on, and it needs nothing more.
func (r *tableReport) ttl(d *types.TimeToLiveDescription) {
	var status types.TimeToLiveStatus
	var attr string
	if d != nil {
		status, attr = d.TimeToLiveStatus, aws.ToString(d.AttributeName)
	}
	on := status == types.TimeToLiveStatusEnabled || status == types.TimeToLiveStatusEnabling
	switch {
	case on && attr == AttrExpiresAt:
	case on:
		// A table has one TTL attribute, and DynamoDB moves it only
		// through DISABLED.
		r.warn(fmt.Sprintf("TTL is on %q, not %q", attr, AttrExpiresAt), fmt.Sprintf(
			"a table has one TTL attribute: if another application relies on %q, give the processor a table of its own, otherwise disable TTL and, once it is DISABLED, enable it on %s: %s", attr, AttrExpiresAt, r.enableTTL()))
	case status == "":
		r.warn("TTL is off (DescribeTimeToLive gave no status)", "")
	default:
		r.warn(fmt.Sprintf("TTL is %s", status), "")
	}
}

// err is the report as an error, nil when there is nothing to report.
func (r *tableReport) err() error {
	if len(r.problems) == 0 {
		return nil
	}
	return &tableError{report: *r}
}

// tableError is Check's error for the DynamoDB store.
type tableError struct{ report tableReport }

func (e *tableError) Error() string {
	r := e.report
	if len(r.problems) == 1 {
		return "sqsonce: " + r.where() + ": " + r.problems[0]
	}
	// Numbered: a problem's own text may hold a semicolon.
	var b strings.Builder
	fmt.Fprintf(&b, "sqsonce: %s has %d problems:", r.where(), len(r.problems))
	for i, p := range r.problems {
		fmt.Fprintf(&b, " (%d) %s", i+1, p)
	}
	return b.String()
}

// Is makes errors.Is match store.ErrMisconfigured, store.ErrUnavailable and ErrNoTTL as
// the report found.
func (e *tableError) Is(target error) bool {
	switch target {
	case store.ErrMisconfigured:
		return e.report.misconfigured
	case store.ErrUnavailable:
		return e.report.unavailable
	case ErrNoTTL:
		return e.report.noTTL
	}
	return false
}

// Unwrap returns the SDK's errors, so that errors.As finds an AWS error.
func (e *tableError) Unwrap() []error { return e.report.causes }
