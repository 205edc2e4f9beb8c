package ops

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/sqs-once/sqs-once/internal/keyprefix"
	"github.com/sqs-once/sqs-once/internal/retrybudget"
	"github.com/sqs-once/sqs-once/internal/version"
)

// IO is what the CLI reads and writes, and its clock: the real ones in
// cmd/sqs-once, buffers and a test clock in tests.
type IO struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Terminal reports whether w is a terminal: progress bars are drawn
	// only there.
	Terminal func(w io.Writer) bool
	Now      func() time.Time
	// LoadConfig loads the AWS configuration; nil is the SDK's default
	// chain (environment, profiles, AWS_ENDPOINT_URL) as the AWS CLI uses.
	LoadConfig func(ctx context.Context, profile, region string) (aws.Config, error)
}

// StdIO is the process's standard streams and clock.
func StdIO() IO {
	return IO{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Terminal: IsTerminal, Now: time.Now}
}

// IsTerminal reports whether w is a file open on a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func defaultConfig(ctx context.Context, profile, region string) (aws.Config, error) {
	var opts []func(*config.LoadOptions) error
	if profile != "" {
		opts = append(opts, config.WithSharedConfigProfile(profile))
	}
	if region != "" {
		opts = append(opts, config.WithRegion(region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	// A redrive or release AWS answered is not sent again for a transport
	// quirk (retrybudget.SafeRequestBody).
	cfg.APIOptions = append(cfg.APIOptions, retrybudget.SafeRequestBody)
	return cfg, err
}

func noTerminal(io.Writer) bool { return false }

// cli is one run of the command line.
type cli struct {
	io      IO
	flags   Targets
	profile string
	region  string
	json    bool
	targets Targets
	cfg     aws.Config
	// used names the table and queues the command called, for the line
	// that says where a not-found or AWS error happened.
	used []string
}

// Main runs the sqs-once command line with args (without the program name)
// and returns the exit code. It never panics on input: every bad argument
// is a usage error (exit 2).
func Main(ctx context.Context, args []string, stdio IO) int {
	io := stdio
	if io.Now == nil {
		io.Now = time.Now
	}
	if io.Terminal == nil {
		io.Terminal = noTerminal
	}
	if io.LoadConfig == nil {
		io.LoadConfig = defaultConfig
	}
	if io.Stdin == nil {
		io.Stdin = strings.NewReader("")
	}
	c := &cli{io: io}
	root := c.root()
	root.SetArgs(args)
	root.SetIn(io.Stdin)
	root.SetOut(io.Stdout)
	root.SetErr(io.Stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	fmt.Fprintln(io.Stderr, "sqs-once:", err)
	// Every error a command or the set-up returns is a runError; anything
	// else comes from cobra's or pflag's parsing of the command line.
	var re runError
	if errors.As(err, &re) && !errors.Is(err, ErrUsage) {
		if where := c.where(err); where != "" {
			fmt.Fprintln(io.Stderr, "sqs-once:", where)
		}
		return ExitCode(err)
	}
	fmt.Fprintln(io.Stderr, "Run 'sqs-once --help' or 'sqs-once COMMAND --help' for usage.")
	return ExitUsage
}

// runError marks an error a command returned after its arguments parsed.
type runError struct{ error }

func (e runError) Unwrap() error { return e.error }

func (c *cli) root() *cobra.Command {
	root := &cobra.Command{
		Use:   "sqs-once",
		Short: "Operate an sqs-once stack: queues, idempotency records, redrive, cutover",
		// --version prints the release, the template's SemanticVersion.
		Version: version.Version,
		Long: `sqs-once inspects and repairs a deployed sqs-once stack, and moves a
queue's consumer behind one (preflight, cutover).

It finds the queues and the idempotency table from the stack's CloudFormation
outputs (--stack), the key prefix and whether keys are hashed from the
stack's processor (KEY_PREFIX, HASH_KEYS), or all from explicit flags, and
uses the AWS CLI's configuration chain: AWS_PROFILE or --profile,
AWS_REGION or --region, AWS_ENDPOINT_URL, credentials from the environment,
the shared files, SSO or the instance role.

Exit codes: 0 done; 1 an AWS call or something unexpected failed; 2 bad
usage; 3 refused (a live lock without --force, a record in another state or
changed since it was read, a question not confirmed, a cutover whose
preflight fails); 4 no such key, queue, stack or function; 5 a redrive or
cutover left work undone (failed or interrupted), or send-pending messages
not all sent; 6 a preflight check failed
(the idempotency table's among them); 7 no such idempotency table (a missing
table is never "no such key": sqs-once preflight names the command that
creates it).
--json prints one JSON document on stdout for scripts.`,
		Example: `  sqs-once status --stack orders
  sqs-once status --stack orders --locks
  sqs-once inspect --stack orders order-42
  sqs-once release --stack orders --force order-42
  sqs-once send-pending --stack orders order-42
  sqs-once peek --stack orders operator
  sqs-once redrive --stack orders --from operator --to main --reason max-attempts --dry-run
  sqs-once preflight --stack orders
  sqs-once cutover --stack orders`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// Flags anywhere, the key last: sqs-once release --stack orders --force KEY.
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			// A --hash-keys=false given wins over a stack's HASH_KEYS=on
			// as much as --hash-keys does over off: only whether the flag
			// was given tells the two apart from no flag.
			if f := cmd.Flags().Lookup("hash-keys"); f != nil && f.Changed {
				c.flags.HashKeysFrom = "flag"
			}
			return c.setup(cmd.Context())
		},
	}
	root.CompletionOptions.DisableDefaultCmd = true
	pf := root.PersistentFlags()
	pf.StringVar(&c.flags.Stack, "stack", "", "CloudFormation stack `NAME` to read the queues, table, key prefix and key hashing from")
	pf.StringVar(&c.flags.MainQueue, "main-queue", "", "main queue `URL` (default: the stack's MainQueueUrl)")
	pf.StringVar(&c.flags.DeadLetter, "dlq", "", "dead-letter queue `URL` (default: the stack's DeadLetterQueueUrl)")
	pf.StringVar(&c.flags.OperatorQueue, "operator-queue", "", "operator queue `URL` (default: the stack's OperatorQueueUrl)")
	pf.StringVar(&c.flags.Table, "table", "", "idempotency table `NAME` (default: the stack's IdempotencyTableName)")
	pf.StringVar(&c.flags.KeyPrefix, "key-prefix", "", "record id `PREFIX`, the processor's KEY_PREFIX (default: read from the stack's processor, else <stack>-processor)")
	pf.BoolVar(&c.flags.HashKeys, "hash-keys", false, "the processor hashes keys (HASH_KEYS=on): a KEY's record id is <prefix>#<SHA-256 of KEY> (default: read from the stack's processor, else off)")
	pf.StringVar(&c.flags.Store, "store", "", "the records' store `KIND`, the processor's STORE: dynamodb, redis, postgres or mysql (default: read from the stack's processor, else dynamodb)")
	pf.StringVar(&c.flags.RedisURL, "redis-url", "", "the Redis store's server `URL`, redis://[user:password@]host:port[/db] or rediss:// (default: the stack's processor's REDIS_URL)")
	pf.BoolVar(&c.flags.RedisCluster, "redis-cluster", false, "--redis-url is a Redis Cluster's, as REDIS_CLUSTER=true")
	pf.StringVar(&c.flags.DatabaseURL, "database-url", "", "the PostgreSQL or MySQL store's database `URL`: postgres://user:password@host:port/db with --store postgres, user:password@tcp(host:port)/db (go-sql-driver/mysql's DSN) with --store mysql; with --table")
	pf.StringVar(&c.profile, "profile", "", "AWS shared config `PROFILE` (default: AWS_PROFILE)")
	pf.StringVar(&c.region, "region", "", "AWS `REGION` (default: AWS_REGION or the profile's)")
	pf.BoolVar(&c.json, "json", false, "print one JSON document on stdout, for scripts")
	root.AddCommand(c.statusCmd(), c.inspectCmd(), c.releaseCmd(), c.forgetCmd(), c.sendPendingCmd(), c.peekCmd(), c.redriveCmd(), c.preflightCmd(), c.cutoverCmd())
	return root
}

func (c *cli) setup(ctx context.Context) error {
	// A prefix the processor refuses names no record it writes: say so
	// before any AWS call, rather than report its keys as never processed.
	if p := c.flags.KeyPrefix; p != "" {
		if err := keyprefix.Check(p); err != nil {
			return fmt.Errorf("%w: --key-prefix %v: not a key prefix the processor accepts", ErrUsage, err)
		}
	}
	cfg, err := c.io.LoadConfig(ctx, c.profile, c.region)
	if err != nil {
		return runError{fmt.Errorf("load AWS configuration: %w: %w", ErrAWS, err)}
	}
	if c.flags.Store != "" {
		c.flags.StoreFrom = "flag"
	}
	if c.flags.RedisURL != "" {
		c.flags.RedisURLFrom = "--redis-url"
	}
	if cfg.Region == "" && !c.awsFree() {
		return fmt.Errorf("%w: no AWS region: give --region, set AWS_REGION, or set a region in the profile", ErrUsage)
	}
	c.cfg = cfg
	c.flags.Region = cfg.Region
	t, err := Resolve(ctx, cloudformation.NewFromConfig(cfg), lambda.NewFromConfig(cfg), c.flags)
	if err != nil {
		return runError{err}
	}
	c.targets = t
	return nil
}

// awsFree says whether the command needs no AWS call: a Redis, PostgreSQL
// or MySQL store named by flags, without a stack or a queue, needs no AWS
// region.
func (c *cli) awsFree() bool {
	f := c.flags
	return (f.Store == StoreRedis || sqlStore(f.Store)) && f.Stack == "" &&
		f.MainQueue == "" && f.DeadLetter == "" && f.OperatorQueue == ""
}

// records are the records of the processor's store, chosen as the
// processor chooses it: --store, else the stack's processor's STORE, else
// DynamoDB. The caller closes the store's connections with close.
func (c *cli) records(ctx context.Context) (recs *Records, close func(), err error) {
	prefix, err := need(c.targets.KeyPrefix, "key prefix", "--key-prefix PREFIX")
	if err != nil {
		return nil, nil, err
	}
	var o opened
	switch kind := c.targets.Store; kind {
	case "", StoreDynamoDB:
		table, err := need(c.targets.Table, "idempotency table", "--table NAME")
		if err != nil {
			return nil, nil, err
		}
		o = dynamoStore(c.cfg, table)
		c.use("table " + table)
		recs = &Records{Store: o.store, DB: dynamodb.NewFromConfig(c.cfg), Table: table, Region: c.cfg.Region}
	case StoreRedis:
		if o, err = redisStore(c.targets.RedisURL, c.targets.RedisCluster, c.targets.RedisURLFrom); err != nil {
			return nil, nil, err
		}
		recs = &Records{Store: o.store, Where: o.where}
		c.use(o.where)
	case StorePostgres:
		// The stack's table is its DynamoDB table: the PostgreSQL
		// store's is named by --table only.
		if o, err = pgStore(ctx, c.targets.DatabaseURL, c.flags.Table); err != nil {
			return nil, nil, err
		}
		recs = &Records{Store: o.store, Where: o.where, Table: c.flags.Table}
		c.use(o.where)
	case StoreMySQL:
		// As PostgreSQL's: the table is named by --table only.
		if o, err = mysqlStore(c.targets.DatabaseURL, c.flags.Table); err != nil {
			return nil, nil, err
		}
		recs = &Records{Store: o.store, Where: o.where, Table: c.flags.Table}
		c.use(o.where)
	default:
		what := "--store " + kind
		if c.targets.StoreFrom != "flag" {
			what = "the processor's " + envStore + "=" + kind
		}
		return nil, nil, fmt.Errorf("%w: %s: not a store kind; want %s, %s, %s or %s", ErrUsage, what, StoreDynamoDB, StoreRedis, StorePostgres, StoreMySQL)
	}
	recs.Prefix, recs.HashKeys, recs.Now, recs.scan = prefix, c.targets.HashKeys, c.io.Now, o.scan
	return recs, o.close, nil
}

// use records that the command calls on what: where says so if it fails.
func (c *cli) use(what string) {
	if !slices.Contains(c.used, what) {
		c.used = append(c.used, what)
	}
}

// where says where a not-found or AWS error happened: the region, profile
// and stack the command looked in, and the table and queues it called. A
// wrong region or account is the usual cause of a "not found", and an
// access error is about the credentials' permissions there.
func (c *cli) where(err error) string {
	if (!errors.Is(err, ErrNotFound) && !errors.Is(err, ErrNoTable) && !errors.Is(err, ErrAWS)) || c.awsFree() {
		// Without AWS (a Redis, PostgreSQL or MySQL store by flags), the error
		// itself names the store: no region or profile to suggest.
		return ""
	}
	region := c.cfg.Region
	if region == "" {
		region = c.region
	}
	parts := []string{"region " + region}
	if region == "" {
		parts = []string{"no region"}
	}
	if c.profile != "" {
		parts = append(parts, "profile "+c.profile)
	}
	if c.flags.Stack != "" {
		parts = append(parts, "stack "+c.flags.Stack)
	}
	parts = append(parts, c.used...)
	at := strings.Join(parts, ", ")
	switch {
	case errors.Is(err, ErrNotFound), errors.Is(err, ErrNoTable):
		return "looked in " + at + ". If it is elsewhere, give --region and --profile (or set AWS_REGION and AWS_PROFILE)."
	case accessDenied(err):
		return "refused in " + at + ": the credentials in use lack the permission the error names, or are not valid there."
	}
	return "the failed call was made in " + at + "."
}

func (c *cli) queues() *Queues {
	metrics := cloudwatch.NewFromConfig(c.cfg)
	return &Queues{SQS: sqs.NewFromConfig(c.cfg), Metrics: metrics, MetricsEndpoint: aws.ToString(metrics.Options().BaseEndpoint), Now: c.io.Now}
}

// counts reads the processor's metrics from the CloudWatch the queues'
// age comes from.
func (c *cli) counts() *Counts {
	metrics := cloudwatch.NewFromConfig(c.cfg)
	return &Counts{Metrics: metrics, MetricsEndpoint: aws.ToString(metrics.Options().BaseEndpoint), Now: c.io.Now}
}

// run wraps a command's body: errors are marked as the command's own (not
// cobra's usage errors) and, with --json, reported as {"error": ...} too.
func (c *cli) run(body func(ctx context.Context, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		err := body(cmd.Context(), args)
		if err == nil {
			return nil
		}
		if errors.Is(err, ErrUsage) {
			return err
		}
		return runError{err}
	}
}

func (c *cli) printJSON(v any) error {
	enc := json.NewEncoder(c.io.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// confirm asks question on stderr and reads the answer from stdin; only y
// or yes is a yes. No answer (stdin closed, as in a script without --yes) is
// a no.
func (c *cli) confirm(question string) (bool, error) {
	fmt.Fprintf(c.io.Stderr, "%s [y/N] ", question)
	line, err := bufio.NewReader(c.io.Stdin).ReadString('\n')
	if err != nil && line == "" {
		fmt.Fprintln(c.io.Stderr, "\nno answer on standard input: not confirmed (use --yes in scripts)")
		return false, nil
	}
	a := strings.ToLower(strings.TrimSpace(line))
	return a == "y" || a == "yes", nil
}

// keyArg is the single KEY argument, with a usage error that says so.
func keyArg(args []string) (string, error) {
	if len(args) != 1 || args[0] == "" {
		return "", fmt.Errorf("%w: give exactly one KEY, last (got %d arguments)", ErrUsage, len(args))
	}
	return args[0], nil
}

// ago says how far t is from now in words: "in 1m20s" or "5m ago".
func ago(t, now time.Time) string {
	d := t.Sub(now).Round(time.Second)
	if d >= 0 {
		return "in " + d.String()
	}
	return (-d).String() + " ago"
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }
