package docs

import (
	"context"
	"errors"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sqs-once/sqs-once/internal/envconfig"
	"github.com/sqs-once/sqs-once/internal/replay"
	"github.com/sqs-once/sqs-once/internal/storeenv"
	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/sqsoncetest"
	"github.com/sqs-once/sqs-once/sqsonce/targets"
)

const reference = "docs/configuration.md"

// A binary's configuration reader, as its main runs it: the variables
// through lookup, an error naming every bad one.
type loader struct {
	section string
	// base is the least environment the binary starts with.
	base map[string]string
	load func(envconfig.Lookup) error
	// unread lists variables the binary reads other than through lookup.
	unread []string
}

var binaries = []loader{
	{
		section: "## Processor variables",
		base:    map[string]string{"IDEMPOTENCY_TABLE": "orders-idempotency", "AWS_LAMBDA_FUNCTION_NAME": "orders-processor"},
		load:    loadProcessor,
	},
	{
		section: "## Replayer variables",
		base: map[string]string{
			"MAIN_QUEUE_URL":     "https://sqs.us-east-1.amazonaws.com/123456789012/main",
			"OPERATOR_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/operator",
		},
		load: func(l envconfig.Lookup) error { _, err := replay.LoadConfig(l); return err },
		// The metrics' dimension: replay.NewHandler reads it from the
		// process's environment, where Lambda sets it.
		unread: []string{"AWS_LAMBDA_FUNCTION_NAME"},
	},
}

// loadProcessor reads the environment as cmd/processor does
// (sqsonce.ConfigFromEnv, the store with storeenv.FromEnv, and TARGET with
// targets.FromEnv), then builds the
// processor with New, whose checks a variable must pass too. The store is
// sqsoncetest's: nothing here reaches AWS.
func loadProcessor(lookup envconfig.Lookup) error {
	cfg, err := sqsonce.ConfigFromEnv(lookup)
	tg, terr := targets.FromEnv(lookup, aws.Config{Region: "us-east-1"}, nil)
	// The default build's: STORE=redis is refused (no Redis store linked).
	_, serr := storeenv.FromEnv(lookup, aws.Config{Region: "us-east-1"}, nil)
	if err := errors.Join(err, terr, serr); err != nil {
		return err
	}
	cfg.Store, cfg.AWS = sqsoncetest.NewStore(), aws.Config{Region: "us-east-1"}
	var h sqsonce.Handler = func(context.Context, events.SQSMessage) error { return nil }
	if tg != nil {
		cfg.Target, h = tg, nil
	}
	_, err = sqsonce.NewConsumer(cfg, h)
	return err
}

// reads returns the variables load asks for, with env set and with only
// the base set, so that a variable read only when another is set shows up.
func (b loader) reads(env map[string]string) []string {
	seen := map[string]bool{}
	for _, e := range []map[string]string{env, b.base} {
		_ = b.load(func(name string) (string, bool) {
			seen[name] = true
			v, ok := e[name]
			return v, ok
		})
	}
	for _, n := range b.unread {
		seen[n] = true
	}
	return slices.Sorted(maps.Keys(seen))
}

func (b loader) starts(env map[string]string) error { return b.load(envconfig.Map(env)) }

// TestConfigurationListsWhatTheBinariesRead: the reference's tables of
// variables are exactly what each binary reads, no more, no fewer.
func TestConfigurationListsWhatTheBinariesRead(t *testing.T) {
	t.Parallel()
	for _, b := range binaries {
		documented := map[string]string{}
		for _, row := range Table(t, reference, b.section) {
			documented[Name(row[0])] = "x"
		}
		// Every documented variable set, so that one read only beside
		// another (TARGET_EVENT_SOURCE with TARGET) is asked for too.
		env := maps.Clone(b.base)
		for n := range documented {
			if _, ok := env[n]; !ok {
				env[n] = "x"
			}
		}
		env["TARGET"] = "events:default"
		got := b.reads(env)
		want := slices.Sorted(maps.Keys(documented))
		if !slices.Equal(got, want) {
			t.Errorf("%s %q lists %v\nthe binary reads %v", reference, b.section, want, got)
		}
	}
}

var (
	rangeCell = regexp.MustCompile(`^(-?\d+(?:\.\d+)?) to (\d+(?:\.\d+)?)\b`)
	enumCell  = regexp.MustCompile("^`[a-z]+`(?:(?:, | or )`[a-z]+`)+$")
	bytesCell = regexp.MustCompile(`^at most (\d+) bytes of UTF-8, without ` + "`#`" + `, white space`)
)

// TestConfigurationLimitsAreTheCodes: each limit the reference states is
// the one the code enforces, tried at its edges and just past them, so that
// the number lives in the code and the text cannot drift from it.
func TestConfigurationLimitsAreTheCodes(t *testing.T) {
	t.Parallel()
	for _, b := range binaries {
		for _, row := range Table(t, reference, b.section) {
			v, def, values := Name(row[0]), row[1], row[2]
			try := func(value string, ok bool, why string) {
				t.Helper()
				env := maps.Clone(b.base)
				env[v] = value
				if err := b.starts(env); (err == nil) != ok {
					t.Errorf("%s: %s=%q (%s): the binary says %v, the reference %q says it should start: %v", reference, v, value, why, err, values, ok)
				}
			}
			if def == "required" {
				env := maps.Clone(b.base)
				delete(env, v)
				if err := b.starts(env); err == nil {
					t.Errorf("%s: %s is documented as required, but the binary starts without it", reference, v)
				}
			}
			switch {
			case rangeCell.MatchString(values):
				m := rangeCell.FindStringSubmatch(values)
				lo, _ := strconv.ParseFloat(m[1], 64)
				hi, _ := strconv.ParseFloat(m[2], 64)
				try(m[1], true, "the lower limit")
				try(m[2], true, "the upper limit")
				try(decimal(lo-1), false, "below the lower limit")
				try(decimal(hi+1), false, "above the upper limit")
				// Seconds take fractions unless the row says whole.
				fractions := strings.Contains(values, "fractions") ||
					strings.Contains(values, "seconds") && !strings.Contains(values, "whole")
				if lo+0.5 < hi {
					try(decimal(lo+0.5), fractions, "a fraction")
				}
			case enumCell.MatchString(values):
				for _, e := range inlineCode.FindAllString(values, -1) {
					try(strings.Trim(e, "`"), true, "a documented value")
				}
				try("sometimes", false, "not a documented value")
			case bytesCell.MatchString(values):
				n, _ := strconv.Atoi(bytesCell.FindStringSubmatch(values)[1])
				try(strings.Repeat("p", n), true, "the limit")
				try(strings.Repeat("p", n+1), false, "past the limit")
				try(strings.Repeat("é", n/2), true, "UTF-8 at the limit")
				try("a#b", false, "a '#'")
				try("a b", false, "a space")
				try("a\u200bb", false, "an invisible character")
			case strings.HasPrefix(values, "a queue URL"):
				try("https://sqs.eu-west-1.amazonaws.com/111122223333/orders", true, "a queue URL")
				try("orders", false, "not a URL")
			}
		}
	}
}

func decimal(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
