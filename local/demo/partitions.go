package demo

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqs-once/sqs-once/internal/local/motoserver"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
)

// dynamoPartitions is how many moto_servers hold the idempotency table's
// items. moto is one Python process, and its DynamoDB conditional updates
// (about 6.5 ms of CPU each with motoserver's patches, 10.5 ms without; two
// per record) are most of the demo's work: on a busy two-core machine one
// process would get a fraction of one core. The items are spread over
// partitions by a hash of their key, as DynamoDB spreads them, so every
// write of one item reaches the same server and stays atomic there.
const dynamoPartitions = 2

// txAPI is the processor's DynamoDB client: the calls of the store's
// administration, and with -tx TransactWriteItems, the transactional
// store's completion. *dynamodb.Client is one.
type txAPI interface {
	dynamostore.AdminAPI
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
}

var _ txAPI = (*dynamodb.Client)(nil)

// partitioned routes each call on an item to the item's partition.
type partitioned []txAPI

var _ txAPI = partitioned(nil)

func (p partitioned) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return p[partitionOf(in.Key, len(p))].UpdateItem(ctx, in, optFns...)
}

func (p partitioned) GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return p[partitionOf(in.Key, len(p))].GetItem(ctx, in, optFns...)
}

func (p partitioned) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return p[partitionOf(in.Key, len(p))].DeleteItem(ctx, in, optFns...)
}

// TransactWriteItems goes to the partition of the transaction's record: the
// business table (-tx) is on every partition, so the business writes beside
// the record commit on the record's server, in one transaction there.
func (p partitioned) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	return p[partitionOfTx(in.TransactItems, len(p))].TransactWriteItems(ctx, in, optFns...)
}

// partitionOfTx is the partition of the one item of items keyed by the
// idempotency table's id: the record. A transaction without one (the
// processor makes none) goes to the first.
func partitionOfTx(items []ddbtypes.TransactWriteItem, n int) int {
	for _, it := range items {
		var key map[string]ddbtypes.AttributeValue
		switch {
		case it.Update != nil:
			key = it.Update.Key
		case it.ConditionCheck != nil:
			key = it.ConditionCheck.Key
		case it.Delete != nil:
			key = it.Delete.Key
		case it.Put != nil:
			key = it.Put.Item
		}
		if recordID(key) != "" {
			return partitionOf(key, n)
		}
	}
	return 0
}

// errScanPartitioned: a scan of one partition would be a part of the table
// that looks like all of it, and the processor never scans (only the CLI's
// status --locks does, against one table).
var errScanPartitioned = errors.New("demo: Scan of the partitioned idempotency table: the processor never scans it")

func (p partitioned) Scan(context.Context, *dynamodb.ScanInput, ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	return nil, errScanPartitioned
}

// serializeWrites is a moto_server client for the processor's store: its
// conditional writes and transactions atomic per item, as DynamoDB's are
// (moto checks a condition and writes without a lock between the two), its
// reads straight to the server.
func serializeWrites(c *dynamodb.Client) txAPI { return motoserver.Atomic(c) }

// partitionOf is the partition of the item with key (the table's id).
func partitionOf(key map[string]ddbtypes.AttributeValue, n int) int {
	h := fnv.New32a()
	_, _ = io.WriteString(h, recordID(key))
	return int(h.Sum32() % uint32(n))
}

// startPartitions starts the partitions' moto_servers, side by side. stop
// ends every one started, also after an error.
func startPartitions(ctx context.Context) (urls []string, stop func(), err error) {
	type started struct {
		srv *motoserver.Server
		err error
	}
	out := make(chan started, dynamoPartitions)
	for range dynamoPartitions {
		go func() {
			srv, err := motoserver.Start(ctx)
			out <- started{srv, err}
		}()
	}
	var servers []*motoserver.Server
	var errs []error
	for range dynamoPartitions {
		s := <-out
		if s.err != nil {
			errs = append(errs, s.err)
			continue
		}
		servers = append(servers, s.srv)
		urls = append(urls, s.srv.URL)
	}
	stop = func() { stopAll(servers...) }
	if err := errors.Join(errs...); err != nil {
		stop()
		return nil, nil, fmt.Errorf("start the DynamoDB partitions: %w", err)
	}
	return urls, stop, nil
}

