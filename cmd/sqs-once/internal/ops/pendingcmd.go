package ops

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/targets"
)

func (c *cli) sendPendingCmd() *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:   "send-pending [--yes] KEY",
		Short: "Send a completed key's emitted messages that are still pending",
		Long: `send-pending sends the messages a key's work emitted (sqsonce.Emit) that
its completion still holds unsent, "completed, messages pending": the
invocation ended between the commit and the send, or a destination refused
or throttled them. The next delivery of the key sends them by itself; use
send-pending when no delivery is coming (the message was deleted or moved
away) or they must go out now.

It reads the record, shows the messages and asks for confirmation; --yes
skips the question (scripts). The record is read again after the answer:
messages a delivery sent meanwhile are not sent again. The messages are
sent as the processor sends them (SQS SendMessageBatch, SNS PublishBatch),
each with its emit id, the same on every send of it, as the
sqs-once-emit-id attribute (and a FIFO destination's deduplication id): a
receiver that drops repeats by it gets each message once. Once every one is
accepted, the record is marked sent (its outbox removed), conditional on it
still being the completion read.

A key with nothing pending exits 0, nothing sent; a key that is not
COMPLETED exits 3. Messages not all accepted exit 5: the record keeps them
all pending, and a second run (or the next delivery) sends them again, with
the same ids. It needs the AWS credentials to send to the destinations
(sqs:SendMessage, sns:Publish) and a region, whatever the store.

KEY is the plain key, hashed when the processor hashes keys (see
sqs-once inspect --help).`,
		Example: `  sqs-once send-pending --stack orders order-42
  sqs-once send-pending --stack orders --yes --json order-42
  sqs-once send-pending --store redis --redis-url redis://cache:6379 --key-prefix orders-processor --region eu-west-1 order-42`,
		Args: cobra.ArbitraryArgs,
	}
	cmd.Flags().BoolVar(&yes, "yes", false, "do not ask for confirmation")
	cmd.RunE = c.keyCommand(func(ctx context.Context, recs *Records, key string) error {
		if c.cfg.Region == "" {
			return fmt.Errorf("%w: send-pending sends with SQS and SNS, which need an AWS region: give --region, set AWS_REGION, or set a region in the profile", ErrUsage)
		}
		return c.sendPending(ctx, recs, key, yes, targets.NewSender(c.cfg))
	})
	return cmd
}

// sendPending is send-pending's body, with the sender the messages go
// out with.
func (c *cli) sendPending(ctx context.Context, recs *Records, key string, yes bool, sender sqsonce.Sender) error {
	res, err := recs.SendPending(ctx, key, sender, func(r Record) (bool, error) {
		if yes {
			return true, nil
		}
		if !c.json {
			c.printRecord(r)
		}
		return c.confirm(fmt.Sprintf("Send the %s pending for %q now? Each keeps its emit id: a receiver that drops repeats by %s gets it once.",
			count(len(r.Pending), "message", "messages"), key, sqsonce.AttrEmitID))
	})
	if err != nil && len(res.Messages) == 0 {
		// Nothing was sent: the error says it all.
		return err
	}
	if c.json {
		if jerr := c.printJSON(res); jerr != nil {
			return jerr
		}
		return err
	}
	c.printSendResult(key, res)
	return err
}

// printSendResult says what send-pending did: nothing to send, or what
// became of each message.
func (c *cli) printSendResult(key string, res SendResult) {
	w := c.io.Stdout
	r := res.Record
	of := fmt.Sprintf("key %q (record %s, fence %d)", key, r.RecordID, r.Fence)
	switch {
	case res.SentMeanwhile:
		fmt.Fprintf(w, "%s: a delivery of the key sent its messages meanwhile: nothing to send\n", of)
		return
	case len(res.Messages) == 0:
		fmt.Fprintf(w, "%s is COMPLETED with no messages pending: nothing to send\n", of)
		return
	}
	sent := 0
	for _, m := range res.Messages {
		if m.Sent {
			sent++
		}
	}
	n := len(res.Messages)
	switch {
	case res.Marked:
		fmt.Fprintf(w, "sent %s of %s and marked them sent: nothing is pending\n", count(n, "message", "messages"), of)
	case sent == n:
		fmt.Fprintf(w, "sent %s of %s; marking them sent failed: the record keeps them pending, and the next delivery or send-pending sends them again, with the same emit ids\n", count(n, "message", "messages"), of)
	default:
		fmt.Fprintf(w, "%d of %s of %s not sent: the record keeps %s pending, and a second run or the next delivery of the key sends %s again, with the same emit ids\n",
			n-sent, count(n, "message", "messages"), of, plural(n, "it", "all of them"), plural(n, "it", "them"))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, m := range res.Messages {
		what, why := "sent", ""
		if !m.Sent {
			what, why = "NOT SENT", ": "+m.Error
		}
		fmt.Fprintf(tw, "  #%d\t%s\tto %s, emit id %s%s\n", m.Position, what, shown(m.To), m.EmitID, why)
	}
	_ = tw.Flush()
}
