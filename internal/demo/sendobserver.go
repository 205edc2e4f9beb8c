package demo

import (
	"context"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/sqs-once/sqs-once/internal/sqsmsg"
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
