//go:build integration

package templatetest

import (
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sqs-once/sqs-once/cmd/sqs-once/samstack"
	"github.com/sqs-once/sqs-once/internal/envconfig"
	"github.com/sqs-once/sqs-once/internal/metrics"
	"github.com/sqs-once/sqs-once/internal/replay"
	"github.com/sqs-once/sqs-once/internal/storeenv"
	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/targets"
)

const (
	processorID = "ProcessorFunction"
	replayerID  = "DlqReplayerFunction"
)

// loaders are the configuration readers of the two binaries: exactly what
// cmd/processor and cmd/dlq-replayer call with os.LookupEnv.
var loaders = map[string]func(envconfig.Lookup) error{
	processorID: func(l envconfig.Lookup) error { _, err := processorConfig(l, aws.Config{}); return err },
	replayerID:  func(l envconfig.Lookup) error { _, err := replay.LoadConfig(l); return err },
}

// processorConfig reads the processor's environment as cmd/processor does:
// sqsonce.ConfigFromEnv, and TARGET with targets.FromEnv (which reads
// AWS_LAMBDA_FUNCTION_NAME too, to refuse the processor's own function);
// every bad variable at once. The Target's clients use awsCfg.
func processorConfig(lookup envconfig.Lookup, awsCfg aws.Config) (sqsonce.ConsumerConfig, error) {
	cfg, err := sqsonce.ConfigFromEnv(lookup)
	tg, terr := targets.FromEnv(lookup, awsCfg, nil)
	s, serr := storeenv.FromEnv(lookup, awsCfg, nil)
	cfg.AWS, cfg.Target, cfg.Store = awsCfg, tg, s
	return cfg, errors.Join(err, terr, serr)
}

