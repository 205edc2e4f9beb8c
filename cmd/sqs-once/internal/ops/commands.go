package ops

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/spf13/cobra"

	"github.com/sqs-once/sqs-once/sqsonce/store"
)

func (c *cli) statusCmd() *cobra.Command {
	var locks, pending, verbose bool
	var pendingAge, window time.Duration
	cmd := &cobra.Command{
		Use:   "status [--locks] [--pending [--pending-age D] [--dedupe-window D]] [--verbose]",
		Short: "Depth and oldest age of the main, dead-letter and operator queues, the processor's counts of the last hour; with --locks, the PROCESSING records; with --pending, the keys with messages pending",
		Long: `status shows each queue's approximate depth (visible, in flight, delayed) and
the age of its oldest message (CloudWatch's ApproximateAgeOfOldestMessage,
the newest datapoint of the last 15 minutes). An endpoint set in place of
AWS's (AWS_ENDPOINT_URL: an emulator such as moto_server) that does not
serve that metric gives "not available on this endpoint"; --verbose adds
the SDK's error. On AWS's own endpoint, or for a refusal or throttling
anywhere, the error itself is shown: a role without
cloudwatch:GetMetricStatistics, say.

With --stack it also shows what the stack's processor did in the last hour
(whole minutes, in UTC): the sums of the metrics it writes to CloudWatch
(namespace sqs-once, dimension FunctionName, through its log in the
embedded metric format), Processed and Duplicate always, the others
(Failed, ForwardedToOperator, LockLost, ...) when not zero; --json has
them all. Reading them needs cloudwatch:GetMetricData; an endpoint that
does not serve it is "not available on this endpoint", as for the age.

It also runs the store's own check on the idempotency table (the one
preflight runs) and says its state: exists, missing, TTL off,
misconfigured, or unknown (no dynamodb:DescribeTable). A missing table is
exit 7 with --locks or --pending.

--locks also scans the idempotency table for this stack's PROCESSING records
and says how long until each lock expires. A scan reads the whole table,
page by page (a progress indicator on a terminal), so it runs only when asked.

--pending scans the store for this stack's keys whose completion holds
emitted messages not yet sent (sqsonce.Emit; "completed, messages pending"
in inspect), and counts those pending for --pending-age or longer
(default 5m): their first send failed and their redeliveries have not sent
them either. A key's completion time is its dedupe window's end less the
dedupe window: the processor's DEDUPE_WINDOW (read with --stack), or
--dedupe-window. Without either, no key's age is known and every key
pending is counted, as the output says. It lists the ten oldest, and the
next step: sqs-once inspect KEY shows a key's messages, send-pending KEY
sends them. It is a second scan of the whole store beside --locks'
(a DynamoDB table's items, eventually consistent; a Redis server's keys; a
PostgreSQL table's rows).`,
		Example: `  sqs-once status --stack orders
  sqs-once status --stack orders --locks
  sqs-once status --stack orders --pending
  sqs-once status --store redis --redis-url redis://cache:6379 --key-prefix orders-processor --pending --dedupe-window 24h
  sqs-once status --stack orders --json | jq '.queues[] | select(.name=="operator") | .visible'`,
		Args: cobra.NoArgs,
	}
	cmd.Flags().BoolVar(&locks, "locks", false, "also list PROCESSING records (scans the table)")
	cmd.Flags().BoolVar(&pending, "pending", false, "also count the keys with emitted messages pending (scans the table)")
	cmd.Flags().DurationVar(&pendingAge, "pending-age", DefaultPendingAge, "with --pending, count the keys pending for at least `D`")
	cmd.Flags().BoolVar(&verbose, "verbose", false, "with a metric the endpoint does not serve, also show the SDK's error")
	cmd.Flags().DurationVar(&window, "dedupe-window", 0, "with --pending, the processor's DEDUPE_WINDOW as a duration `D` (24h): what tells when a key completed (default: read from the stack's processor)")
	cmd.RunE = c.run(func(ctx context.Context, _ []string) error {
		if pendingAge < 0 {
			return fmt.Errorf("%w: --pending-age %v: below zero", ErrUsage, pendingAge)
		}
		if window != 0 && (window < time.Second || window > maxDedupeWindow) {
			return fmt.Errorf("%w: --dedupe-window %v: not a window the processor accepts, 1s to %v", ErrUsage, window, maxDedupeWindow)
		}
		q := c.queues()
		type report struct {
			Targets Targets       `json:"targets"`
			Queues  []QueueStatus `json:"queues"`
			Locks   []Record      `json:"locks,omitempty"`
			Scanned int           `json:"scanned,omitempty"`
			// Pending is what --pending found.
			Pending *PendingCount `json:"pending,omitempty"`
			// Table is the store's own check of the idempotency table.
			Table *StoreCheck `json:"table,omitempty"`
			// Processor is the stack's processor's counts (with --stack).
			Processor *ProcessorCounts `json:"processor,omitempty"`
		}
		rep := report{Targets: c.targets, Queues: []QueueStatus{}}
		// --table with --store postgres or mysql names an SQL table: no
		// DynamoDB table to check.
		if c.targets.Table != "" && !sqlStore(c.targets.Store) {
			rep.Table = checkDynamoTable(ctx, dynamodb.NewFromConfig(c.cfg), c.targets.Table)
		}
		for _, name := range []string{"main", "dlq", "operator"} {
			u, _ := c.targets.Queue(name)
			if u == "" {
				continue
			}
			c.use("queue " + QueueName(u))
			st, err := q.Status(ctx, name, u)
			if err != nil {
				return err
			}
			rep.Queues = append(rep.Queues, st)
		}
		if len(rep.Queues) == 0 && !locks && !pending {
			return fmt.Errorf("%w: no queue to show: give --stack, or --main-queue, --dlq, --operator-queue", ErrUsage)
		}
		if c.targets.Stack != "" {
			pc := c.counts().StackProcessor(ctx, cloudformation.NewFromConfig(c.cfg), c.targets.Stack)
			rep.Processor = &pc
		}
		if (locks || pending) && rep.Table != nil && rep.Table.State == TableMissing {
			return fmt.Errorf("table %s%s: %w: no locks or pending messages to look for; sqs-once preflight names the command that creates it", rep.Table.Table, inRegion(c.cfg.Region), ErrNoTable)
		}
		// scannedIn names the store --locks and --pending scanned: the
		// table, or a Redis server or PostgreSQL or MySQL table.
		var scannedIn string
		var recs *Records
		if locks || pending {
			var closeStore func()
			var err error
			recs, closeStore, err = c.records(ctx)
			if err != nil {
				return err
			}
			defer closeStore()
			scannedIn = recs.where()
		}
		if locks {
			var bar *progressBar
			if c.io.Terminal(c.io.Stderr) {
				scanning := recs.Table
				if recs.Where != "" {
					scanning = recs.Where
				}
				bar = newProgressBar(c.io.Stderr, "scanning "+scanning, 0)
			}
			found, err := recs.Locks(ctx, func(scanned, n int) {
				rep.Scanned = scanned
				if bar != nil {
					bar.set(int64(scanned), count(scanned, "item", "items")+" scanned, "+count(n, "lock", "locks"))
				}
			})
			if bar != nil {
				bar.done()
			}
			if err != nil {
				return err
			}
			rep.Locks = found
		}
		if pending {
			if window == 0 {
				window = c.targets.DedupeWindow
			}
			from := c.targets.DedupeWindowFrom
			if cmd.Flags().Changed("dedupe-window") {
				from = "--dedupe-window"
			}
			var bar *progressBar
			if c.io.Terminal(c.io.Stderr) {
				bar = newProgressBar(c.io.Stderr, "scanning "+scannedIn+" for pending messages", 0)
			}
			found, err := recs.PendingKeys(ctx, window, pendingAge, func(scanned, n int) {
				if bar != nil {
					bar.set(int64(scanned), count(scanned, "item", "items")+" scanned, "+count(n, "key", "keys")+" with messages pending")
				}
			})
			if bar != nil {
				bar.done()
			}
			if err != nil {
				return err
			}
			if window > 0 {
				found.DedupeWindowFrom = from
			}
			rep.Pending = &found
		}
		if c.json {
			return c.printJSON(rep)
		}
		w := c.io.Stdout
		c.printTargets()
		if rep.Table != nil {
			fmt.Fprintf(w, "table %s: %s\n", rep.Table.Table, tableWords(rep.Table, awsFlags("dynamodb", "", endpointsOf(c.cfg))))
		}
		// No queue (status --table T --locks): no table of queues, not an
		// empty header.
		if len(rep.Queues) > 0 {
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(tw, "queue\tvisible\tin flight\tdelayed\toldest\t")
			for _, s := range rep.Queues {
				age := "-"
				if s.OldestAge != nil {
					age = (time.Duration(*s.OldestAge) * time.Second).String()
				}
				fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t\n", s.Name, s.Visible, s.InFlight, s.Delayed, age)
			}
			_ = tw.Flush()
		}
		// One note when every queue's age is unknown for the same reason
		// (no CloudWatch permission, say), else one per queue.
		notes := map[string]bool{}
		for _, s := range rep.Queues {
			notes[c.ageNote(s, verbose)] = true
		}
		for _, s := range rep.Queues {
			note := c.ageNote(s, verbose)
			switch {
			case note == "":
			case len(notes) == 1:
				fmt.Fprintf(w, "  oldest: %s\n", note)
			default:
				fmt.Fprintf(w, "  %s oldest: %s\n", s.Name, note)
			}
			if len(notes) == 1 {
				break
			}
		}
		if rep.Processor != nil {
			fmt.Fprintln(w, processorWords(*rep.Processor, verbose))
		}
		if locks {
			fmt.Fprintf(w, "\n%s under %s# in %s (%s scanned)\n", count(len(rep.Locks), "PROCESSING record", "PROCESSING records"), c.targets.KeyPrefix, scannedIn, count(rep.Scanned, "item", "items"))
			if len(rep.Locks) > 0 {
				tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
				// A hashed id cannot be turned back into its key: the
				// column says what it shows, the hash the logs show.
				column := "key"
				if c.targets.HashKeys {
					column = "key hash"
				}
				fmt.Fprintln(tw, column+"\tfence\towner\tlock")
				for _, r := range rep.Locks {
					fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", r.Key, r.Fence, r.Owner, lockWords(r, c.io.Now()))
				}
				_ = tw.Flush()
			}
		}
		if rep.Pending != nil {
			c.printPending(*rep.Pending, scannedIn)
		}
		return nil
	})
	return cmd
}

