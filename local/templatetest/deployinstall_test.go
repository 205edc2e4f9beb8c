//go:build integration

package templatetest

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sqs-once/sqs-once/internal/envconfig"
	"github.com/sqs-once/sqs-once/internal/local/mototest"
	"github.com/sqs-once/sqs-once/internal/replay"
)

// TestDeployedInstalls deploys the template to moto_server the ways a real
// install does: with the stack's queues (standard and FIFO), on queues
// created beforehand (standard and FIFO), the replayer alone in front of
// your own consumer, the processor alone, and provisioned pollers. For each
// it reads back from the deployed stack which functions exist, the queue
// each event source mapping consumes, the environment (QUEUE_URL,
// MAIN_QUEUE_URL, OPERATOR_QUEUE_URL, MAX_MESSAGE_AGE) and that the binaries
// start with it, the queues' type, the outputs, and the SQS permissions of
// each role as moto_server evaluated them: exactly the queues of the case.
func TestDeployedInstalls(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                string
		params              map[string]string
		existingMain        bool // create a queue first and pass it as ExistingQueueArn
		existingDLQ         bool
		fifo                bool
		processor, replayer bool
	}{
		{name: "defaults", processor: true, replayer: true},
		{name: "fifo", params: map[string]string{"QueueType": "fifo", "ContentBasedDeduplication": "true"}, fifo: true, processor: true, replayer: true},
		{name: "existing queues", existingMain: true, existingDLQ: true, processor: true, replayer: true},
		{name: "existing fifo queues", params: map[string]string{"QueueType": "fifo"}, existingMain: true, existingDLQ: true, fifo: true, processor: true, replayer: true},
		{name: "replayer on your queues", params: map[string]string{"Components": "replayer"}, existingMain: true, existingDLQ: true, replayer: true},
		{name: "processor", params: map[string]string{"Components": "processor"}, processor: true},
		{name: "processor on your queue, pollers and metrics", params: map[string]string{
			"Components": "processor", "ProcessorMinimumPollers": "2", "ProcessorMaximumPollers": "10", "ProcessorMappingMetrics": "on", "Tracing": "Active",
		}, existingMain: true, processor: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := mototest.Config(t)
			ctx := testContext(t, 2*time.Minute)
			client := sqs.NewFromConfig(cfg)
			params := maps.Clone(tt.params)
			if params == nil {
				params = map[string]string{}
			}
			var yourMain, yourDLQ string
			if tt.existingDLQ {
				yourDLQ = mototest.QueueARN(t, cfg, mototest.NewQueue(t, cfg, tt.fifo, nil))
				params["ExistingDeadLetterQueueArn"] = yourDLQ
			}
			if tt.existingMain {
				yourMain = mototest.QueueARN(t, cfg, mototest.NewQueue(t, cfg, tt.fifo, map[string]string{"VisibilityTimeout": "180"}))
				params["ExistingQueueArn"] = yourMain
			}
			deploy := deploy
			if !tt.existingMain && !tt.existingDLQ {
				deploy = deployShared // reads the stack only
			}
			st := deploy(t, params)
			if st.Status != "CREATE_COMPLETE" {
				t.Fatalf("stack status %s", st.Status)
			}
			out := func(key string) string {
				v, err := st.Output(key)
				if err != nil {
					t.Fatal(err)
				}
				return v
			}
			// The URL the template derives from an ARN, as SQS spells it.
			derived := func(arn string) string {
				p := strings.Split(arn, ":")
				return "https://sqs." + p[3] + ".amazonaws.com/" + p[4] + "/" + p[5]
			}
			mainARN, dlqARN := out("MainQueueArn"), out("DeadLetterQueueArn")
			if tt.existingMain && (mainARN != yourMain || out("MainQueueUrl") != derived(yourMain)) {
				t.Errorf("main queue outputs %s %s, want yours: %s %s", mainARN, out("MainQueueUrl"), yourMain, derived(yourMain))
			}
			if tt.existingDLQ && (dlqARN != yourDLQ || out("DeadLetterQueueUrl") != derived(yourDLQ)) {
				t.Errorf("DLQ outputs %s %s, want yours: %s %s", dlqARN, out("DeadLetterQueueUrl"), yourDLQ, derived(yourDLQ))
			}
			for key, want := range map[string]bool{
				"OperatorQueueUrl": tt.replayer, "DlqReplayerFunctionArn": tt.replayer,
				"IdempotencyTableName": tt.processor, "ProcessorFunctionArn": tt.processor,
			} {
				if _, got := st.Outputs[key]; got != want {
					t.Errorf("output %s present = %v, want %v", key, got, want)
				}
			}
			for id, want := range map[string]bool{
				"MainQueue": !tt.existingMain, "DeadLetterQueue": !tt.existingDLQ, "OperatorQueue": tt.replayer,
				processorID: tt.processor, replayerID: tt.replayer, "IdempotencyTable": tt.processor,
			} {
				if _, got := st.Resources[id]; got != want {
					t.Errorf("%s created = %v, want %v", id, got, want)
				}
			}

			// The queues the stack created are of the type asked for; a
			// FIFO operator queue gets its name from the endpoint.
			for _, id := range []string{"MainQueue", "DeadLetterQueue", "OperatorQueue"} {
				r, ok := st.Resources[id]
				if !ok {
					continue
				}
				a, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
					QueueUrl: aws.String(r.PhysicalID), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll},
				})
				if err != nil {
					t.Fatal(err)
				}
				if fifo := a.Attributes["FifoQueue"] == "true"; fifo != tt.fifo || strings.HasSuffix(r.PhysicalID, ".fifo") != tt.fifo {
					t.Errorf("%s %s: FifoQueue %q, want FIFO %v", id, r.PhysicalID, a.Attributes["FifoQueue"], tt.fifo)
				}
				if id == "MainQueue" && tt.fifo && a.Attributes["ContentBasedDeduplication"] != st.Parameters["ContentBasedDeduplication"] {
					t.Errorf("ContentBasedDeduplication %q, want %s", a.Attributes["ContentBasedDeduplication"], st.Parameters["ContentBasedDeduplication"])
				}
				if id == "OperatorQueue" && tt.fifo {
					t.Logf("FIFO operator queue named by the endpoint: %s", r.PhysicalID)
				}
			}

			opURL := ""
			if tt.replayer {
				opURL = out("OperatorQueueUrl")
			}
			if tt.processor {
				proc := st.Functions[processorID]
				if es, ok := proc.EventSource(mainARN); !ok || len(proc.EventSources) != 1 {
					t.Errorf("processor consumes %+v, want %s only", proc.EventSources, mainARN)
				} else if p := st.Parameters; p["ProcessorMinimumPollers"] == "0" && es.MaximumConcurrency != atoi(t, p["ProcessorMaximumConcurrency"]) {
					t.Errorf("processor mapping maximum concurrency %d, want %s", es.MaximumConcurrency, p["ProcessorMaximumConcurrency"])
				}
				if proc.Env["QUEUE_URL"] != out("MainQueueUrl") || proc.Env["OPERATOR_QUEUE_URL"] != opURL {
					t.Errorf("processor QUEUE_URL %q, OPERATOR_QUEUE_URL %q; want %q, %q", proc.Env["QUEUE_URL"], proc.Env["OPERATOR_QUEUE_URL"], out("MainQueueUrl"), opURL)
				}
				// Provisioned mode and the mapping's metrics, as Lambda holds
				// them. (moto_server drops TracingConfig: samstack reports it,
				// TestInstallEventSourceOptions checks it.)
				if es, ok := proc.EventSource(mainARN); ok {
					lc := lambda.NewFromConfig(cfg)
					m, err := lc.GetEventSourceMapping(ctx, &lambda.GetEventSourceMappingInput{UUID: aws.String(es.UUID)})
					if err != nil {
						t.Fatal(err)
					}
					p := st.Parameters
					var wantPollers *lambdatypes.ProvisionedPollerConfig
					if p["ProcessorMinimumPollers"] != "0" {
						wantPollers = &lambdatypes.ProvisionedPollerConfig{MinimumPollers: aws.Int32(int32(atoi(t, p["ProcessorMinimumPollers"])))}
						if p["ProcessorMaximumPollers"] != "0" {
							wantPollers.MaximumPollers = aws.Int32(int32(atoi(t, p["ProcessorMaximumPollers"])))
						}
					}
					if got := m.ProvisionedPollerConfig; (got == nil) != (wantPollers == nil) || got != nil &&
						(aws.ToInt32(got.MinimumPollers) != aws.ToInt32(wantPollers.MinimumPollers) || aws.ToInt32(got.MaximumPollers) != aws.ToInt32(wantPollers.MaximumPollers)) {
						t.Errorf("processor mapping ProvisionedPollerConfig %+v, want %+v", got, wantPollers)
					}
					if wantPollers != nil && m.ScalingConfig != nil && m.ScalingConfig.MaximumConcurrency != nil {
						t.Errorf("processor mapping has maximum concurrency %d with provisioned mode", aws.ToInt32(m.ScalingConfig.MaximumConcurrency))
					}
					metrics := m.MetricsConfig != nil && len(m.MetricsConfig.Metrics) == 1 && m.MetricsConfig.Metrics[0] == lambdatypes.EventSourceMappingMetricEventCount
					if metrics != (p["ProcessorMappingMetrics"] == "on") {
						t.Errorf("processor mapping MetricsConfig %+v, want EventCount %v", m.MetricsConfig, p["ProcessorMappingMetrics"] == "on")
					}
				}
				if _, err := processorConfig(envconfig.Map(lambdaEnv(proc)), aws.Config{}); err != nil {
					t.Errorf("processor refuses the deployed environment: %v", err)
				}
				want := []grant{{"sqs:ChangeMessageVisibility", mainARN}, {"sqs:GetQueueAttributes", mainARN}}
				if tt.replayer {
					want = append(want, grant{"sqs:SendMessage", out("OperatorQueueArn")})
				}
				if got := sqsGrants(deployedGrants(t, st, processorID)); !sameGrants(got, want) {
					t.Errorf("deployed processor role allows\n%v\nwant\n%v", got, want)
				}
			}
			if tt.replayer {
				rep := st.Functions[replayerID]
				if _, ok := rep.EventSource(dlqARN); !ok || len(rep.EventSources) != 1 {
					t.Errorf("replayer consumes %+v, want %s only", rep.EventSources, dlqARN)
				}
				age := st.Parameters["MaxMessageAge"]
				if age == "0" && !tt.existingMain {
					age = st.Parameters["MessageRetentionPeriod"]
				}
				if rep.Env["MAIN_QUEUE_URL"] != out("MainQueueUrl") || rep.Env["OPERATOR_QUEUE_URL"] != opURL || rep.Env["MAX_MESSAGE_AGE"] != age {
					t.Errorf("replayer MAIN_QUEUE_URL %q, OPERATOR_QUEUE_URL %q, MAX_MESSAGE_AGE %q; want %q, %q, %q",
						rep.Env["MAIN_QUEUE_URL"], rep.Env["OPERATOR_QUEUE_URL"], rep.Env["MAX_MESSAGE_AGE"], out("MainQueueUrl"), opURL, age)
				}
				if _, err := replay.LoadConfig(envconfig.Map(lambdaEnv(rep))); err != nil {
					t.Errorf("replayer refuses the deployed environment: %v", err)
				}
				want := []grant{{"sqs:SendMessage", mainARN}, {"sqs:SendMessage", out("OperatorQueueArn")}, {"sqs:ChangeMessageVisibility", dlqARN}}
				if got := sqsGrants(deployedGrants(t, st, replayerID)); !sameGrants(got, want) {
					t.Errorf("deployed replayer role allows\n%v\nwant\n%v", got, want)
				}
			}
		})
	}
}

func sqsGrants(gs []grant) []grant {
	var out []grant
	for _, g := range gs {
		if strings.HasPrefix(g.Action, "sqs:") {
			out = append(out, g)
		}
	}
	return out
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n := 0
	for _, r := range s {
		if r < '0' || r > '9' {
			t.Fatalf("%q is not a whole number", s)
		}
		n = n*10 + int(r-'0')
	}
	return n
}