// TestFunctionRuntimeBuildAndLogging checks what each function is built and
// run as: runtime, architecture, handler, the Makefile target sam build
// calls, recursive loop permission, and JSON logging into a log group of the
// stack.
func TestFunctionRuntimeBuildAndLogging(t *testing.T) {
	t.Parallel()
	tmpl := translatedTemplate(t)
	res := tmpl.Resources()
	makefile, err := os.ReadFile(filepath.Join(root(t), "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{processorID, replayerID} {
		t.Run(id, func(t *testing.T) {
			fn := res[id]
			p := fn.Properties
			check := func(what string, got, want any) {
				t.Helper()
				if !jsonEqual(got, want) {
					t.Errorf("%s = %s, want %s", what, js(got), js(want))
				}
			}
			check("Runtime", p["Runtime"], "provided.al2023")
			check("Architectures", p["Architectures"], []any{"arm64"})
			check("Handler", p["Handler"], "bootstrap")
			check("Metadata.BuildMethod", fn.Metadata["BuildMethod"], "makefile")
			check("RecursiveLoop", p["RecursiveLoop"], "Allow")
			logging := asMap(p["LoggingConfig"])
			check("LoggingConfig.LogFormat", logging["LogFormat"], "JSON")
			check("LoggingConfig.ApplicationLogLevel", logging["ApplicationLogLevel"], ref("LogLevel"))
			// WARN would drop the START and REPORT lines (duration, memory).
			check("LoggingConfig.SystemLogLevel", logging["SystemLogLevel"], "INFO")
			kind, group, _ := samstack.Intrinsic(logging["LogGroup"])
			if lg := res[asString(group)]; kind != "Ref" || lg.Type != "AWS::Logs::LogGroup" {
				t.Errorf("LoggingConfig.LogGroup = %s, want a Ref to a log group of the stack", js(logging["LogGroup"]))
			} else {
				check("log group RetentionInDays", lg.Properties["RetentionInDays"], ref("LogRetentionInDays"))
			}
			// sam build runs `make build-<LogicalId>` with ARTIFACTS_DIR set.
			target := regexp.MustCompile(`(?m)^build-` + id + `:[^\n]*\n(\t[^\n]*\n)*\t[^\n]*\$\(ARTIFACTS_DIR\)/bootstrap`)
			if !target.Match(makefile) {
				t.Errorf("Makefile has no target build-%s writing $(ARTIFACTS_DIR)/bootstrap", id)
			}
		})
	}
}

// readsOf returns the variables load reads, by running it on env through a
// lookup that records every name asked for.
func readsOf(load func(envconfig.Lookup) error, env map[string]string) []string {
	seen := map[string]bool{}
	_ = load(func(name string) (string, bool) {
		seen[name] = true
		v, ok := env[name]
		return v, ok
	})
	return slices.Sorted(maps.Keys(seen))
}

// fixedByDesign are the variables the template sets to a constant: the
// template's processor keeps its records in DynamoDB (docs/redis.md says
// why), so STORE is no parameter.
var fixedByDesign = map[string]bool{processorID + ".STORE": true}

func TestEnvironmentIsExactlyWhatTheBinariesRead(t *testing.T) {
	t.Parallel()
	tmpl := translatedTemplate(t)
	params := map[string]bool{}
	for _, p := range tmpl.Parameters() {
		params[p.Name] = true
	}
	for id, load := range loaders {
		t.Run(id, func(t *testing.T) {
			t.Parallel()
			vars := asMap(asMap(tmpl.Resources()[id].Properties["Environment"])["Variables"])
			var declared []string
			for name, v := range vars {
				declared = append(declared, name)
				if refs := references(v); len(refs) == 0 && !fixedByDesign[id+"."+name] {
					t.Errorf("%s = %s is wired to no parameter or resource", name, js(v))
				} else {
					for _, r := range refs {
						if !params[r] && !strings.HasPrefix(r, "AWS::") {
							if _, ok := tmpl.Resources()[r]; !ok {
								t.Errorf("%s refers to %s, which is neither a parameter nor a resource", name, r)
							}
						}
					}
				}
			}
			sort.Strings(declared)
			// Read with the declared variables set and with none, so a
			// variable read only when another is set still shows up.
			reads := map[string]bool{}
			full := map[string]string{}
			for _, name := range declared {
				full[name] = "x"
			}
			for _, env := range []map[string]string{full, {}} {
				for _, name := range readsOf(load, env) {
					// Lambda sets AWS_LAMBDA_FUNCTION_NAME and the like itself.
					if !strings.HasPrefix(name, "AWS_") {
						reads[name] = true
					}
				}
			}
			var want []string
			for name := range reads {
				want = append(want, name)
			}
			sort.Strings(want)
			if !slices.Equal(declared, want) {
				t.Errorf("template sets %v\nthe binary reads %v", declared, want)
			}
		})
	}
}

// references returns the parameters and resources a value refers to.
func references(v any) []string {
	var out []string
	sub := regexp.MustCompile(`\$\{([A-Za-z0-9:]+)(\.[A-Za-z]+)?\}`)
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, arg := range x {
				switch k {
				case "Ref":
					out = append(out, asString(arg))
				case "Fn::GetAtt":
					if ga := asSlice(arg); len(ga) > 0 {
						out = append(out, asString(ga[0]))
					} else {
						// "Id.Attr", the form of a short !GetAtt.
						id, _, _ := strings.Cut(asString(arg), ".")
						out = append(out, id)
					}
				case "Fn::Sub":
					s := asString(arg)
					local := map[string]any{}
					if l := asSlice(arg); len(l) > 0 {
						s = asString(l[0])
						walk(l[1:])
						if len(l) > 1 {
							local = asMap(l[1])
						}
					}
					for _, m := range sub.FindAllStringSubmatch(s, -1) {
						// A name of the variable map is Fn::Sub's own, not
						// a parameter or a resource.
						if _, ok := local[m[1]]; !ok {
							out = append(out, m[1])
						}
					}
				case "Fn::If":
					// The first argument names a condition, not a resource.
					if l := asSlice(arg); len(l) > 0 {
						walk(l[1:])
					}
				default:
					walk(arg)
				}
			}
		case []any:
			for _, item := range x {
				walk(item)
			}
		}
	}
	walk(v)
	return out
}

