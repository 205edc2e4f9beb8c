package dynamostore_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
)

// describingFake answers Check's two calls with what a test set; the
// embedded AdminAPI is nil, since Check makes no other call.
type describingFake struct {
	dynamostore.AdminAPI
	table    *types.TableDescription
	tableErr error
	ttl      *types.TimeToLiveDescription
	ttlErr   error
	calls    []string
}

func (f *describingFake) DescribeTable(_ context.Context, in *dynamodb.DescribeTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	f.calls = append(f.calls, "DescribeTable "+aws.ToString(in.TableName))
	if f.tableErr != nil {
		return nil, f.tableErr
	}
	return &dynamodb.DescribeTableOutput{Table: f.table}, nil
}

func (f *describingFake) DescribeTimeToLive(_ context.Context, in *dynamodb.DescribeTimeToLiveInput, _ ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error) {
	f.calls = append(f.calls, "DescribeTimeToLive "+aws.ToString(in.TableName))
	if f.ttlErr != nil {
		return nil, f.ttlErr
	}
	return &dynamodb.DescribeTimeToLiveOutput{TimeToLiveDescription: f.ttl}, nil
}

// keyedTable is an ACTIVE table with the given key schema: a partition key
// (name and type) and, when sortKey is set, a String sort key.
func keyedTable(partition string, typ types.ScalarAttributeType, sortKey string) *types.TableDescription {
	t := &types.TableDescription{
		TableName:            aws.String("orders"),
		TableStatus:          types.TableStatusActive,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(partition), AttributeType: typ}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(partition), KeyType: types.KeyTypeHash}},
	}
	if sortKey != "" {
		t.AttributeDefinitions = append(t.AttributeDefinitions, types.AttributeDefinition{AttributeName: aws.String(sortKey), AttributeType: types.ScalarAttributeTypeS})
		t.KeySchema = append(t.KeySchema, types.KeySchemaElement{AttributeName: aws.String(sortKey), KeyType: types.KeyTypeRange})
	}
	return t
}

func ttlOn(attr string, status types.TimeToLiveStatus) *types.TimeToLiveDescription {
	return &types.TimeToLiveDescription{AttributeName: aws.String(attr), TimeToLiveStatus: status}
}

// rightTable is the fake of a table Check passes.
func rightTable() *describingFake {
	return &describingFake{table: keyedTable("id", types.ScalarAttributeTypeS, ""), ttl: ttlOn("expiresAt", types.TimeToLiveStatusEnabled)}
}

func checkOn(t *testing.T, api dynamostore.AdminAPI) error {
	t.Helper()
	return dynamostore.New(api, "orders").Check(context.Background())
}

