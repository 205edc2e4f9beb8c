package ops

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/spf13/cobra"

	"github.com/sqs-once/sqs-once/internal/clock"
)

// migration reads the queue, the stack and the consumer for preflight and
// cutover.
func (c *cli) migration(ctx context.Context, consumer string, timeout, window int) (*Migration, error) {
	if c.targets.MainQueue != "" {
		c.use("queue " + QueueName(c.targets.MainQueue))
	}
	if consumer != "" {
		c.use("consumer " + consumer)
	}
	m, err := ReadMigration(ctx, sqs.NewFromConfig(c.cfg), cloudformation.NewFromConfig(c.cfg), lambda.NewFromConfig(c.cfg), MigrationOptions{
		Region: c.cfg.Region, Stack: c.targets.Stack, QueueURL: c.flags.MainQueue, Consumer: consumer,
		ProcessorTimeoutSeconds: timeout, BatchingWindowSeconds: window, Endpoints: endpointsOf(c.cfg),
	})
	if err == nil {
		m.readStateMachine(ctx, sfn.NewFromConfig(c.cfg))
		m.readDurable(ctx, lambda.NewFromConfig(c.cfg))
		table := m.table
		if c.flags.Table != "" {
			table = c.flags.Table
		}
		if table != "" {
			c.use("table " + table)
		}
		m.readStore(ctx, dynamodb.NewFromConfig(c.cfg), table)
	}
	return m, err
}