func TestQueues(t *testing.T) {
	t.Parallel()
	tmpl := translatedTemplate(t)
	res := tmpl.Resources()
	for _, id := range []string{"MainQueue", "DeadLetterQueue", "OperatorQueue"} {
		if got := res[id].Properties["SqsManagedSseEnabled"]; got != true {
			t.Errorf("%s.SqsManagedSseEnabled = %v, want true", id, got)
		}
	}
	main, dlq := res["MainQueue"].Properties, res["DeadLetterQueue"].Properties
	// As CloudFormation builds them with the defaults (TestInstallResources
	// checks the other cases): the main queue redrives to the DLQ, and the
	// DLQ admits only the main queue, its ARN built from the main queue's
	// name.
	for _, params := range []map[string]string{nil, {"QueueType": "fifo"}} {
		b := build(t, tmpl, params)
		m, d := b.resources["MainQueue"].Properties, b.resources["DeadLetterQueue"].Properties
		want := map[string]any{"deadLetterTargetArn": "DeadLetterQueue.Arn", "maxReceiveCount": b.values["MaxReceiveCount"]}
		if !jsonEqual(m["RedrivePolicy"], want) {
			t.Errorf("%v: MainQueue.RedrivePolicy = %s, want %s", params, js(m["RedrivePolicy"]), js(want))
		}
		allow := asMap(d["RedriveAllowPolicy"])
		mainARN := "arn:aws:sqs:us-east-1:123456789012:" + asString(m["QueueName"])
		if allow["redrivePermission"] != "byQueue" || !jsonEqual(allow["sourceQueueArns"], []any{mainARN}) {
			t.Errorf("%v: DeadLetterQueue.RedriveAllowPolicy = %s, want byQueue naming %s", params, js(allow), mainARN)
		}
	}

	// Dead letters keep their original enqueue time: the DLQ must keep them
	// longer than the main queue possibly can.
	var retentionMax float64
	for _, p := range tmpl.Parameters() {
		if p.Name == "MessageRetentionPeriod" && p.MaxValue != nil {
			retentionMax = *p.MaxValue
		}
	}
	if !jsonEqual(main["MessageRetentionPeriod"], ref("MessageRetentionPeriod")) || retentionMax == 0 {
		t.Fatalf("MainQueue.MessageRetentionPeriod = %s, want Ref MessageRetentionPeriod with a MaxValue", js(main["MessageRetentionPeriod"]))
	}
	if got, _ := dlq["MessageRetentionPeriod"].(float64); got <= retentionMax {
		t.Errorf("DLQ retention %v s is not longer than the main queue's maximum %v s", got, retentionMax)
	}

	// Deleting the stack deletes the queues (their fixed names rule out
	// Retain); the README says to drain them first.
	for _, id := range []string{"MainQueue", "DeadLetterQueue", "OperatorQueue"} {
		if r := res[id]; r.DeletionPolicy != "Delete" || r.UpdateReplacePolicy != "Delete" {
			t.Errorf("%s: DeletionPolicy %q, UpdateReplacePolicy %q; want Delete, explicitly", id, r.DeletionPolicy, r.UpdateReplacePolicy)
		}
	}
}

// TestVisibilityTimeouts: each queue's visibility timeout is at least six
// times its consumer's timeout plus the batching window (AWS's guidance for
// SQS event sources), and within SQS's 12 hours, for every allowed pair of
// values, as CloudFormation would evaluate the template's own expressions.
func TestVisibilityTimeouts(t *testing.T) {
	t.Parallel()
	tmpl := translatedTemplate(t)
	res := tmpl.Resources()
	params := map[string]samstack.Parameter{}
	for _, p := range tmpl.Parameters() {
		params[p.Name] = p
	}
	for _, tt := range []struct{ queue, fn string }{{"MainQueue", processorID}, {"DeadLetterQueue", replayerID}} {
		t.Run(tt.queue, func(t *testing.T) {
			t.Parallel()
			esm, ok := eventSourceOf(res, tt.fn)
			if !ok {
				t.Fatalf("%s has no event source mapping", tt.fn)
			}
			exprs := map[string]any{
				"visibility": res[tt.queue].Properties["VisibilityTimeout"],
				"timeout":    res[tt.fn].Properties["Timeout"],
				"window":     esm.Properties["MaximumBatchingWindowInSeconds"],
			}
			// Every value each expression's parameters allow; a literal
			// has one.
			axes := map[string][]string{}
			for what, expr := range exprs {
				for _, name := range references(expr) {
					p, ok := params[name]
					if !ok {
						continue
					}
					if len(p.AllowedValues) == 0 {
						t.Fatalf("%s of %s depends on %s, which has no AllowedValues: the mapping cannot cover it", what, tt.queue, name)
					}
					axes[name] = p.AllowedValues
				}
			}
			combos := []map[string]string{{}}
			for name, values := range axes {
				var next []map[string]string
				for _, c := range combos {
					for _, v := range values {
						n := maps.Clone(c)
						n[name] = v
						next = append(next, n)
					}
				}
				combos = next
			}
			for _, c := range combos {
				values, err := tmpl.ParameterValues(c)
				if err != nil {
					// A batch size above 10 needs a window: not this test's.
					t.Fatalf("%v: %v", c, err)
				}
				r := samstack.NewResolver(tmpl, values)
				got := map[string]float64{}
				for what, expr := range exprs {
					v, err := r.String(expr)
					if err != nil {
						t.Fatalf("%v: %s: %v", c, what, err)
					}
					if got[what], err = strconv.ParseFloat(v, 64); err != nil {
						t.Fatalf("%v: %s = %q is not a number", c, what, v)
					}
				}
				if least := 6*got["timeout"] + got["window"]; got["visibility"] < least || got["visibility"] > 43200 {
					t.Errorf("%v: visibility %v s, want from 6 x %v + %v = %v s to 43200 s", c, got["visibility"], got["timeout"], got["window"], least)
				}
			}
			t.Logf("%d combinations of %v", len(combos), slices.Sorted(maps.Keys(axes)))
		})
	}
}