// ageNote is what status says of a queue whose age is missing. An
// endpoint that does not serve the metric (an emulator) is said to, in a
// line, the SDK's error only with --verbose: it is no fault, and its text
// (a 404, a decode error) would read as one.
func (c *cli) ageNote(s QueueStatus, verbose bool) string {
	if s.AgeNote != AgeNotAvailable {
		return s.AgeNote
	}
	note := s.AgeNote + " (the endpoint set in place of AWS's does not serve CloudWatch's ApproximateAgeOfOldestMessage"
	if !verbose {
		return note + "; --verbose shows the SDK's error)"
	}
	return note + "): " + s.AgeError
}

// processorWords is status's line of the processor's counts: the counts,
// or why there are none (the SDK's error for an endpoint that does not
// serve CloudWatch only with verbose, as ageNote).
func processorWords(pc ProcessorCounts, verbose bool) string {
	if pc.Function == "" {
		return "processor: " + pc.Note
	}
	line := fmt.Sprintf("processor %s (%s): ", pc.Function, periodWords(pc))
	switch {
	case pc.Note == MetricNotAvailable:
		line += pc.Note + " (the endpoint set in place of AWS's does not serve CloudWatch's metrics of namespace " + pc.Namespace
		if !verbose {
			return line + "; --verbose shows the SDK's error)"
		}
		return line + "): " + pc.Error
	case pc.Note != "":
		return line + pc.Note
	}
	return line + processorCountsWords(pc)
}

