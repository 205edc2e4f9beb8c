//go:build integration

package templatetest

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/sqs-once/sqs-once/cmd/sqs-once/samstack"
	"github.com/sqs-once/sqs-once/internal/metrics"
	"github.com/sqs-once/sqs-once/internal/replay"
	"github.com/sqs-once/sqs-once/internal/sqsmsg"
	"github.com/sqs-once/sqs-once/sqsonce"
	"github.com/sqs-once/sqs-once/sqsonce/store/dynamostore"
)

// Queues a user already has, in the static tests' account and region
// (staticPseudo).
const (
	yourQueue        = "arn:aws:sqs:us-east-1:123456789012:orders"
	yourDLQ          = "arn:aws:sqs:us-east-1:123456789012:orders-dlq"
	yourFifoQueue    = "arn:aws:sqs:us-east-1:123456789012:orders.fifo"
	yourFifoDLQ      = "arn:aws:sqs:us-east-1:123456789012:orders-dlq.fifo"
	yourOtherAccount = "arn:aws:sqs:eu-west-1:111122223333:orders"
)

// installCase is one way to install the application, with what it must
// build: which functions, and the main queue and DLQ each consumes or
// sends to ("" for the one the stack creates).
type installCase struct {
	name                string
	params              map[string]string
	processor, replayer bool
	main, dlq           string
	fifo                bool
}

var installCases = []installCase{
	{name: "defaults", processor: true, replayer: true},
	{name: "fifo", params: map[string]string{"QueueType": "fifo", "ContentBasedDeduplication": "true"}, processor: true, replayer: true, fifo: true},
	{name: "existing queues, all", params: map[string]string{"ExistingQueueArn": yourQueue, "ExistingDeadLetterQueueArn": yourDLQ},
		processor: true, replayer: true, main: yourQueue, dlq: yourDLQ},
	{name: "existing fifo queues, all", params: map[string]string{"ExistingQueueArn": yourFifoQueue, "ExistingDeadLetterQueueArn": yourFifoDLQ, "QueueType": "fifo"},
		processor: true, replayer: true, main: yourFifoQueue, dlq: yourFifoDLQ, fifo: true},
	{name: "existing queue in another account and region", params: map[string]string{"ExistingQueueArn": yourOtherAccount},
		processor: true, replayer: true, main: yourOtherAccount},
	{name: "existing DLQ only", params: map[string]string{"ExistingDeadLetterQueueArn": yourDLQ},
		processor: true, replayer: true, dlq: yourDLQ},
	{name: "replayer on your queues", params: map[string]string{"Components": "replayer", "ExistingQueueArn": yourQueue, "ExistingDeadLetterQueueArn": yourDLQ},
		replayer: true, main: yourQueue, dlq: yourDLQ},
	{name: "processor", params: map[string]string{"Components": "processor"}, processor: true},
	{name: "processor on your queue", params: map[string]string{"Components": "processor", "ExistingQueueArn": yourQueue}, processor: true, main: yourQueue},
	{name: "pollers, metrics, tracing, age, no dashboard", params: map[string]string{
		"ProcessorMinimumPollers": "2", "ProcessorMaximumPollers": "20", "ProcessorMappingMetrics": "on",
		"Tracing": "Active", "MaxMessageAge": "3600", "Dashboard": "off",
	}, processor: true, replayer: true},
}

// built is a template as CloudFormation would build it for one set of
// parameter values: the resources and outputs created, each with every
// intrinsic function evaluated. Fn::GetAtt is "<id>.<attribute>" and a Ref
// to a resource its logical id.
type built struct {
	values    map[string]string
	resources map[string]samstack.Resource
	outputs   map[string]any
}