// eventSourceOf returns the event source mapping of a function.
func eventSourceOf(res map[string]samstack.Resource, fnID string) (samstack.Resource, bool) {
	for _, r := range res {
		if r.Type == "AWS::Lambda::EventSourceMapping" && jsonEqual(r.Properties["FunctionName"], ref(fnID)) {
			return r, true
		}
	}
	return samstack.Resource{}, false
}

// TestRetentionOutlastsRedrive: with the defaults (and samconfig.toml's
// values, the same), a message that keeps failing reaches the DLQ before the
// main queue's retention deletes it. CloudFormation cannot check this for
// every value (no arithmetic in Rules); the parameter's description states it.
func TestRetentionOutlastsRedrive(t *testing.T) {
	t.Parallel()
	tmpl := translatedTemplate(t)
	values, err := tmpl.ParameterValues(nil)
	if err != nil {
		t.Fatal(err)
	}
	r := samstack.NewResolver(tmpl, values)
	main := tmpl.Resources()["MainQueue"].Properties
	num := func(v any) float64 {
		t.Helper()
		s, err := r.String(v)
		if err != nil {
			t.Fatal(err)
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("%q is not a number", s)
		}
		return f
	}
	retention, visibility := num(main["MessageRetentionPeriod"]), num(main["VisibilityTimeout"])
	receives := num(asMap(main["RedrivePolicy"])["maxReceiveCount"])
	if retention <= receives*visibility {
		t.Errorf("retention %v s <= %v receives x visibility %v s: a failing message expires before the DLQ", retention, receives, visibility)
	}
	var minRetention float64
	for _, p := range tmpl.Parameters() {
		if p.Name == "MessageRetentionPeriod" && p.MinValue != nil {
			minRetention = *p.MinValue
		}
	}
	// The floor alone covers the default redrive: 5 receives x 180 s.
	if minRetention <= receives*visibility {
		t.Errorf("MessageRetentionPeriod MinValue %v s does not even cover the default redrive (%v x %v s)", minRetention, receives, visibility)
	}
}

func TestIdempotencyTable(t *testing.T) {
	t.Parallel()
	table := translatedTemplate(t).Resources()["IdempotencyTable"]
	// Its records are what makes a re-delivery a duplicate: neither deleting
	// the stack nor an update that replaces the table may delete them.
	if table.DeletionPolicy != "Retain" || table.UpdateReplacePolicy != "Retain" {
		t.Errorf("DeletionPolicy %q, UpdateReplacePolicy %q; want Retain for both", table.DeletionPolicy, table.UpdateReplacePolicy)
	}
	p := table.Properties
	for what, want := range map[string]any{
		"BillingMode":                      "PAY_PER_REQUEST",
		"KeySchema":                        []any{map[string]any{"AttributeName": "id", "KeyType": "HASH"}},
		"AttributeDefinitions":             []any{map[string]any{"AttributeName": "id", "AttributeType": "S"}},
		"TimeToLiveSpecification":          map[string]any{"AttributeName": "expiresAt", "Enabled": true},
		"SSESpecification":                 map[string]any{"SSEEnabled": true},
		"PointInTimeRecoverySpecification": map[string]any{"PointInTimeRecoveryEnabled": ref("PointInTimeRecovery")},
	} {
		if !jsonEqual(p[what], want) {
			t.Errorf("%s = %s, want %s", what, js(p[what]), js(want))
		}
	}
}