// printPending says what status --pending found: how many keys have had
// messages pending for the age or longer (or, the window unknown, at
// all), how it was told, the oldest, and what to do.
func (c *cli) printPending(p PendingCount, scannedIn string) {
	w := c.io.Stdout
	now := c.io.Now()
	age := time.Duration(p.AgeSeconds) * time.Second
	under := c.targets.KeyPrefix + "#"
	scanned := count(p.Scanned, "item", "items") + " scanned"
	if p.Past != nil {
		fmt.Fprintf(w, "\n%s with emitted messages pending for %s or more under %s in %s (%d pending in all; %s)\n",
			count(*p.Past, "key", "keys"), age, under, scannedIn, p.Keys, scanned)
		fmt.Fprintf(w, "  a key's completion time is its window's end less the dedupe window, %s (%s)", time.Duration(p.DedupeWindowSeconds)*time.Second, p.DedupeWindowFrom)
		if recent := p.Keys - *p.Past; recent > 0 {
			fmt.Fprintf(w, "; %s completed less than %s ago: %s first send may still be under way", count(recent, "key", "keys"), age, plural(recent, "its", "their"))
		}
		fmt.Fprintln(w)
	} else {
		fmt.Fprintf(w, "\n%s with emitted messages pending under %s in %s (%s)\n", count(p.Keys, "key", "keys"), under, scannedIn, scanned)
		if p.Keys > 0 {
			fmt.Fprintln(w, "  for how long is unknown: the dedupe window is (give --stack, or --dedupe-window with the processor's DEDUPE_WINDOW); every key pending is counted, those whose first send is under way too")
		}
	}
	if len(p.Listed) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	column := "key"
	if c.targets.HashKeys {
		column = "key hash"
	}
	fmt.Fprintln(tw, column+"\tcompleted\twindow ends")
	for _, k := range p.Listed {
		done, ends := "unknown", "unknown"
		if k.CompletedAt != nil {
			done = fmt.Sprintf("%s (%s)", stamp(*k.CompletedAt), ago(*k.CompletedAt, now))
		}
		if k.WindowEndsAt != nil {
			ends = fmt.Sprintf("%s (%s)", stamp(*k.WindowEndsAt), ago(*k.WindowEndsAt, now))
		}
		if k.WindowEnded {
			ends += ": ended, the next delivery runs the handler again and drops them"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", shown(k.Key), done, ends)
	}
	_ = tw.Flush()
	counted := p.Keys
	if p.Past != nil {
		counted = *p.Past
	}
	if more := counted - len(p.Listed); more > 0 {
		fmt.Fprintf(w, "  and %d more, not listed\n", more)
	}
	key := "KEY"
	if c.targets.HashKeys {
		key = "--hash-keys=false KEY_HASH"
	}
	fmt.Fprintf(w, "next: sqs-once inspect %s shows a key's pending messages; sqs-once send-pending %s sends them now (its next delivery also does; the processor's ERROR lines give each refusal)\n", key, key)
}

// queue resolves a queue argument (Targets.Queue) and records its use.
func (c *cli) queue(name string) (string, error) {
	u, err := c.targets.Queue(name)
	if err == nil {
		c.use("queue " + QueueName(u))
	}
	return u, err
}

func (c *cli) printTargets() {
	t := c.targets
	if t.Stack != "" {
		fmt.Fprintf(c.io.Stdout, "stack %s", t.Stack)
		if t.Table != "" {
			fmt.Fprintf(c.io.Stdout, ", table %s, key prefix %s (%s)", t.Table, t.KeyPrefix, t.KeyPrefixFrom)
			if t.HashKeys {
				fmt.Fprintf(c.io.Stdout, ", keys hashed (%s)", t.HashKeysFrom)
			}
		}
		fmt.Fprintln(c.io.Stdout)
	}
}

// lockWords says when a lock expires, or that it has.
func lockWords(r Record, now time.Time) string {
	if r.LockExpiresAt == nil {
		return "no expiry recorded: not written by sqs-once; treat as live"
	}
	if r.Live {
		return fmt.Sprintf("live, expires %s (%s)", stamp(*r.LockExpiresAt), ago(*r.LockExpiresAt, now))
	}
	return fmt.Sprintf("expired %s (%s): the holder stopped without finishing; the next message with this key takes it over", stamp(*r.LockExpiresAt), ago(*r.LockExpiresAt, now))
}

// describe is the record in plain words, one "label value" pair a line.
func describe(r Record, now time.Time) [][2]string {
	lines := [][2]string{{"key", r.Key}}
	if r.KeyHash != "" && r.KeyHash != r.Key {
		lines = append(lines, [2]string{"key hash", r.KeyHash + "  (SHA-256 of the key, HASH_KEYS=on: the logs and metrics show this)"})
	}
	lines = append(lines, [2]string{"record id", r.RecordID + "  (look it up in the logs, with the fence below)"})
	var status string
	switch r.Status {
	case store.StatusProcessing:
		if r.Live {
			status = "PROCESSING: a processor holds the lock and may be running the handler right now"
		} else {
			status = "PROCESSING, lock expired: its holder stopped without completing or releasing (a crash or a timeout); the next message with this key takes it over, or sqs-once release frees it now"
		}
	case store.StatusCompleted:
		pending := len(r.Pending) > 0 || r.PendingError != ""
		switch {
		case r.Remaining > 0 && pending:
			status = "COMPLETED, messages pending: the handler succeeded and its completion is committed; the messages it emitted are not sent yet (below)"
		case r.Remaining > 0:
			status = "COMPLETED: the handler succeeded; a message with this key is deleted as a duplicate until the window ends (sqs-once forget lets it run again)"
		case pending:
			status = "COMPLETED, window ended, messages pending: the handler succeeded; the messages it emitted were never sent (below)"
		default:
			status = "COMPLETED, window ended: the next message with this key runs the handler again"
		}
	case store.StatusReleased:
		status = "RELEASED: the last attempt failed and gave the lock up; the next message with this key runs the handler"
	default:
		status = string(r.Status) + ": not a status sqs-once writes; the processor retries such a key and never runs it"
	}
	lines = append(lines, [2]string{"status", status})
	if r.Owner != "" {
		lines = append(lines, [2]string{"owner", r.Owner + "  (the token of the acquisition that wrote the record)"})
	}
	lines = append(lines, [2]string{"fence", fmt.Sprint(r.Fence)})
	switch r.Status {
	case store.StatusProcessing:
		lines = append(lines, [2]string{"lock", lockWords(r, now)})
	case store.StatusCompleted:
		if r.ExpiresAt != nil {
			lines = append(lines, [2]string{"window ends", fmt.Sprintf("%s (%s)", stamp(*r.ExpiresAt), ago(*r.ExpiresAt, now))})
		}
	}
	if r.Status != store.StatusCompleted && r.ExpiresAt != nil {
		lines = append(lines, [2]string{"record TTL", fmt.Sprintf("%s (%s): the store may delete the record after this (DynamoDB TTL, Redis key expiry, PostgreSQL or MySQL Sweep)", stamp(*r.ExpiresAt), ago(*r.ExpiresAt, now))})
	}
	return append(lines, pendingLines(r)...)
}

func (c *cli) printRecord(r Record) {
	tw := tabwriter.NewWriter(c.io.Stdout, 0, 0, 2, ' ', 0)
	for _, l := range describe(r, c.io.Now()) {
		fmt.Fprintf(tw, "%s\t%s\n", l[0], l[1])
	}
	_ = tw.Flush()
}

func (c *cli) inspectCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "inspect KEY",
		Short: "Show a key's idempotency record in plain words",
		Long: `inspect reads the key's record (strongly consistent) and says what it means:
its status, owner and fence, when its lock expires or its dedupe window
ends, and the record id (<KEY_PREFIX>#<KEY>) to look for in the logs.
A key without a record exits 4.

KEY is the plain key. When the processor hashes keys (HASH_KEYS=on, read
from the stack's processor, or --hash-keys), the record id is
<KEY_PREFIX>#<SHA-256 of KEY>, and the logs show the hash: inspect,
release and forget hash KEY and print the id looked up. A hash copied from
the logs is looked up as it is with --hash-keys=false. A key not found
under one id but under the other says which flag finds it.

A completed key whose emitted messages (sqsonce.Emit) are not sent yet
shows them: how many, that the next delivery of the key sends them (or
sqs-once send-pending now), and one line each: its position, destination,
emit id (the sqs-once-emit-id attribute it is sent with), group, body size
and start (escaped), and how many attributes it has. --json gives them
whole, under "pending".

With --stack and a processor whose Target is states:<state machine ARN>
or durable:<function>:<version or alias>, inspect also prints the name of the key's execution and the AWS CLI command
that looks it up: the execution a crashed processor may have started before
writing the key's completion.`,
		Example: `  sqs-once inspect --stack orders order-42
  sqs-once inspect --stack orders --json order-42 | jq .status
  sqs-once inspect --table orders-idem --key-prefix orders order-42
  sqs-once inspect --table orders-idem --key-prefix orders --hash-keys order-42
  sqs-once inspect --stack orders --hash-keys=false 3bf8b157c4238eefe5ae4a66eca81c6b887d4dcedb58dd674271859f4dc2edfd`,
		Args: cobra.ArbitraryArgs,
	}
	cmd.RunE = c.keyCommand(c.inspect)
	return cmd
}

