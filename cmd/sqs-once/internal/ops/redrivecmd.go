package ops

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

func (c *cli) redriveCmd() *cobra.Command {
	var from, to, reason, keep string
	var n int
	var dry, yes bool
	var hold time.Duration
	cmd := &cobra.Command{
		Use:   "redrive --from operator|dlq --to main [--reason R] [--max N] [--dry-run] [--keep-copy QUEUE] [--yes]",
		Short: "Move messages back to the main queue, replay counter reset",
		Long: `redrive moves messages from the operator queue or the dead-letter queue to
the main queue, ten at a time: each is sent with its body and every
attribute byte for byte, except sqs-dlq-replay-nb, which is removed so the
replayer gives it MAX_ATTEMPTS replays again; it is deleted from the source
only once the main queue (and the --keep-copy queue) accepted it. Copies of
one original message (same sqs-dlq-original-message-id, as an SDK retry of a
forward can make) are moved once; the other copies are deleted.

--reason moves only messages whose sqs-once-reason is R, one of the reasons
sqs-once writes: attribute-limit, expired, invalid-counter, max-attempts,
missing-group-id, payload-mismatch, permanent-error, target-refused; the
others stay where they are. --dry-run
receives and counts, then makes everything visible again: nothing is sent or
deleted. It asks for confirmation; --yes skips the question (scripts).

Interrupting (Ctrl-C) finishes the batch in flight and stops: no message is
left sent but not deleted, and a re-run moves the rest. Only a process killed
between a send and its delete (kill -9, a second Ctrl-C, a lost network), or
a delete that keeps failing (listed as "not deleted"), leaves a message in
both queues; a re-run then moves it again. Its copies carry the same
sqs-dlq-original-message-id, so the processor (IDEMPOTENCY_KEY=messageId, or a
business key) runs its side effect once.

Messages keep sqs-once-first-sent: with MAX_MESSAGE_AGE set, a message older
than the limit goes back to the operator queue as expired on its next
failure.

For a plain move of a whole DLQ, SQS's own StartMessageMoveTask (the
console's "Start DLQ redrive", aws sqs start-message-move-task --source-arn
DLQ_ARN) is faster and runs server-side, but it moves everything: no reason
filter, no counter reset (a replayed message goes straight to the operator
queue on its next failure), no copy kept, no dry run. The DLQ is consumed by
the replayer, which already sends its messages back: redrive --from dlq is
for when the replayer is disabled or its mapping paused.`,
		Example: `  sqs-once redrive --stack orders --from operator --to main --dry-run
  sqs-once redrive --stack orders --from operator --to main --reason max-attempts --max 100
  sqs-once redrive --stack orders --from operator --to main --keep-copy https://sqs.eu-west-1.amazonaws.com/123456789012/orders-archive --yes`,
		// Checked before any AWS call: a reason sqs-once never writes (a
		// typo) would match no message, move nothing and exit 0.
		Args: func(cmd *cobra.Command, args []string) error {
			if err := cobra.NoArgs(cmd, args); err != nil {
				return err
			}
			return checkReason(reason)
		},
	}
	f := cmd.Flags()
	f.StringVar(&from, "from", "", "source: operator or dlq (or a queue URL)")
	f.StringVar(&to, "to", "main", "destination: main (or a queue URL)")
	f.StringVar(&reason, "reason", "", "move only messages whose sqs-once-reason is `R`")
	f.IntVar(&n, "max", 0, "move at most `N` messages (0: all)")
	f.BoolVar(&dry, "dry-run", false, "count what would move; send and delete nothing")
	f.StringVar(&keep, "keep-copy", "", "send an unchanged copy of each moved message to `QUEUE` (a URL) first")
	f.BoolVar(&yes, "yes", false, "do not ask for confirmation")
	f.DurationVar(&hold, "hold", 5*time.Minute, "how long received messages stay hidden while the run works (skipped ones are shown again at the end)")
	cmd.RunE = c.run(func(ctx context.Context, _ []string) error {
		if from == "" {
			return fmt.Errorf("%w: --from is required: operator or dlq", ErrUsage)
		}
		if from == "main" {
			return fmt.Errorf("%w: --from main would send the main queue to itself or away from the processor; redrive moves from operator or dlq", ErrUsage)
		}
		src, err := c.queue(from)
		if err != nil {
			return err
		}
		dst, err := c.queue(to)
		if err != nil {
			return err
		}
		if keep != "" {
			if keep, err = c.targets.Queue(keep); err != nil {
				return err
			}
			// A copy in a queue the stack consumes would be processed or
			// replayed: a second delivery, not an archive.
			t := c.targets
			if keep == t.MainQueue || keep == t.DeadLetter || keep == t.OperatorQueue {
				return fmt.Errorf("%w: --keep-copy must be an archive queue no function consumes, not one of the stack's queues", ErrUsage)
			}
		}
		q := c.queues()
		depth, err := q.Status(ctx, from, src)
		if err != nil {
			return err
		}
		if !dry && !yes {
			what := fmt.Sprintf("Move %s messages from %s (about %d visible) to %s, resetting sqs-dlq-replay-nb", limitWords(n), from, depth.Visible, to)
			if reason != "" {
				what += ", only reason " + reason
			}
			if keep != "" {
				what += ", keeping a copy in " + QueueName(keep)
			}
			ok, err := c.confirm(what + "?")
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("redrive: %w", ErrDeclined)
			}
		}
		total := int64(depth.Visible)
		if n > 0 {
			total = min(total, int64(n))
		}
		opt := RedriveOptions{From: src, To: dst, Reason: reason, Max: n, DryRun: dry, KeepCopy: keep, Hold: hold}
		var bar *progressBar
		if c.io.Terminal(c.io.Stderr) {
			bar = newProgressBar(c.io.Stderr, redriveTitle(from, to, dry), max(total, 1))
			opt.Progress = func(rc RedriveCounts) { bar.set(int64(rc.Handled()), countsWords(rc, dry)) }
		}
		// Say at once that the interrupt was heard: in the bar's status on a
		// terminal (a line of its own would break mpb's redrawing), else
		// on stderr, finished before the summary is written.
		noted := make(chan struct{})
		stopNote := context.AfterFunc(ctx, func() {
			defer close(noted)
			const note = "interrupted: finishing the batch in flight, then stopping (a re-run moves the rest)"
			if bar != nil {
				bar.setStatus(note)
				return
			}
			fmt.Fprintln(c.io.Stderr, note)
		})
		sum, err := q.Redrive(ctx, opt)
		if !stopNote() {
			<-noted
		}
		if bar != nil {
			bar.done()
		}
		if c.json {
			if jerr := c.printJSON(sum); jerr != nil {
				return jerr
			}
		} else {
			c.printSummary(from, to, sum)
		}
		return err
	})
	return cmd
}