func build(t *testing.T, tmpl samstack.Template, params map[string]string) built {
	t.Helper()
	values, err := tmpl.ParameterValues(params)
	if err != nil {
		t.Fatal(err)
	}
	r, folded, err := targetResolver(tmpl, values)
	if err != nil {
		t.Fatal(err)
	}
	r.Resource = func(id string) (string, bool) {
		_, ok := folded.Resources()[id]
		return id, ok
	}
	exists := func(cond string) bool {
		if cond == "" {
			return true
		}
		ok, err := r.Condition(cond)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	eval := func(v any) any {
		d, err := decide(r, v)
		if err != nil {
			t.Fatal(err)
		}
		out, err := r.Value(d)
		if err != nil {
			t.Fatalf("%s: %v", js(v), err)
		}
		return out
	}
	b := built{values: values, resources: map[string]samstack.Resource{}, outputs: map[string]any{}}
	for id, res := range folded.Resources() {
		if !exists(res.Condition) {
			continue
		}
		res.Properties = asMap(eval(map[string]any(res.Properties)))
		b.resources[id] = res
	}
	for key, o := range asMap(folded["Outputs"]) {
		if exists(asString(asMap(o)["Condition"])) {
			b.outputs[key] = eval(asMap(o)["Value"])
		}
	}
	return b
}

// arn is the ARN a built template gives the main queue or DLQ of a case:
// yours, or the created queue's.
func arnOr(existing, id string) string {
	if existing != "" {
		return existing
	}
	return id + ".Arn"
}

// urlOf is the URL derived from a queue ARN, as SQS spells it.
func urlOf(arn string) string {
	p := strings.Split(arn, ":")
	return fmt.Sprintf("https://sqs.%s.amazonaws.com/%s/%s", p[3], p[4], p[5])
}

// TestInstallResources: each case builds exactly its functions, table,
// queues and log groups, and each function's event source is the queue it
// is meant to consume, yours or the stack's.
func TestInstallResources(t *testing.T) {
	t.Parallel()
	tmpl := translatedTemplate(t)
	for _, c := range installCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := build(t, tmpl, c.params)
			want := map[string]bool{
				"MainQueue": c.main == "", "DeadLetterQueue": c.dlq == "", "OperatorQueue": c.replayer,
				"IdempotencyTable": c.processor, "ProcessorLogGroup": c.processor, processorID: c.processor,
				"DlqReplayerLogGroup": c.replayer, replayerID: c.replayer,
				"OperationsDashboard": c.params["Dashboard"] != "off",
			}
			for id, w := range want {
				if _, got := b.resources[id]; got != w {
					t.Errorf("%s created = %v, want %v", id, got, w)
				}
			}
			for id, r := range b.resources {
				if r.Type != "AWS::SQS::Queue" {
					continue
				}
				if got := r.Properties["FifoQueue"] == true; got != c.fifo {
					t.Errorf("%s FIFO = %v, want %v", id, got, c.fifo)
				}
				name := asString(r.Properties["QueueName"])
				switch {
				case id == "OperatorQueue" && c.fifo:
					// CloudFormation names it: "-operator.fifo" would not fit.
					if name != "" {
						t.Errorf("FIFO operator queue named %q, want a generated name", name)
					}
				case c.fifo && !strings.HasSuffix(name, ".fifo"), !c.fifo && strings.Contains(name, "."):
					t.Errorf("%s named %q on a %v queue", id, name, c.params["QueueType"])
				}
				if id == "MainQueue" {
					cbd := r.Properties["ContentBasedDeduplication"]
					if c.fifo && cbd != b.values["ContentBasedDeduplication"] || !c.fifo && cbd != nil {
						t.Errorf("MainQueue ContentBasedDeduplication %v", cbd)
					}
					if got := asMap(r.Properties["RedrivePolicy"])["deadLetterTargetArn"]; got != arnOr(c.dlq, "DeadLetterQueue") {
						t.Errorf("MainQueue redrives to %v, want %s", got, arnOr(c.dlq, "DeadLetterQueue"))
					}
				}
				if id == "DeadLetterQueue" {
					src := asSlice(asMap(r.Properties["RedriveAllowPolicy"])["sourceQueueArns"])
					want := c.main
					if want == "" {
						want = "arn:aws:sqs:us-east-1:123456789012:stack-main"
						if c.fifo {
							want += ".fifo"
						}
					}
					if len(src) != 1 || src[0] != want {
						t.Errorf("DLQ admits %v, want only %s", src, want)
					}
				}
			}
			for _, fn := range []struct {
				id, queue string
				present   bool
			}{{processorID, arnOr(c.main, "MainQueue"), c.processor}, {replayerID, arnOr(c.dlq, "DeadLetterQueue"), c.replayer}} {
				var sources []any
				for _, r := range b.resources {
					if r.Type == "AWS::Lambda::EventSourceMapping" && r.Properties["FunctionName"] == fn.id {
						sources = append(sources, r.Properties["EventSourceArn"])
					}
				}
				if fn.present && (len(sources) != 1 || sources[0] != fn.queue) || !fn.present && len(sources) != 0 {
					t.Errorf("%s consumes %v, want %s (installed %v)", fn.id, sources, fn.queue, fn.present)
				}
			}
		})
	}
}