// inspect is inspect's body: key's record in plain words, or as JSON.
func (c *cli) inspect(ctx context.Context, recs *Records, key string) error {
	r, err := recs.Get(ctx, key)
	if err != nil {
		return err
	}
	r.Execution = executionOf(c.targets.Target, recs.shownKey(key), c.targets.Region, endpointsOf(c.cfg))
	if c.json {
		return c.printJSON(r)
	}
	c.printRecord(r)
	if e := r.Execution; e != nil {
		// The name a crash between the start and the completion left
		// taken: the execution to look at before releasing the lock.
		fmt.Fprintf(c.io.Stdout, "execution name  %s\n", e.Name)
		if e.Lookup != "" {
			fmt.Fprintf(c.io.Stdout, "look it up      %s\n", e.Lookup)
		}
	}
	return nil
}

func (c *cli) releaseCmd() *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "release [--force] KEY",
		Short: "Free a stuck PROCESSING lock so the key can run again",
		Long: `release frees a key whose lock is stuck PROCESSING. It is the processor's own
release, made with the owner read from the record: the write is conditional
on the record still being that owner's PROCESSING lock, so a lock taken over
meanwhile is left alone (exit 3). The record becomes RELEASED and keeps its
fence (a lock written before fencing, without one, is released the same way).

A lock that has not expired is refused (exit 3): a processor may be running
the handler right now. --force releases it anyway. It risks a second side
effect: another message with the key can then run the handler while the
holder is still running; the holder learns it only at its next renewal
(LOCK_TIMEOUT), which cancels its handler as lock lost, and a side effect
already under way goes on. Use it only when you know the holder is dead (its invocation timed out
or crashed, per the logs) and waiting for the lock to expire is too long.

KEY is the plain key, hashed when the processor hashes keys (see
sqs-once inspect --help).`,
		Example: `  sqs-once release --stack orders order-42
  sqs-once release --stack orders --force order-42`,
		Args: cobra.ArbitraryArgs,
	}
	cmd.Flags().BoolVar(&force, "force", false, "release a lock that has not expired (risks a duplicate side effect)")
	cmd.RunE = c.keyCommand(func(ctx context.Context, recs *Records, key string) error {
		r, err := recs.Release(ctx, key, force)
		if err != nil {
			return err
		}
		if c.json {
			return c.printJSON(struct {
				Released bool   `json:"released"`
				Forced   bool   `json:"forced"`
				Was      Record `json:"was"`
			}{true, r.Live, r})
		}
		how := "its lock had expired"
		if r.Live {
			how = fmt.Sprintf("FORCED: its lock was live for %s more; if its holder is still running, its side effect may happen twice", r.Remaining.Round(time.Second))
		}
		fmt.Fprintf(c.io.Stdout, "released %q (record %s, owner %s, fence %d; %s): the next message with this key runs the handler\n", key, r.RecordID, r.Owner, r.Fence, how)
		return nil
	})
	return cmd
}