// tableAPI is what copyTable calls.
type tableAPI interface {
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	DescribeTimeToLive(ctx context.Context, in *dynamodb.DescribeTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error)
}

// tableCreator is what copyTable calls on a partition.
type tableCreator interface {
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	UpdateTimeToLive(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
}

// copyTable creates the table the stack created (its key schema and
// attribute definitions, its TTL) on a partition's server.
func copyTable(ctx context.Context, from tableAPI, to tableCreator, table string) error {
	desc, err := from.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		return fmt.Errorf("describe the stack's table %s: %w", table, err)
	}
	if _, err := to.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		KeySchema:            desc.Table.KeySchema,
		AttributeDefinitions: desc.Table.AttributeDefinitions,
		BillingMode:          ddbtypes.BillingModePayPerRequest,
	}); err != nil {
		return fmt.Errorf("create the table %s on a DynamoDB partition: %w", table, err)
	}
	ttl, err := from.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
	if err != nil {
		return fmt.Errorf("read the TTL of %s: %w", table, err)
	}
	if d := ttl.TimeToLiveDescription; d != nil && d.TimeToLiveStatus == ddbtypes.TimeToLiveStatusEnabled {
		if _, err := to.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
			TableName:               aws.String(table),
			TimeToLiveSpecification: &ddbtypes.TimeToLiveSpecification{AttributeName: d.AttributeName, Enabled: aws.Bool(true)},
		}); err != nil {
			return fmt.Errorf("set the TTL of %s on a DynamoDB partition: %w", table, err)
		}
	}
	return nil
}

// partitionClients is the processor's DynamoDB client: one client per
// partition URL (or the stack's own server when there are none), each with
// its conditional writes made atomic per item, and with -chaos behind a
// fault proxy of its own. The table is copied to each partition first.
func partitionClients(ctx context.Context, awsCfg aws.Config, table string, urls []string, opts Options, chaos *chaosLog) (txAPI, func(), error) {
	if len(urls) == 0 {
		cfg, closeProxy, err := pipelineConfig(awsCfg, aws.ToString(awsCfg.BaseEndpoint), opts, chaos, 1)
		if err != nil {
			return nil, nil, err
		}
		return serializeWrites(dynamodb.NewFromConfig(cfg)), closeProxy, nil
	}
	from := dynamodb.NewFromConfig(awsCfg)
	var closers []func()
	closeAll := func() {
		for _, c := range closers {
			c()
		}
	}
	// The table is created on every partition side by side: each server
	// does its own work.
	copied := make([]error, len(urls))
	var wg sync.WaitGroup
	for i, u := range urls {
		direct := awsCfg.Copy()
		direct.BaseEndpoint = aws.String(u)
		wg.Go(func() { copied[i] = copyTable(ctx, from, dynamodb.NewFromConfig(direct), table) })
	}
	wg.Wait()
	if err := errors.Join(copied...); err != nil {
		return nil, nil, err
	}
	parts := make(partitioned, len(urls))
	for i, u := range urls {
		cfg, closeProxy, err := pipelineConfig(awsCfg, u, opts, chaos, uint64(1+i))
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		closers = append(closers, closeProxy)
		parts[i] = serializeWrites(dynamodb.NewFromConfig(cfg))
	}
	return parts, closeAll, nil
}

// stopAll stops servers side by side: each may take a few seconds to exit
// on a loaded machine.
func stopAll(servers ...*motoserver.Server) {
	var wg sync.WaitGroup
	for _, s := range servers {
		wg.Go(s.Stop)
	}
	wg.Wait()
}