// TestEventSourceMappings: each function consumes its queue with partial
// batch responses and the batch, window and concurrency of its parameters,
// as CloudFormation builds them with the defaults (TestInstallResources and
// TestInstallEventSourceOptions check the other cases).
func TestEventSourceMappings(t *testing.T) {
	t.Parallel()
	b := build(t, translatedTemplate(t), nil)
	for _, tt := range []struct{ fn, queue, prefix string }{
		{processorID, "MainQueue", "Processor"},
		{replayerID, "DeadLetterQueue", "Replayer"},
	} {
		var found []string
		for id, r := range b.resources {
			if r.Type != "AWS::Lambda::EventSourceMapping" || r.Properties["FunctionName"] != tt.fn {
				continue
			}
			found = append(found, id)
			want := map[string]any{
				"EventSourceArn":                 tt.queue + ".Arn",
				"FunctionName":                   tt.fn,
				"FunctionResponseTypes":          []any{"ReportBatchItemFailures"},
				"BatchSize":                      b.values[tt.prefix+"BatchSize"],
				"MaximumBatchingWindowInSeconds": b.values[tt.prefix+"BatchingWindow"],
				"ScalingConfig":                  map[string]any{"MaximumConcurrency": b.values[tt.prefix+"MaximumConcurrency"]},
			}
			if tt.fn == processorID {
				// ProcessorMappingEnabled: false creates it disabled, for
				// a cutover (docs/migration.md).
				want["Enabled"] = b.values["ProcessorMappingEnabled"] == "true"
			}
			if !jsonEqual(r.Properties, want) {
				t.Errorf("%s = %s\nwant %s", id, js(r.Properties), js(want))
			}
		}
		if len(found) != 1 {
			t.Errorf("%s has %d event source mappings (%v), want 1", tt.fn, len(found), found)
		}
	}
}

// grant is an action allowed on a resource of the stack.
type grant struct{ Action, Resource string }

// apiGrants turns the methods of a client interface a package declares into
// the IAM actions they need; SQS authorises a batch call as its single form.
func apiGrants(iface reflect.Type, service, resource string) []grant {
	var out []grant
	for i := range iface.NumMethod() {
		name := iface.Method(i).Name
		if service == "sqs" {
			name = strings.TrimSuffix(name, "Batch")
		}
		out = append(out, grant{service + ":" + name, resource})
	}
	return out
}

// targetConditions are the conditions of the processor's Target policies.
var targetConditions = map[string]bool{
	"IsLambdaTarget": true, "IsSqsTarget": true, "IsSnsTarget": true, "IsEventsTarget": true, "IsStatesTarget": true, "HasTargetKmsKey": true,
	"IsDurableTarget": true,
}

// actionMatches reports whether an IAM action pattern (with * wildcards)
// covers action; IAM compares actions case-insensitively.
func actionMatches(pattern, action string) bool {
	re := "^" + strings.ReplaceAll(regexp.QuoteMeta(strings.ToLower(pattern)), `\*`, ".*") + "$"
	return regexp.MustCompile(re).MatchString(strings.ToLower(action))
}

// resourceOf names the stack resource a policy Resource designates, in the
// two forms the template uses: Fn::GetAtt X.Arn, and the SAM policy
// templates' Fn::Sub with queueName: Fn::GetAtt X.QueueName.
func resourceOf(v any) string {
	m := asMap(v)
	if ga := asSlice(m["Fn::GetAtt"]); len(ga) == 2 && ga[1] == "Arn" {
		return asString(ga[0])
	}
	if sub := asSlice(m["Fn::Sub"]); len(sub) == 2 {
		if ga := asSlice(asMap(asMap(sub[1])["queueName"])["Fn::GetAtt"]); len(ga) == 2 && ga[1] == "QueueName" {
			return asString(ga[0])
		}
	}
	return ""
}

// metric is one metric an alarm watches, with the stack resource its
// dimension names.
type metric struct{ Namespace, Name, Resource, Stat string }

// alarmMetrics returns what an alarm watches, in either form: one metric, or
// metric math over several (then expr is the expression it alarms on).
func alarmMetrics(p map[string]any) (metrics []metric, expr string) {
	target := func(dims any) string {
		d := asSlice(dims)
		if len(d) == 0 {
			return "no dimension"
		}
		// As build resolves it: "<id>.QueueName", a queue's own name, or
		// the logical id a Ref names; a dimension after the first (the
		// processor's Reason) as ",Name=Value".
		t := strings.TrimSuffix(asString(asMap(d[0])["Value"]), ".QueueName")
		for _, more := range d[1:] {
			t += "," + asString(asMap(more)["Name"]) + "=" + asString(asMap(more)["Value"])
		}
		return t
	}
	if p["Metrics"] == nil {
		return []metric{{asString(p["Namespace"]), asString(p["MetricName"]), target(p["Dimensions"]), asString(p["Statistic"])}}, ""
	}
	for _, q := range asSlice(p["Metrics"]) {
		q := asMap(q)
		if stat := asMap(q["MetricStat"]); stat != nil {
			m := asMap(stat["Metric"])
			metrics = append(metrics, metric{asString(m["Namespace"]), asString(m["MetricName"]), target(m["Dimensions"]), asString(stat["Stat"])})
		}
		if q["ReturnData"] == true {
			expr = asString(q["Expression"])
		}
	}
	return metrics, expr
}