func (c *cli) forgetCmd() *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:   "forget [--yes] KEY",
		Short: "Delete a COMPLETED record so the key may run again",
		Long: `forget deletes a key's COMPLETED record, so that the next message with the
key runs the handler again instead of being deleted as a duplicate: for a
side effect that was undone, or a completion recorded by mistake. It asks
for confirmation; --yes skips the question (scripts). The delete is
conditional on the record being the completion that was shown.

KEY is the plain key, hashed when the processor hashes keys (see
sqs-once inspect --help).`,
		Example: `  sqs-once forget --stack orders order-42
  sqs-once forget --stack orders --yes order-42`,
		Args: cobra.ArbitraryArgs,
	}
	cmd.Flags().BoolVar(&yes, "yes", false, "do not ask for confirmation")
	cmd.RunE = c.keyCommand(func(ctx context.Context, recs *Records, key string) error {
		r, err := recs.Forget(ctx, key, func(r Record) (bool, error) {
			if yes {
				return true, nil
			}
			if !c.json {
				c.printRecord(r)
			}
			question := fmt.Sprintf("Forget %q? The next message with this key runs the handler again.", key)
			if n := len(r.Pending); n > 0 {
				question += fmt.Sprintf(" Its %s pending %s dropped, never sent.", count(n, "message", "messages"), plural(n, "is", "are"))
			}
			return c.confirm(question)
		})
		if err != nil {
			return err
		}
		if c.json {
			return c.printJSON(struct {
				Forgotten bool   `json:"forgotten"`
				Record    Record `json:"record"`
			}{true, r})
		}
		fmt.Fprintf(c.io.Stdout, "forgot %q (record %s deleted): the next message with this key runs the handler\n", key, r.RecordID)
		return nil
	})
	return cmd
}