// TestInstallEnvironment: the environment of each function of each case,
// resolved: the queue URLs derived from your ARNs, the operator queue only
// with the replayer, MAX_MESSAGE_AGE from the created queue's retention.
func TestInstallEnvironment(t *testing.T) {
	t.Parallel()
	tmpl := translatedTemplate(t)
	for _, c := range installCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := build(t, tmpl, c.params)
			env := func(id string) map[string]any {
				return asMap(asMap(b.resources[id].Properties["Environment"])["Variables"])
			}
			mainURL := "MainQueue"
			if c.main != "" {
				mainURL = urlOf(c.main)
			}
			if c.processor {
				e := env(processorID)
				wantOp := ""
				if c.replayer {
					wantOp = "OperatorQueue"
				}
				if e["QUEUE_URL"] != mainURL || e["OPERATOR_QUEUE_URL"] != wantOp {
					t.Errorf("processor QUEUE_URL %v, OPERATOR_QUEUE_URL %v; want %s, %q", e["QUEUE_URL"], e["OPERATOR_QUEUE_URL"], mainURL, wantOp)
				}
			}
			if c.replayer {
				e := env(replayerID)
				age := b.values["MaxMessageAge"]
				if age == "0" && c.main == "" {
					age = b.values["MessageRetentionPeriod"]
				}
				if e["MAIN_QUEUE_URL"] != mainURL || e["OPERATOR_QUEUE_URL"] != "OperatorQueue" || e["MAX_MESSAGE_AGE"] != age {
					t.Errorf("replayer MAIN_QUEUE_URL %v, OPERATOR_QUEUE_URL %v, MAX_MESSAGE_AGE %v; want %s, OperatorQueue, %s",
						e["MAIN_QUEUE_URL"], e["OPERATOR_QUEUE_URL"], e["MAX_MESSAGE_AGE"], mainURL, age)
				}
			}
			// The outputs follow the components and the queues.
			want := map[string]any{
				"MainQueueUrl": mainURL, "MainQueueArn": arnOr(c.main, "MainQueue"),
				"DeadLetterQueueArn": arnOr(c.dlq, "DeadLetterQueue"), "AlarmTopicArn": "AlarmTopic",
			}
			if c.dlq != "" {
				want["DeadLetterQueueUrl"] = urlOf(c.dlq)
			} else {
				want["DeadLetterQueueUrl"] = "DeadLetterQueue"
			}
			if c.replayer {
				want["OperatorQueueUrl"], want["OperatorQueueArn"], want["DlqReplayerFunctionArn"] = "OperatorQueue", "OperatorQueue.Arn", replayerID+".Arn"
			}
			if c.processor {
				want["IdempotencyTableName"], want["ProcessorFunctionArn"] = "IdempotencyTable", processorID+".Arn"
			}
			if c.params["Dashboard"] != "off" {
				want["DashboardName"] = "OperationsDashboard"
			}
			if !maps.Equal(b.outputs, want) {
				t.Errorf("outputs\n got %v\nwant %v", b.outputs, want)
			}
		})
	}
}

