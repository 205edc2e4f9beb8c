package demo

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/sqs-once/sqs-once/internal/sqsmsg"
	"github.com/sqs-once/sqs-once/sqsonce/store"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
)

// observeReplays returns a copy of cfg whose SQS clients report every
// message SQS accepted into mainQueueURL through SendMessageBatch. Watching
// the API call, rather than the replayer's logs, shows the delays the
// replayer really asked SQS for.
func observeReplays(cfg aws.Config, mainQueueURL string, report func(Replay)) aws.Config {
	out := cfg.Copy()
	out.APIOptions = append(out.APIOptions, func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("sqsOnceDemoObserveReplays",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				res, md, err := next.HandleInitialize(ctx, in)
				req, isReq := in.Parameters.(*sqs.SendMessageBatchInput)
				resp, isResp := res.Result.(*sqs.SendMessageBatchOutput)
				if err == nil && isReq && isResp && aws.ToString(req.QueueUrl) == mainQueueURL {
					for _, r := range acceptedReplays(req, resp) {
						report(r)
					}
				}
				return res, md, err
			}), middleware.After)
	})
	return out
}

// acceptedReplays pairs the entries of a SendMessageBatch with the result's
// successful ids.
func acceptedReplays(req *sqs.SendMessageBatchInput, resp *sqs.SendMessageBatchOutput) []Replay {
	ok := map[string]bool{}
	for _, s := range resp.Successful {
		ok[aws.ToString(s.Id)] = true
	}
	var out []Replay
	for _, e := range req.Entries {
		if !ok[aws.ToString(e.Id)] {
			continue
		}
		r := Replay{Delay: int(e.DelaySeconds), Attempt: attrInt(e.MessageAttributes, sqsmsg.AttrReplayCount)}
		if b, err := ParseBody(aws.ToString(e.MessageBody)); err == nil {
			r.Send = b.Send
		}
		out = append(out, r)
	}
	return out
}

func attrInt(attrs map[string]sqstypes.MessageAttributeValue, name string) int {
	n, _ := strconv.Atoi(aws.ToString(attrs[name].StringValue))
	return n
}

// completionObserver is the processor's DynamoDB client with every COMPLETED
// write reported, with the invocation that made it. The report uses them to
// tell a side effect the lock protocol should have prevented (one after its
// key's completion was recorded) from the documented window (a side effect
// whose completion was never recorded).
type completionObserver struct {
	txAPI
	// keys maps a record id to the workload key it belongs to.
	keys   map[string]string
	report func(Completion)
}

func newCompletionObserver(api txAPI, prefix string, w Workload, report func(Completion)) completionObserver {
	keys := make(map[string]string, len(w.Keys))
	for _, k := range w.Keys {
		keys[store.RecordID(prefix, k.ID)] = k.ID
	}
	return completionObserver{txAPI: api, keys: keys, report: report}
}

// UpdateItem reports the lock protocol's completions, recognised by the
// status they set; the acquire, which also names COMPLETED (in its
// condition), is the one update that asks for the old item.
func (c completionObserver) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	sent := time.Now()
	out, err := c.txAPI.UpdateItem(ctx, in, optFns...)
	if key, ours := c.keys[recordID(in.Key)]; ours && in.ReturnValues != ddbtypes.ReturnValueAllOld && setsCompleted(in.ExpressionAttributeNames, in.ExpressionAttributeValues) {
		c.completed(ctx, key, sent, err)
	}
	return out, err
}

// TransactWriteItems reports the completions of -tx's transactions: the
// record's update in them sets COMPLETED, as UpdateItem's would.
func (c completionObserver) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	sent := time.Now()
	out, err := c.txAPI.TransactWriteItems(ctx, in, optFns...)
	for _, it := range in.TransactItems {
		if u := it.Update; u != nil {
			if key, ours := c.keys[recordID(u.Key)]; ours && setsCompleted(u.ExpressionAttributeNames, u.ExpressionAttributeValues) {
				c.completed(ctx, key, sent, err)
			}
		}
	}
	return out, err
}

// completed reports a completion of key sent at sent, accepted unless err.
func (c completionObserver) completed(ctx context.Context, key string, sent time.Time, err error) {
	comp := Completion{Key: key, At: sent, OK: err == nil}
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		comp.RequestID = lc.AwsRequestID
	}
	c.report(comp)
}

func recordID(key map[string]ddbtypes.AttributeValue) string {
	if id, ok := key[dynamostore.AttrID].(*ddbtypes.AttributeValueMemberS); ok {
		return id.Value
	}
	return ""
}

// setsCompleted reports whether an update's expression names the status
// and the value COMPLETED.
func setsCompleted(names map[string]string, values map[string]ddbtypes.AttributeValue) bool {
	return slices.Contains(slices.Collect(maps.Values(names)), dynamostore.AttrStatus) &&
		slices.ContainsFunc(slices.Collect(maps.Values(values)), func(v ddbtypes.AttributeValue) bool {
			s, ok := v.(*ddbtypes.AttributeValueMemberS)
			return ok && s.Value == string(store.StatusCompleted)
		})
}