func (c *cli) peekCmd() *cobra.Command {
	var n int
	var body bool
	cmd := &cobra.Command{
		Use:   "peek [--max N] [--body] QUEUE",
		Short: "Show messages with their attributes without consuming them",
		Long: `peek receives up to --max messages from QUEUE (main, dlq, operator, or a
queue URL), shows each with its attributes (the reason it reached the
operator queue, its replay count, its first-sent time, its original message
id) and makes every one visible again at once. Bodies only with --body.

A peek is a receive: it adds one to each message's receive count. On the
main queue that counts towards maxReceiveCount, bringing the message closer
to the dead-letter queue; the DLQ is consumed by the replayer, which may
take a message while you look.`,
		Example: `  sqs-once peek --stack orders operator
  sqs-once peek --stack orders --max 50 --body operator
  sqs-once peek --stack orders --json dlq | jq '.[].reason'`,
		Args: cobra.ArbitraryArgs,
	}
	cmd.Flags().IntVar(&n, "max", 10, "show at most `N` messages")
	cmd.Flags().BoolVar(&body, "body", false, "show the bodies too")
	cmd.RunE = c.run(func(ctx context.Context, args []string) error {
		if len(args) != 1 {
			return fmt.Errorf("%w: give exactly one QUEUE: main, dlq, operator or a URL", ErrUsage)
		}
		if n < 1 {
			return fmt.Errorf("%w: --max must be at least 1", ErrUsage)
		}
		u, err := c.queue(args[0])
		if err != nil {
			return err
		}
		msgs, err := c.queues().Peek(ctx, u, n, body)
		if err != nil {
			return err
		}
		if c.json {
			if msgs == nil {
				msgs = []Message{}
			}
			return c.printJSON(msgs)
		}
		c.printMessages(args[0], msgs, body)
		return nil
	})
	return cmd
}