func TestCheckDynamoDBStore(t *testing.T) {
	t.Parallel()
	denied := &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "User: arn:aws:sts::123456789012:assumed-role/deployer/ci is not authorized to perform: dynamodb:DescribeTable"}
	for _, tc := range []struct {
		name string
		fake func(f *describingFake)
		// misconfigured, noTTL and unavailable are the sentinels the error
		// must match (and no other); want are parts of its text.
		misconfigured, noTTL, unavailable bool
		want                              []string
		// onlyDescribeTable: Check stops after a DescribeTable that failed.
		onlyDescribeTable bool
	}{
		{name: "right table", fake: func(*describingFake) {}},
		{name: "TTL still enabling", fake: func(f *describingFake) { f.ttl = ttlOn("expiresAt", types.TimeToLiveStatusEnabling) }},
		{name: "table updating", fake: func(f *describingFake) { f.table.TableStatus = types.TableStatusUpdating }},
		{
			name: "TTL off",
			fake: func(f *describingFake) {
				f.ttl = &types.TimeToLiveDescription{TimeToLiveStatus: types.TimeToLiveStatusDisabled}
			},
			noTTL: true,
			want: []string{"sqsonce: table orders: warning: TTL is DISABLED", "the table grows", "still works",
				"enable TTL on expiresAt: aws dynamodb update-time-to-live --table-name orders --time-to-live-specification Enabled=true,AttributeName=expiresAt"},
		},
		{name: "TTL disabling", fake: func(f *describingFake) { f.ttl = ttlOn("expiresAt", types.TimeToLiveStatusDisabling) }, noTTL: true, want: []string{"TTL is DISABLING"}},
		{name: "no TTL description", fake: func(f *describingFake) { f.ttl = nil }, noTTL: true, want: []string{"TTL is off"}},
		{
			name:  "TTL on another attribute",
			fake:  func(f *describingFake) { f.ttl = ttlOn("ttl", types.TimeToLiveStatusEnabled) },
			noTTL: true,
			want:  []string{`TTL is on "ttl", not "expiresAt"`, "a table of its own", "once it is DISABLED"},
		},
		{
			name: "emulator without DescribeTimeToLive",
			fake: func(f *describingFake) {
				f.ttlErr = &smithy.GenericAPIError{Code: "UnknownOperationException"}
			},
			noTTL: true,
			want:  []string{"TTL unknown"},
		},
		{
			name:          "another partition key",
			fake:          func(f *describingFake) { f.table = keyedTable("pk", types.ScalarAttributeTypeS, "") },
			misconfigured: true,
			want:          []string{`sqsonce: table orders: the partition key is "pk", not "id"`},
		},
		{
			name:          "a numeric partition key",
			fake:          func(f *describingFake) { f.table = keyedTable("id", types.ScalarAttributeTypeN, "") },
			misconfigured: true,
			want:          []string{`the partition key "id" is of type N (Number), not S (String)`},
		},
		{
			name:          "a sort key",
			fake:          func(f *describingFake) { f.table = keyedTable("id", types.ScalarAttributeTypeS, "sk") },
			misconfigured: true,
			want:          []string{`the table has a sort key, "sk"`},
		},
		{
			name:          "table being created",
			fake:          func(f *describingFake) { f.table.TableStatus = types.TableStatusCreating },
			misconfigured: true,
			want:          []string{"the table is CREATING, not ACTIVE"},
		},
		{
			name: "two problems",
			fake: func(f *describingFake) {
				f.table = keyedTable("pk", types.ScalarAttributeTypeS, "")
				f.ttl = nil
			},
			misconfigured: true,
			noTTL:         true,
			want:          []string{"sqsonce: table orders has 2 problems: (1) the partition key", " (2) warning: TTL is off"},
		},
		{
			name: "no table",
			fake: func(f *describingFake) {
				f.tableErr = &types.ResourceNotFoundException{Message: aws.String("Requested resource not found")}
			},
			misconfigured:     true,
			want:              []string{"sqsonce: table orders: no such table (DescribeTable: ResourceNotFoundException)"},
			onlyDescribeTable: true,
		},
		{
			name:              "DescribeTable denied",
			fake:              func(f *describingFake) { f.tableErr = denied },
			misconfigured:     true,
			want:              []string{"access denied to dynamodb:DescribeTable (User: arn:aws:sts::123456789012:assumed-role/deployer/ci is not authorized", "need dynamodb:DescribeTable and dynamodb:DescribeTimeToLive"},
			onlyDescribeTable: true,
		},
		{
			name: "DescribeTimeToLive denied",
			fake: func(f *describingFake) {
				f.ttlErr = &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "not authorized"}
			},
			misconfigured: true,
			want:          []string{"access denied to dynamodb:DescribeTimeToLive (not authorized)"},
		},
		{
			name: "throttled",
			fake: func(f *describingFake) {
				f.tableErr = &types.ProvisionedThroughputExceededException{Message: aws.String("slow down")}
			},
			unavailable:       true,
			want:              []string{"DescribeTable failed, so the table is not fully checked; try again"},
			onlyDescribeTable: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := rightTable()
			tc.fake(f)
			err := checkOn(t, f)
			wantCalls := []string{"DescribeTable orders", "DescribeTimeToLive orders"}
			if tc.onlyDescribeTable {
				wantCalls = wantCalls[:1]
			}
			if fmt.Sprint(f.calls) != fmt.Sprint(wantCalls) {
				t.Errorf("calls %v, want %v", f.calls, wantCalls)
			}
			if !tc.misconfigured && !tc.noTTL && !tc.unavailable {
				if err != nil {
					t.Fatalf("Check: %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Check: nil, want an error")
			}
			for sentinel, want := range map[error]bool{store.ErrMisconfigured: tc.misconfigured, dynamostore.ErrNoTTL: tc.noTTL, store.ErrUnavailable: tc.unavailable} {
				if got := errors.Is(err, sentinel); got != want {
					t.Errorf("errors.Is(%v, %v) = %v, want %v", err, sentinel, got, want)
				}
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not say %q", err, w)
				}
			}
			for _, cause := range []error{f.tableErr, f.ttlErr} {
				if cause != nil && !errors.Is(err, cause) {
					t.Errorf("error %v does not unwrap to the SDK's %v", err, cause)
				}
			}
		})
	}
}

// TestCheckNamesTheRegion: the default store's client is a
// *dynamodb.Client, whose region the error names. The service is an
// in-process server that knows no table.
func TestCheckNamesTheRegion(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex // the server's goroutine appends, the test reads
	var calls []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls = append(calls, r.Header.Get("X-Amz-Target"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"__type":"com.amazonaws.dynamodb.v20120810#ResourceNotFoundException","message":"Requested resource not found"}`))
	}))
	defer srv.Close()
	api := dynamodb.NewFromConfig(aws.Config{
		Region:       "eu-west-1",
		BaseEndpoint: aws.String(srv.URL),
		Credentials:  credentials.NewStaticCredentialsProvider("testing", "testing", ""),
	})
	err := dynamostore.New(api, "orders-idempotency").Check(context.Background())
	want := "sqsonce: table orders-idempotency in region eu-west-1: no such table"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("Check: %v, want it to start %q", err, want)
	}
	if !errors.Is(err, store.ErrMisconfigured) || !errors.As(err, new(*types.ResourceNotFoundException)) {
		t.Errorf("error %v: want ErrMisconfigured and the SDK's ResourceNotFoundException", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(calls) != "[DynamoDB_20120810.DescribeTable]" {
		t.Errorf("calls %v, want one DescribeTable", calls)
	}
}

// TestCheckNeedsADescribingClient: a client that only has AdminAPI's
// calls cannot be checked, and the error says so rather than passing.
func TestCheckNeedsADescribingClient(t *testing.T) {
	t.Parallel()
	var narrow struct{ dynamostore.AdminAPI }
	err := checkOn(t, narrow)
	if err == nil {
		t.Fatal("Check passed a table it could not describe")
	}
	for _, w := range []string{"sqsonce: table orders not checked", "no DescribeTable and DescribeTimeToLive", "*dynamodb.Client"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
	for _, sentinel := range []error{store.ErrMisconfigured, dynamostore.ErrNoTTL, store.ErrUnavailable} {
		if errors.Is(err, sentinel) {
			t.Errorf("error %v matches %v: the table may be fine", err, sentinel)
		}
	}
}