// TestAlarms resolves the alarms of every install case: each watches its
// queue (yours or the stack's) or function, and only the components
// installed have theirs. Without the replayer nothing drains the DLQ, so its
// first message alarms at once.
func TestAlarms(t *testing.T) {
	t.Parallel()
	tmpl := translatedTemplate(t)
	depth := []metric{
		{"AWS/SQS", "ApproximateNumberOfMessagesVisible", "", "Maximum"},
		{"AWS/SQS", "ApproximateNumberOfMessagesNotVisible", "", "Maximum"},
	}
	on := func(ms []metric, resource string) []metric {
		out := slices.Clone(ms)
		for i := range out {
			out[i].Resource = resource
		}
		return out
	}
	for _, c := range installCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := build(t, tmpl, c.params)
			dlq := "DeadLetterQueue"
			if c.dlq != "" {
				dlq = strings.Split(c.dlq, ":")[5]
			}
			type alarm struct {
				id        string
				metrics   []metric
				threshold any
				periods   float64 // evaluation periods of 60 s
				why       string
			}
			// mOfN are the alarms whose DatapointsToAlarm is fewer than
			// their periods; the others alarm on all of them.
			mOfN := map[string]float64{"ProcessorEmitPendingAlarm": 3}
			var tests []alarm
			if c.replayer {
				tests = append(tests,
					// A message opened in the console is in flight, not resolved.
					alarm{"OperatorQueueNotEmptyAlarm", on(depth, "OperatorQueue"), 0.0, 1, "any message on the operator queue, visible or in flight"},
					// SQS leaves a message received 3 times or more out of the
					// age metric; depth sees it.
					alarm{"DeadLetterQueueNotEmptyAlarm", on(depth, dlq), 0.0, 15, "a DLQ not drained for 15 minutes"},
					alarm{"DeadLetterAgeAlarm", []metric{{"AWS/SQS", "ApproximateAgeOfOldestMessage", dlq, "Maximum"}}, b.values["DlqAgeAlarmThreshold"], 1, "a dead letter older than the threshold"},
					alarm{"DlqReplayerErrorsAlarm", []metric{{"AWS/Lambda", "Errors", replayerID, "Sum"}}, 0.0, 1, "any failed replayer invocation"},
				)
			} else {
				tests = append(tests, alarm{"DeadLetterQueueNotEmptyAlarm", on(depth, dlq), 0.0, 1, "any dead letter, with no replayer to drain the DLQ"})
			}
			if c.processor {
				tests = append(tests,
					alarm{"ProcessorErrorsAlarm", []metric{{"AWS/Lambda", "Errors", processorID, "Sum"}}, 0.0, 1, "any failed processor invocation"},
					// The processor's own EMF metrics: each is a side effect
					// that may run twice.
					alarm{"ProcessorUnrecordedCompletionAlarm", []metric{{metrics.Namespace, string(sqsonce.KindUnrecordedCompletion), processorID, "Sum"}}, 0.0, 1,
						"any completion the processor could not record"},
					alarm{"ProcessorLockLostAlarm", []metric{{metrics.Namespace, metrics.LockLost, processorID, "Sum"}}, 0.0, 1,
						"any lock lost while its handler ran"},
					// Not a duplicate: messages committed and not sent. One
					// blip is relayed by the next delivery; three minutes of
					// fifteen is a relay that keeps failing.
					alarm{"ProcessorEmitPendingAlarm", []metric{{metrics.Namespace, string(sqsonce.KindFailed), processorID + "," + metrics.DimensionReason + "=" + string(sqsonce.ReasonEmitPending), "Sum"}}, 0.0, 15,
						"emitted messages pending in 3 of 15 minutes"},
				)
			}
			alarms := 0
			for _, r := range b.resources {
				if r.Type == "AWS::CloudWatch::Alarm" {
					alarms++
				}
			}
			if alarms != len(tests) {
				t.Errorf("%d alarms, this test knows %d: extend it", alarms, len(tests))
			}
			for _, tt := range tests {
				r, ok := b.resources[tt.id]
				if !ok || r.Type != "AWS::CloudWatch::Alarm" {
					t.Errorf("no alarm %s (%s)", tt.id, tt.why)
					continue
				}
				p := r.Properties
				metrics, expr := alarmMetrics(p)
				if !slices.Equal(metrics, tt.metrics) {
					t.Errorf("%s watches %+v, want %+v (%s)", tt.id, metrics, tt.metrics, tt.why)
				}
				if len(metrics) > 1 {
					// The expression adds up every metric it fetches.
					var ids []string
					for _, q := range asSlice(p["Metrics"]) {
						if asMap(q)["MetricStat"] != nil {
							ids = append(ids, asString(asMap(q)["Id"]))
						}
					}
					if terms := strings.Split(strings.ReplaceAll(expr, " ", ""), "+"); !slices.Equal(slices.Sorted(slices.Values(terms)), slices.Sorted(slices.Values(ids))) {
						t.Errorf("%s alarms on %q, want the sum of %v", tt.id, expr, ids)
					}
					for _, q := range asSlice(p["Metrics"]) {
						if stat := asMap(asMap(q)["MetricStat"]); stat != nil && stat["Period"] != 60.0 {
							t.Errorf("%s: metric period %v, want 60", tt.id, stat["Period"])
						}
					}
				} else if p["Period"] != 60.0 {
					t.Errorf("%s: period %v, want 60", tt.id, p["Period"])
				}
				datapoints := mOfN[tt.id]
				if datapoints == 0 {
					datapoints = tt.periods
				}
				if p["EvaluationPeriods"] != tt.periods || (p["DatapointsToAlarm"] != nil && p["DatapointsToAlarm"] != datapoints) || (p["DatapointsToAlarm"] == nil && datapoints != tt.periods) {
					t.Errorf("%s: %v of %v periods, want %v of %v", tt.id, p["DatapointsToAlarm"], p["EvaluationPeriods"], datapoints, tt.periods)
				}
				if !jsonEqual(p["Threshold"], tt.threshold) || p["ComparisonOperator"] != "GreaterThanThreshold" || p["TreatMissingData"] != "notBreaching" {
					t.Errorf("%s: %v %s, missing data %v; want GreaterThanThreshold %s, notBreaching", tt.id, p["ComparisonOperator"], js(p["Threshold"]), p["TreatMissingData"], js(tt.threshold))
				}
				for _, key := range []string{"AlarmActions", "OKActions"} {
					if !jsonEqual(p[key], []any{"AlarmTopic"}) {
						t.Errorf("%s.%s = %s, want the AlarmTopic", tt.id, key, js(p[key]))
					}
				}
				if asString(p["AlarmDescription"]) == "" {
					t.Errorf("%s has no AlarmDescription", tt.id)
				}
			}
		})
	}

	sub := tmpl.Resources()["AlarmEmailSubscription"]
	if sub.Type != "AWS::SNS::Subscription" || sub.Condition != "HasAlarmEmail" ||
		!jsonEqual(sub.Properties, map[string]any{"Endpoint": ref("AlarmEmail"), "Protocol": "email", "TopicArn": ref("AlarmTopic")}) {
		t.Errorf("AlarmEmailSubscription = %+v", sub)
	}
	for email, want := range map[string]bool{"": false, "ops@example.com": true} {
		values, err := tmpl.ParameterValues(map[string]string{"AlarmEmail": email})
		if err != nil {
			t.Fatal(err)
		}
		created, err := samstack.NewResolver(tmpl, values).Condition("HasAlarmEmail")
		if err != nil {
			t.Fatal(err)
		}
		if created != want {
			t.Errorf("AlarmEmail %q: subscription created = %v, want %v", email, created, want)
		}
	}
}