func (c *cli) printMessages(queue string, msgs []Message, body bool) {
	w := c.io.Stdout
	now := c.io.Now()
	fmt.Fprintf(w, "%s from %s (made visible again)\n", count(len(msgs), "message", "messages"), queue)
	for i, m := range msgs {
		fmt.Fprintf(w, "\n#%d  %s\n", i+1, m.MessageID)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		if m.SentAt != nil {
			fmt.Fprintf(tw, "  sent\t%s (%s), received %s\n", stamp(*m.SentAt), ago(*m.SentAt, now), count(m.ReceiveCount, "time", "times"))
		}
		if m.Reason != "" {
			fmt.Fprintf(tw, "  reason\t%s\n", m.Reason)
		}
		if m.ReplayCount != "" {
			fmt.Fprintf(tw, "  replays\t%s\n", m.ReplayCount)
		}
		if m.FirstSent != nil {
			fmt.Fprintf(tw, "  first sent\t%s (%s)\n", stamp(*m.FirstSent), ago(*m.FirstSent, now))
		}
		if m.OriginalID != "" {
			fmt.Fprintf(tw, "  original id\t%s\n", m.OriginalID)
		}
		if m.GroupID != "" {
			fmt.Fprintf(tw, "  group\t%s\n", m.GroupID)
		}
		names := make([]string, 0, len(m.Attributes))
		for name := range m.Attributes {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			a := m.Attributes[name]
			fmt.Fprintf(tw, "  attribute\t%s (%s) = %s\n", name, a.Type, a.Value)
		}
		if body && m.Body != nil {
			fmt.Fprintf(tw, "  body\t%s\n", strings.ReplaceAll(*m.Body, "\n", "\n\t"))
		} else {
			fmt.Fprintf(tw, "  body\t%d bytes (--body shows it)\n", m.BodyBytes)
		}
		_ = tw.Flush()
	}
}

// keyCommand is the body of a command on one KEY's record: the key checked
// and the table found first.
func (c *cli) keyCommand(body func(ctx context.Context, recs *Records, key string) error) func(*cobra.Command, []string) error {
	return c.run(func(ctx context.Context, args []string) error {
		key, err := keyArg(args)
		if err != nil {
			return err
		}
		recs, closeStore, err := c.records(ctx)
		if err != nil {
			return err
		}
		defer closeStore()
		if recs.HashKeys {
			// The id differs from the key given: say what is looked up,
			// on stderr, so that --json's stdout stays one document.
			fmt.Fprintf(c.io.Stderr, "keys hashed (%s): key %q is record id %s\n", c.targets.HashKeysFrom, key, recs.recordID(key))
		}
		return body(ctx, recs, key)
	})
}