// TestInstallEventSourceOptions: provisioned mode replaces maximum
// concurrency, the mapping's metrics are on only when asked for, tracing
// reaches both functions.
func TestInstallEventSourceOptions(t *testing.T) {
	t.Parallel()
	tmpl := translatedTemplate(t)
	for _, c := range installCases {
		if !c.processor {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := build(t, tmpl, c.params)
			var esm map[string]any
			for _, r := range b.resources {
				if r.Type == "AWS::Lambda::EventSourceMapping" && r.Properties["FunctionName"] == processorID {
					esm = r.Properties
				}
			}
			v := b.values
			if v["ProcessorMinimumPollers"] != "0" {
				want := map[string]any{"MinimumPollers": v["ProcessorMinimumPollers"]}
				if v["ProcessorMaximumPollers"] != "0" {
					want["MaximumPollers"] = v["ProcessorMaximumPollers"]
				}
				if !jsonEqual(esm["ProvisionedPollerConfig"], want) || esm["ScalingConfig"] != nil {
					t.Errorf("provisioned %s, scaling %s; want %s and no ScalingConfig", js(esm["ProvisionedPollerConfig"]), js(esm["ScalingConfig"]), js(want))
				}
			} else if esm["ProvisionedPollerConfig"] != nil || !jsonEqual(esm["ScalingConfig"], map[string]any{"MaximumConcurrency": v["ProcessorMaximumConcurrency"]}) {
				t.Errorf("provisioned %s, scaling %s; want maximum concurrency only", js(esm["ProvisionedPollerConfig"]), js(esm["ScalingConfig"]))
			}
			var wantMetrics any
			if v["ProcessorMappingMetrics"] == "on" {
				wantMetrics = map[string]any{"Metrics": []any{"EventCount"}}
			}
			if !jsonEqual(esm["MetricsConfig"], wantMetrics) {
				t.Errorf("MetricsConfig %s, want %s", js(esm["MetricsConfig"]), js(wantMetrics))
			}
			for id, r := range b.resources {
				if r.Type == "AWS::Lambda::Function" && !jsonEqual(r.Properties["TracingConfig"], map[string]any{"Mode": v["Tracing"]}) {
					t.Errorf("%s TracingConfig %s, want Mode %s", id, js(r.Properties["TracingConfig"]), v["Tracing"])
				}
			}
		})
	}
}

// client is a client interface the code declares, with the service that
// authorises its calls.
type client struct {
	iface   reflect.Type
	service string
	// operatorOnly are the actions of iface the function never makes,
	// each with the operator's code that does (the CLI shares the client
	// interface with the processor).
	operatorOnly map[string]string
}

// processorSQS is the SQS client interface of sqsonce.Processor, read from
// the field that holds it: the interface is unexported, the calls it lists
// are still the processor's.
func processorSQS(t *testing.T) reflect.Type {
	t.Helper()
	f, ok := reflect.TypeFor[sqsonce.Processor]().FieldByName("sqs")
	if !ok || f.Type.Kind() != reflect.Interface {
		t.Fatal("sqsonce.Processor has no interface field sqs: this test reads the processor's SQS calls from it")
	}
	return f.Type
}