func limitWords(n int) string {
	if n > 0 {
		return fmt.Sprintf("up to %d", n)
	}
	return "all"
}

func redriveTitle(from, to string, dry bool) string {
	if dry {
		return "dry run " + from + " -> " + to
	}
	return "redrive " + from + " -> " + to
}

func countsWords(rc RedriveCounts, dry bool) string {
	verb := "moved"
	if dry {
		verb = "would move"
	}
	return fmt.Sprintf("%s %d, copies %d, skipped %d, failed %d", verb, rc.Moved, rc.Copies, rc.Skipped, rc.Failed)
}

func (c *cli) printSummary(from, to string, s RedriveSummary) {
	w := c.io.Stdout
	state := "done"
	switch {
	case s.DryRun:
		state = "dry run: nothing was sent or deleted"
	case s.Interrupted:
		state = "interrupted: re-run to move the rest"
	case s.Error != "":
		state = "stopped: " + s.Error
	case s.Failed > 0 || s.NotDeleted > 0:
		state = "finished, with failures (below)"
	}
	fmt.Fprintf(w, "redrive %s -> %s: %s\n", from, to, state)
	verb := "moved"
	if s.DryRun {
		verb = "would move"
	}
	fmt.Fprintf(w, "  %-12s %d\n", verb, s.Moved)
	fmt.Fprintf(w, "  %-12s %d  (further copies of a message moved, deleted from %s without a second send)\n", "copies", s.Copies, from)
	if s.Reason != "" {
		fmt.Fprintf(w, "  %-12s %d  (reason is not %s: left in %s)\n", "skipped", s.Skipped, s.Reason, from)
	} else {
		fmt.Fprintf(w, "  %-12s %d\n", "skipped", s.Skipped)
	}
	fmt.Fprintf(w, "  %-12s %d\n", "failed", s.Failed)
	if s.NotDeleted > 0 {
		fmt.Fprintf(w, "  %-12s %d  (in %s and still in %s)\n", "not deleted", s.NotDeleted, to, from)
	}
	for _, f := range s.Failures {
		id := f.MessageID
		if f.OriginalID != "" {
			id += " (original " + f.OriginalID + ")"
		}
		fmt.Fprintf(w, "    %s  %s: %s\n", id, f.Where, strings.TrimSpace(f.Error))
	}
}