func (c *cli) preflightCmd() *cobra.Command {
	var consumer string
	var timeout, window int
	cmd := &cobra.Command{
		Use:   "preflight [--consumer FUNCTION] [--processor-timeout S] [--batching-window S]",
		Short: "Check a queue you already have, and its consumer, before sqs-once consumes it",
		Long: `preflight checks what putting sqs-once in front of an existing queue and
its Lambda consumer (Target=lambda:<consumer>, docs/migration.md) depends on,
and says what to change for each check that fails. It changes nothing.

  visibility timeout  at least 6 x the processor's timeout + its batching window
  redrive policy      present, and pointing at the stack's dead-letter queue
  retention           above maxReceiveCount x the visibility timeout
  store               the store's own check, as Processor.Check runs it:
                      for DynamoDB the idempotency table exists, has
                      partition key id (String) and TTL on expiresAt; for
                      STORE=redis the server answers and evicts nothing.
                      A failure prints the command that fixes it
                      (aws dynamodb create-table ..., update-time-to-live ...)
  target              the stack's processor delivers to the consumer
  consumer timeout    the processor's timeout outlasts the consumer's by a tenth + 2 s
  mappings            which functions consume the queue: the consumer's
                      mapping, the stack's, any other; and what is next:
                      the cutover once every other check passes, else
                      their changes (cutover refuses while one fails)
  stack parameter     ProcessorMappingEnabled agrees with the stack's mapping
  replay age limit    MaxMessageAge within the queue's retention
  state machine       with Target=states:<ARN>: it exists, and is STANDARD
                      (an EXPRESS one does not deduplicate starts by name: a
                      warning)
  durable function    with Target=durable:<function>:<qualifier>: the version
                      or alias exists and has durable execution on; with
                      TargetInvocationType=RequestResponse, ProcessorTimeout
                      outlasts the execution's wait (else a warning)

Before the stack exists, give the queue (--main-queue) and the consumer
(--consumer), and the ProcessorTimeout and ProcessorBatchingWindow you will
deploy with (--processor-timeout, default 30; --batching-window, default 0).
With --stack it reads all of them from the stack: the queue it consumes, its
processor's timeout, its mapping's batching window, its dead-letter queue,
and the consumer its Target names (--consumer to name another).

It exits 6 when a check fails, 0 when none does (warnings included).`,
		Example: `  sqs-once preflight --main-queue https://sqs.eu-west-1.amazonaws.com/123456789012/orders --consumer orders-consumer
  sqs-once preflight --stack orders-once
  sqs-once preflight --stack orders-once --json | jq '.checks[] | select(.status == "FAIL")'`,
		Args: func(cmd *cobra.Command, args []string) error {
			if err := cobra.NoArgs(cmd, args); err != nil {
				return err
			}
			f := cmd.Flags()
			if c.flags.Stack != "" && (f.Changed("processor-timeout") || f.Changed("batching-window")) {
				return fmt.Errorf("%w: --processor-timeout and --batching-window are for a queue without a stack; with --stack, the stack's own are checked", ErrUsage)
			}
			if !slices.Contains(ProcessorTimeouts, timeout) {
				return fmt.Errorf("%w: --processor-timeout %d: not a ProcessorTimeout the template allows (%s)", ErrUsage, timeout, ints(ProcessorTimeouts))
			}
			if !slices.Contains(BatchingWindows, window) {
				return fmt.Errorf("%w: --batching-window %d: not a ProcessorBatchingWindow the template allows (%s)", ErrUsage, window, ints(BatchingWindows))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&consumer, "consumer", "", "the Lambda `FUNCTION` that consumes the queue today (default: the one the stack's Target names)")
	f.IntVar(&timeout, "processor-timeout", 30, "without --stack: the ProcessorTimeout you will deploy with (`SECONDS`)")
	f.IntVar(&window, "batching-window", 0, "without --stack: the ProcessorBatchingWindow you will deploy with (`SECONDS`)")
	cmd.RunE = c.run(func(ctx context.Context, _ []string) error {
		if c.targets.Stack == "" && c.targets.MainQueue == "" {
			return fmt.Errorf("%w: no queue to check: give --stack NAME, or --main-queue URL with --consumer FUNCTION", ErrUsage)
		}
		m, err := c.migration(ctx, consumer, timeout, window)
		if err != nil {
			return err
		}
		checks := m.Checks()
		failed := Failed(checks)
		if c.json {
			if err := c.printJSON(struct {
				Migration *Migration `json:"migration"`
				Checks    []Check    `json:"checks"`
				Passed    bool       `json:"passed"`
			}{m, checks, len(failed) == 0}); err != nil {
				return err
			}
		} else {
			c.printChecks(m, checks)
		}
		if len(failed) > 0 {
			names := make([]string, len(failed))
			for i, f := range failed {
				names[i] = f.Name
			}
			return fmt.Errorf("%s (%s): %w", count(len(failed), "check failed", "checks failed"), strings.Join(names, ", "), ErrCheckFailed)
		}
		return nil
	})
	return cmd
}

func ints(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, ", ")
}

// migrationWords is the header of preflight and cutover: the queue, the
// stack, the consumer, the region.
func migrationWords(m *Migration) string {
	parts := []string{"queue " + QueueName(m.Queue.URL) + " (" + m.Queue.URL + ")"}
	if m.Stack != "" {
		parts = append(parts, "stack "+m.Stack)
	}
	if m.Consumer != nil {
		parts = append(parts, "consumer "+m.Consumer.Name)
	}
	if m.Region != "" {
		parts = append(parts, "region "+m.Region)
	}
	return strings.Join(parts, ", ")
}

func (c *cli) printChecks(m *Migration, checks []Check) {
	w := c.io.Stdout
	fmt.Fprintf(w, "preflight of %s\nwith %s\n\n", migrationWords(m), m.Settings())
	failed, warned, queueFix := 0, 0, false
	for _, ch := range checks {
		fmt.Fprintf(w, "%-4s  %s: %s\n", ch.Status, ch.Name, ch.Detail)
		for i, change := range ch.Change {
			label := "change:"
			if i > 0 {
				label = "       "
			}
			fmt.Fprintf(w, "      %s %s\n", label, change)
		}
		switch ch.Status {
		case CheckFail:
			failed++
		case CheckWarn:
			warned++
		}
		if ch.Status != CheckOK && slices.ContainsFunc(ch.Change, func(s string) bool { return strings.HasPrefix(s, "aws sqs set-queue-attributes") }) {
			queueFix = true
		}
	}
	fmt.Fprintln(w)
	switch {
	case failed > 0:
		fmt.Fprintf(w, "%s: make the changes above, then run this again.\n", count(failed, "check failed", "checks failed"))
	case warned > 0:
		fmt.Fprintf(w, "No check failed; %s.\n", count(warned, "warning", "warnings"))
	default:
		fmt.Fprintln(w, "Every check passed.")
	}
	if queueFix {
		fmt.Fprintln(w, "A queue attribute set by hand is undone by the next deploy of the code that defines the queue: change it there too.")
	}
}

func (c *cli) cutoverCmd() *cobra.Command {
	var consumer string
	var rollback, yes bool
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "cutover [--rollback] [--consumer FUNCTION] [--yes] [--wait D]",
		Short: "Move the queue from its consumer's event source mapping to the stack's (--rollback: back)",
		Long: `cutover puts the stack's processor in front of the consumer that reads the
queue today (docs/migration.md): it disables the consumer's event source
mapping on the queue, waits until Lambda reports it Disabled (its batches in
flight done), then enables the stack's mapping and waits until it is
Enabled. The two never consume the queue at the same time, so no message
reaches the consumer past the dedupe; in between, for seconds, nothing
consumes it and messages wait.

It first runs the preflight checks, the store's own among them (the
idempotency table exists, with its key schema and TTL), and refuses (exit 3,
nothing changed) when one fails, except the mappings' own state, which is
what it changes. --rollback does
the reverse without checks: disables the stack's mapping, then enables the
consumer's. Both ask for confirmation (--yes skips the question), print
each change, and may be run again: a mapping in the wanted state already is
left alone, so a second run finishes what a failed one left (exit 1 or 5).
An interrupt (Ctrl-C) does not stop it between the two mappings; a second
one does.

The consumer is the function the stack's Target names, or --consumer.
Afterwards make the change permanent, or a deploy undoes it: deploy the
stack with ProcessorMappingEnabled=true, and set the consumer's mapping
disabled in its own infrastructure code.`,
		Example: `  sqs-once cutover --stack orders-once
  sqs-once cutover --stack orders-once --yes
  sqs-once cutover --stack orders-once --rollback`,
		Args: cobra.NoArgs,
	}
	f := cmd.Flags()
	f.StringVar(&consumer, "consumer", "", "the Lambda `FUNCTION` that consumed the queue (default: the one the stack's Target names)")
	f.BoolVar(&rollback, "rollback", false, "give the queue back to the consumer: disable the stack's mapping, then enable the consumer's")
	f.BoolVar(&yes, "yes", false, "do not ask for confirmation")
	f.DurationVar(&wait, "wait", 5*time.Minute, "how long each mapping may take to reach its state")
	cmd.RunE = c.run(func(ctx context.Context, _ []string) error {
		if c.targets.Stack == "" {
			return fmt.Errorf("%w: cutover needs --stack NAME: the stack whose mapping takes over the queue", ErrUsage)
		}
		m, err := c.migration(ctx, consumer, 0, 0)
		if err != nil {
			return err
		}
		if !rollback {
			if blockers := cutoverBlockers(m, m.Checks()); len(blockers) > 0 {
				names := make([]string, len(blockers))
				for i, b := range blockers {
					names[i] = b.Name
				}
				// The store's fix is printed here too: with no table,
				// the command that creates it is what the operator needs.
				var fixes strings.Builder
				for _, b := range blockers {
					if b.Name != checkStore {
						continue
					}
					fmt.Fprintf(&fixes, "\n%s: %s", b.Name, b.Detail)
					for _, change := range b.Change {
						fmt.Fprintf(&fixes, "\n  change: %s", change)
					}
				}
				return fmt.Errorf("cutover of queue %s: %w: %s (%s); nothing was changed. Run sqs-once preflight --stack %s to see what to change%s",
					QueueName(m.Queue.URL), ErrRefused, count(len(blockers), "preflight check fails", "preflight checks fail"), strings.Join(names, ", "), m.Stack, fixes.String())
			}
		}
		steps, err := CutoverPlan(m, rollback)
		if err != nil {
			return err
		}
		again := "sqs-once cutover --stack " + m.Stack
		undo := again + " --rollback"
		if rollback {
			again, undo = undo, again
		}
		if consumer != "" {
			again += " --consumer " + consumer
			undo += " --consumer " + consumer
		}
		var pending []CutoverStep
		for _, s := range steps {
			if s.Was != s.Want {
				pending = append(pending, s)
			}
		}
		title := fmt.Sprintf("cutover of queue %s from %s to the processor of stack %s", QueueName(m.Queue.URL), consumerWords(m), m.Stack)
		if rollback {
			title = fmt.Sprintf("rollback of queue %s from the processor of stack %s to %s", QueueName(m.Queue.URL), m.Stack, consumerWords(m))
		}
		if len(pending) > 0 && !yes {
			var plan strings.Builder
			for i, s := range pending {
				fmt.Fprintf(&plan, "\n  %d. %s (%s now)", i+1, s.words(), s.Was)
			}
			ok, err := c.confirm(fmt.Sprintf("%s, region %s:%s\nGo ahead?", title, m.Region, plan.String()))
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("%s: %w; nothing was changed", strings.Fields(title)[0], ErrDeclined)
			}
		}
		if !c.json {
			fmt.Fprintln(c.io.Stdout, title+", region "+m.Region)
		}
		run := &Mappings{Lambda: lambda.NewFromConfig(c.cfg), Wait: wait, Poll: 2 * time.Second, Now: c.io.Now, Sleep: clock.Sleep, Region: m.Region}
		// An interrupt does not stop the steps: stopping between the two
		// would leave the queue unconsumed. --wait bounds them, and a
		// second interrupt kills the process (cmd/sqs-once).
		stopNote := context.AfterFunc(ctx, func() {
			fmt.Fprintln(c.io.Stderr, "interrupted: finishing the switch, so the queue is not left without a consumer (interrupt again to stop at once)")
		})
		defer stopNote()
		steps, err = run.Run(context.WithoutCancel(ctx), steps, func(s CutoverStep) {
			if !c.json {
				fmt.Fprintln(c.io.Stdout, "  "+stepWords(s))
			}
		})
		if c.json {
			if jerr := c.printJSON(struct {
				Rollback bool          `json:"rollback"`
				Steps    []CutoverStep `json:"steps"`
				Done     bool          `json:"done"`
			}{rollback, steps, err == nil}); jerr != nil {
				return jerr
			}
		}
		if err != nil {
			return fmt.Errorf("%w\n%s", err, stoppedWords(steps, again, undo))
		}
		if c.json {
			return nil
		}
		w := c.io.Stdout
		if len(pending) == 0 {
			fmt.Fprintln(w, "nothing changed: every mapping was in its state already.")
		}
		if !rollback {
			fmt.Fprintf(w, "done: the processor of stack %s consumes %s and hands each message it holds to %s.\n", m.Stack, QueueName(m.Queue.URL), consumerWords(m))
			fmt.Fprintln(w, "Make it permanent, or a deploy undoes it:")
			fmt.Fprintf(w, "  deploy stack %s with %s=true from now on\n", m.Stack, paramMappingEnabled)
			fmt.Fprintf(w, "  set %s's mapping on %s disabled in the consumer's own infrastructure code (docs/migration.md, Drift)\n", consumerWords(m), QueueName(m.Queue.URL))
			fmt.Fprintf(w, "Back out with: %s\n", undo)
			return nil
		}
		fmt.Fprintf(w, "done: %s consumes %s itself again; the processor of stack %s does not.\n", consumerWords(m), QueueName(m.Queue.URL), m.Stack)
		fmt.Fprintf(w, "Make it permanent: deploy stack %s with %s=false (or delete it), and keep the consumer's mapping enabled in its infrastructure code.\n", m.Stack, paramMappingEnabled)
		return nil
	})
	return cmd
}

func consumerWords(m *Migration) string {
	if m.Consumer == nil {
		return "its consumer"
	}
	return m.Consumer.Name
}

// stepWords says what a step did: "disabled orders-consumer's mapping
// 1a2b... (was Enabled)" or "... already Disabled".
func stepWords(s CutoverStep) string {
	if !s.Changed {
		return s.owner() + ": already " + s.Want
	}
	return s.verb() + "d " + s.owner() + " (was " + s.Was + ")"
}