// clientGrants is what each function's code calls, on which queue or
// table: read from the narrow client interfaces the code declares, so a new
// call without a policy fails here. where names the resource of each
// action; an action the interfaces need and where does not know fails.
func clientGrants(t *testing.T, fnID string, where map[string][]string) []grant {
	t.Helper()
	var clients []client
	switch fnID {
	case processorID:
		clients = []client{
			{reflect.TypeFor[dynamostore.API](), "dynamodb", map[string]string{
				"dynamodb:DeleteItem": "dynamostore.Store.Forget, the CLI's forget",
				"dynamodb:Scan":       "dynamostore.Store.Locks, the CLI's status --locks",
			}},
			{processorSQS(t), "sqs", nil},
		}
	case replayerID:
		clients = []client{{reflect.TypeFor[sqsmsg.BatchSender](), "sqs", nil}, {reflect.TypeFor[replay.VisibilityChanger](), "sqs", nil}}
	}
	var out []grant
	for _, c := range clients {
		for _, g := range apiGrants(c.iface, c.service, "") {
			if _, ok := c.operatorOnly[g.Action]; ok {
				continue
			}
			resources, ok := where[g.Action]
			if !ok {
				t.Fatalf("%s's code calls %s (%s): extend this test's grants", fnID, g.Action, c.iface)
			}
			for _, r := range resources {
				out = append(out, grant{g.Action, r})
			}
		}
	}
	return slices.CompactFunc(slices.SortedFunc(slices.Values(out), func(a, b grant) int {
		return strings.Compare(a.Action+" "+a.Resource, b.Action+" "+b.Resource)
	}), func(a, b grant) bool { return a == b })
}

// TestLeastPrivilege resolves each function's role for every case as
// CloudFormation would: every call its code makes is allowed on exactly
// its queue or table (yours, by ARN, or the stack's), nothing else is
// allowed, and a Deny confines the SQS poller policy to the queue it
// consumes.
func TestLeastPrivilege(t *testing.T) {
	t.Parallel()
	tmpl := translatedTemplate(t)
	for _, c := range installCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := build(t, tmpl, c.params)
			main, dlq := arnOr(c.main, "MainQueue"), arnOr(c.dlq, "DeadLetterQueue")
			where := map[string]map[string][]string{
				processorID: {
					"dynamodb:UpdateItem": {"IdempotencyTable.Arn"},
					// The record a refused write did not return: on
					// DynamoDB, only when there is none (TTL deleted it
					// under a renewal, completion or release).
					"dynamodb:GetItem": {"IdempotencyTable.Arn"},
					// Permanent failures to the operator queue, when there is one.
					"sqs:SendMessage": {},
					// Failure backoff and the start-up check of QUEUE_URL.
					"sqs:ChangeMessageVisibility": {main},
					"sqs:GetQueueAttributes":      {main},
				},
				replayerID: {
					"sqs:SendMessage": {main, "OperatorQueue.Arn"},
					// A FIFO replay's backoff, hidden in the DLQ.
					"sqs:ChangeMessageVisibility": {dlq},
				},
			}
			if c.replayer {
				where[processorID]["sqs:SendMessage"] = []string{"OperatorQueue.Arn"}
			}
			consumes := map[string]string{processorID: main, replayerID: dlq}
			for id, installed := range map[string]bool{processorID: c.processor, replayerID: c.replayer} {
				if !installed {
					if _, ok := b.resources[roleOf(t, tmpl, id)]; ok {
						t.Errorf("%s is not installed but its role is", id)
					}
					continue
				}
				role := b.resources[roleOf(t, tmpl, id)]
				managed := []any{
					"arn:aws:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole",
					// SAM's, for Tracing (PassThrough as Active).
					"arn:aws:iam::aws:policy/AWSXrayWriteOnlyAccess",
					"arn:aws:iam::aws:policy/service-role/AWSLambdaSQSQueueExecutionRole",
				}
				if !jsonEqual(role.Properties["ManagedPolicyArns"], managed) {
					t.Errorf("%s managed policies %s, want %s", id, js(role.Properties["ManagedPolicyArns"]), js(managed))
				}
				var allowed []grant
				denyGuard := false
				for _, pol := range asSlice(role.Properties["Policies"]) {
					allowed = append(allowed, allowGrants(t, asMap(pol)["PolicyDocument"])...)
					for _, st := range asSlice(asMap(asMap(pol)["PolicyDocument"])["Statement"]) {
						s := asMap(st)
						if s["Effect"] == "Deny" && s["NotResource"] == consumes[id] &&
							slices.Equal(stringsOf(s["Action"]), []string{"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"}) {
							denyGuard = true
						}
					}
				}
				if !denyGuard {
					t.Errorf("%s: no Deny of the poller actions outside %s", id, consumes[id])
				}
				if need := clientGrants(t, id, where[id]); !sameGrants(allowed, need) {
					t.Errorf("%s allows\n%v\nits code needs\n%v", id, allowed, need)
				}
			}
		})
	}
}