func TestParametersAreTypedConstrainedGroupedAndUsed(t *testing.T) {
	t.Parallel()
	tmpl := translatedTemplate(t)
	raw, err := os.ReadFile(templatePath(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tmpl.ParameterValues(nil); err != nil {
		t.Errorf("defaults break their own constraints: %v", err)
	}
	groups := map[string]int{}
	iface := asMap(asMap(tmpl["Metadata"])["AWS::CloudFormation::Interface"])
	for _, g := range asSlice(iface["ParameterGroups"]) {
		for _, p := range asSlice(asMap(g)["Parameters"]) {
			groups[asString(p)]++
		}
	}
	names := map[string]bool{}
	for _, p := range tmpl.Parameters() {
		names[p.Name] = true
		if p.Type != "Number" && p.Type != "String" {
			t.Errorf("%s: type %q", p.Name, p.Type)
		}
		if p.Description == "" {
			t.Errorf("%s has no Description", p.Name)
		}
		if len(p.AllowedValues) == 0 && p.AllowedPattern == "" && (p.MinValue == nil || p.MaxValue == nil) {
			t.Errorf("%s has no constraint (AllowedValues, AllowedPattern or MinValue and MaxValue)", p.Name)
		}
		if groups[p.Name] != 1 {
			t.Errorf("%s is in %d parameter groups, want 1", p.Name, groups[p.Name])
		}
		// Used: a Ref or ${} to it somewhere in the SAM template.
		used := regexp.MustCompile(`!Ref ` + p.Name + `\b|Ref: ` + p.Name + `\b|\$\{` + p.Name + `\}`)
		if !used.Match(raw) {
			t.Errorf("%s is never used", p.Name)
		}
	}
	for name := range groups {
		if !names[name] {
			t.Errorf("parameter group lists %s, which is not a parameter", name)
		}
	}
	// Names of the public reference (aws-samples amazon-sqs-dlq-replay-backoff).
	for _, name := range []string{"MaxAttempts", "BackoffRate", "MessageRetentionPeriod", "LogLevel"} {
		if !names[name] {
			t.Errorf("no parameter %s", name)
		}
	}
}

// TestOutputs: every output is described; TestInstallEnvironment checks
// their values, resolved, for every install case.
func TestOutputs(t *testing.T) {
	t.Parallel()
	out := asMap(translatedTemplate(t)["Outputs"])
	if len(out) == 0 {
		t.Fatal("no outputs")
	}
	for key, o := range out {
		if asString(asMap(o)["Description"]) == "" || asMap(o)["Value"] == nil {
			t.Errorf("output %s = %s, want a value with a description", key, js(o))
		}
	}
}

func TestServerlessRepoMetadata(t *testing.T) {
	t.Parallel()
	sar := asMap(asMap(translatedTemplate(t)["Metadata"])["AWS::ServerlessRepo::Application"])
	// Limits from the SAM developer guide's "Metadata section properties";
	// intrinsic functions are not supported there, so every value is a string.
	str := func(key string) string {
		s, ok := sar[key].(string)
		if !ok {
			t.Errorf("%s = %s, want a plain string", key, js(sar[key]))
		}
		return s
	}
	matches := func(key, value, pattern string, maxLen int) {
		if len(value) < 1 || len(value) > maxLen || !regexp.MustCompile(pattern).MatchString(value) {
			t.Errorf("%s = %q: want 1 to %d characters matching %s", key, value, maxLen, pattern)
		}
	}
	matches("Name", str("Name"), `^[a-zA-Z0-9\-]+$`, 140)
	matches("Description", str("Description"), `.`, 256)
	matches("Author", str("Author"), `^[a-z0-9](([a-z0-9]|-[a-z0-9]))*$`, 127)
	matches("SemanticVersion", str("SemanticVersion"), `^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$`, 64)
	for _, key := range []string{"HomePageUrl", "SourceCodeUrl"} {
		matches(key, str(key), `^https://`, 1024)
	}
	if str("SpdxLicenseId") != "Apache-2.0" {
		t.Errorf("SpdxLicenseId = %q", sar["SpdxLicenseId"])
	}
	labels := asSlice(sar["Labels"])
	if len(labels) == 0 || len(labels) > 10 {
		t.Errorf("%d labels, want 1 to 10", len(labels))
	}
	for _, l := range labels {
		matches("label", asString(l), `^[a-zA-Z0-9+\-_:/@]+$`, 127)
	}
	// sam package uploads these local files; they must exist.
	license, err := os.ReadFile(filepath.Join(root(t), str("LicenseUrl")))
	if err != nil || !strings.Contains(string(license), "Apache License") || !strings.Contains(string(license), "Version 2.0") {
		t.Errorf("LicenseUrl %q: not the Apache 2.0 license (%v)", sar["LicenseUrl"], err)
	}
	if _, err := os.Stat(filepath.Join(root(t), str("ReadmeUrl"))); err != nil {
		t.Errorf("ReadmeUrl: %v", err)
	}
}

func ref(name string) map[string]any { return map[string]any{"Ref": name} }

func getAtt(id, attr string) map[string]any { return map[string]any{"Fn::GetAtt": []any{id, attr}} }

func stringsOf(v any) []string {
	if s, ok := v.(string); ok {
		return []string{s}
	}
	var out []string
	for _, x := range asSlice(v) {
		out = append(out, asString(x))
	}
	return out
}

// Shorthands for samstack's accessors of a decoded template.
var (
	asMap    = samstack.AsMap
	asSlice  = samstack.AsSlice
	asString = samstack.AsString
)

func js(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func jsonEqual(a, b any) bool { return js(a) == js(b) }
