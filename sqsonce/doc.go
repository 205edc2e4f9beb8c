// Package sqsonce runs a function once per idempotency key, under a lock in
// a store.Store (store/dynamostore, store/redisstore, store/pgstore, or
// store/memstore in a test): a Handler for each record of an AWS Lambda SQS event, or any Go
// function with Do and DoResult.
//
// A Lambda function (the event source mapping reports batch item
// failures):
//
//	store, err := dynamostore.FromEnv(os.LookupEnv, awsCfg) // IDEMPOTENCY_TABLE
//	p, err := sqsonce.FromEnv(os.LookupEnv, sqsonce.ConsumerConfig{Config: sqsonce.Config{Store: store}, AWS: awsCfg}, handle)
//	lambda.Start(p.Handle)
//
// Any Go code:
//
//	p, err := sqsonce.New(sqsonce.Config{Store: store, KeyPrefix: "billing"})
//	err = p.Do(ctx, invoiceID, charge)
//
// The function runs at most once per key within the dedupe window, but in
// the cases docs/guarantees.md lists; docs/library.md shows the rest.
//
// Exactly-once effects: on a store that implements store.Transactor
// (dynamostore.NewTransactional, pgstore), the writes the function adds to
// its transaction (dynamostore.Add, pgstore.Tx) commit in one transaction
// with the key's completion: both or neither, so a crash, a lost answer or
// a lock taken over never applies them twice. The transaction is the
// function's own lock's (a Do nested in the function has its own, or none
// on a store without transactions), and takes nothing once the function
// returned. Config.PermanentEffect says which refusals of the function's
// own writes' conditions no retry fixes.
package sqsonce