// TestDashboard: the dashboard's body is JSON that watches exactly the
// queues and functions of each case, and says where the processor's own
// metrics will appear.
func TestDashboard(t *testing.T) {
	t.Parallel()
	tmpl := translatedTemplate(t)
	for _, c := range installCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := build(t, tmpl, c.params)
			d, ok := b.resources["OperationsDashboard"]
			if c.params["Dashboard"] == "off" {
				if ok {
					t.Error("a dashboard with Dashboard=off")
				}
				return
			}
			var body struct {
				Widgets []struct {
					Type       string
					Properties struct {
						Markdown string
						Metrics  [][]any
					}
				}
			}
			raw := asString(d.Properties["DashboardBody"])
			if err := json.Unmarshal([]byte(raw), &body); err != nil {
				t.Fatalf("DashboardBody is not JSON: %v\n%s", err, raw)
			}
			name := func(arn, id string) string {
				if arn != "" {
					return strings.Split(arn, ":")[5]
				}
				return id + ".QueueName"
			}
			wantQueues := []string{name(c.main, "MainQueue"), name(c.dlq, "DeadLetterQueue")}
			var wantFns []string
			if c.replayer {
				wantQueues = append(wantQueues, "OperatorQueue.QueueName")
				wantFns = append(wantFns, replayerID)
			}
			if c.processor {
				wantFns = append(wantFns, processorID)
			}
			seen := map[string]map[string]bool{}
			var text string
			for _, w := range body.Widgets {
				text += w.Properties.Markdown
				for _, m := range w.Properties.Metrics {
					if len(m) < 4 {
						t.Fatalf("metric %v", m)
					}
					key := fmt.Sprint(m[0], " ", m[1])
					if seen[key] == nil {
						seen[key] = map[string]bool{}
					}
					seen[key][fmt.Sprint(m[3])] = true
				}
			}
			wants := map[string][]string{
				"AWS/SQS ApproximateNumberOfMessagesVisible":    wantQueues,
				"AWS/SQS ApproximateNumberOfMessagesNotVisible": wantQueues,
				"AWS/SQS ApproximateAgeOfOldestMessage":         wantQueues,
				"AWS/Lambda Errors":                             wantFns,
				"AWS/Lambda Throttles":                          wantFns,
				"AWS/Lambda Duration":                           wantFns,
			}
			// Every metric each installed function writes (namespace
			// sqs-once), under the function's name.
			for _, f := range []struct {
				installed bool
				id        string
				metrics   []string
			}{
				{c.processor, processorID, []string{string(sqsonce.KindProcessed), string(sqsonce.KindDuplicate), string(sqsonce.KindInProgress),
					string(sqsonce.KindInProgressDropped), string(sqsonce.KindFailed), string(sqsonce.KindForwardedToOperator),
					metrics.BackoffApplied, string(sqsonce.KindUnrecordedCompletion), metrics.LockLost}},
				{c.replayer, replayerID, []string{replay.MetricReplayed, replay.MetricForwardedToOperator, replay.MetricSendFailed,
					replay.MetricHeld, replay.MetricReplayDelay}},
			} {
				for _, m := range f.metrics {
					key := metrics.Namespace + " " + m
					if _, ok := wants[key]; !ok {
						wants[key] = []string{}
					}
					if f.installed {
						wants[key] = append(wants[key], f.id)
					}
				}
			}
			for metric, want := range wants {
				if got := slices.Sorted(maps.Keys(seen[metric])); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
					t.Errorf("%s of %v, want %v", metric, got, want)
				}
			}
			for key := range seen {
				if _, ok := wants[key]; !ok {
					t.Errorf("the dashboard shows %s, which this test does not know: extend it", key)
				}
			}
			if strings.Contains(text, "will appear") {
				t.Errorf("text widget %q still promises metrics to come", text)
			}
		})
	}
}

// TestInstallRules: CloudFormation refuses, before creating anything, a
// replayer without your queues, FIFO batches Lambda refuses, and pollers
// outside provisioned mode's bounds; each with its assertion's words.
func TestInstallRules(t *testing.T) {
	t.Parallel()
	tmpl := translatedTemplate(t)
	for _, tt := range []struct {
		params map[string]string
		want   string // "" accepted
	}{
		{map[string]string{"Components": "replayer"}, "set ExistingQueueArn (the main queue, where replays go)"},
		{map[string]string{"Components": "replayer", "ExistingQueueArn": yourQueue}, "ExistingDeadLetterQueueArn (the dead-letter queue to replay)"},
		{map[string]string{"Components": "replayer", "ExistingDeadLetterQueueArn": yourDLQ}, "Components=replayer"},
		{map[string]string{"Components": "replayer", "ExistingQueueArn": yourQueue, "ExistingDeadLetterQueueArn": yourDLQ}, ""},
		{map[string]string{"QueueType": "fifo", "ProcessorBatchSize": "11", "ProcessorBatchingWindow": "1"}, "ProcessorBatchSize must be 1 to 10"},
		{map[string]string{"QueueType": "fifo", "ProcessorBatchingWindow": "1"}, "ProcessorBatchingWindow must be 0"},
		{map[string]string{"QueueType": "fifo", "ReplayerBatchingWindow": "5"}, "ReplayerBatchingWindow must be 0"},
		{map[string]string{"ProcessorMinimumPollers": "1"}, "ProcessorMinimumPollers must be 0 (off) or 2 to 200"},
		{map[string]string{"ProcessorMinimumPollers": "2", "ProcessorMaximumPollers": "1"}, "ProcessorMaximumPollers must be 0"},
		{map[string]string{"ProcessorMaximumPollers": "10"}, "ProcessorMaximumPollers needs ProcessorMinimumPollers"},
		{map[string]string{"ProcessorMinimumPollers": "200", "ProcessorMaximumPollers": "2000"}, ""},
		{map[string]string{"ExistingQueueArn": "arn:aws:sqs:us-east-1:123456789012:" + strings.Repeat("q", 76) + ".fifo"}, "empty or an SQS queue ARN"},
		{map[string]string{"ExistingQueueArn": "arn:aws:sns:us-east-1:123456789012:orders"}, "empty or an SQS queue ARN"},
		{map[string]string{"ExistingQueueArn": "https://sqs.us-east-1.amazonaws.com/123456789012/orders"}, "empty or an SQS queue ARN"},
		{map[string]string{"ExistingDeadLetterQueueArn": "arn:aws-cn:sqs:cn-north-1:123456789012:" + strings.Repeat("q", 80)}, ""},
		{map[string]string{"MaxMessageAge": "1209601"}, "above MaxValue"},
	} {
		_, err := tmpl.ParameterValues(tt.params)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%v refused: %v", tt.params, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%v: error %v, want one saying %q", tt.params, err, tt.want)
		}
	}
	for _, c := range installCases {
		if _, err := tmpl.ParameterValues(c.params); err != nil {
			t.Errorf("%s refused: %v", c.name, err)
		}
	}
}
