package ops

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"

	"github.com/sqs-once/sqs-once/internal/metrics"
	"github.com/sqs-once/sqs-once/sqsonce"
)

// CountsAPI reads the processor's own metrics: the counts it writes to its
// log in the embedded metric format (internal/metrics), which CloudWatch
// extracts. One GetMetricData call reads them all.
type CountsAPI interface {
	GetMetricData(ctx context.Context, in *cloudwatch.GetMetricDataInput, optFns ...func(*cloudwatch.Options)) (*cloudwatch.GetMetricDataOutput, error)
}

var _ CountsAPI = (*cloudwatch.Client)(nil)

// CountsPeriod is the period status counts the processor's metrics over.
const CountsPeriod = time.Hour

// countedMetrics are the processor's metrics status reads, in the order it
// prints them: each record once under its sqsonce.Kind, then again under
// what happened on the way (sqsonce/metrics.go writes them).
var countedMetrics = []string{
	string(sqsonce.KindProcessed), string(sqsonce.KindDuplicate), string(sqsonce.KindInProgress),
	string(sqsonce.KindInProgressDropped), string(sqsonce.KindAlreadyStarted), string(sqsonce.KindFailed),
	string(sqsonce.KindForwardedToOperator), string(sqsonce.KindUnrecordedCompletion),
	metrics.LockLost, metrics.BackoffApplied, metrics.InProgressHidden,
}

// alwaysShown are the counts status prints even at zero: what a record
// became when all went well. The others are printed when not zero.
var alwaysShown = map[string]bool{string(sqsonce.KindProcessed): true, string(sqsonce.KindDuplicate): true}

// Counts reads the processor's metrics.
type Counts struct {
	Metrics CountsAPI
	// MetricsEndpoint is the URL Metrics calls in place of AWS's own
	// (AWS_ENDPOINT_URL), "" for AWS's: as Queues.MetricsEndpoint.
	MetricsEndpoint string
	Now             func() time.Time
}

// ProcessorCounts is what the stack's processor did over a recent period,
// as CloudWatch sums its metrics.
type ProcessorCounts struct {
	// Function is the processor's function name: the value of the
	// metrics' FunctionName dimension.
	Function      string    `json:"function"`
	Namespace     string    `json:"namespace"`
	PeriodSeconds int64     `json:"periodSeconds"`
	Start         time.Time `json:"start"`
	End           time.Time `json:"end"`
	// Counts are the sums over the period by metric name, zero for a
	// metric without a datapoint; nil when they could not be read (Note).
	Counts map[string]int64 `json:"counts,omitempty"`
	// Note says why Counts is missing or empty: MetricNotAvailable when
	// the endpoint does not serve CloudWatch, NoProcessorDatapoint when the
	// processor wrote no metric in the period.
	Note string `json:"note,omitempty"`
	// Error is the SDK's error when reading failed: what status --verbose
	// adds to MetricNotAvailable.
	Error string `json:"error,omitempty"`
}

// NoProcessorDatapoint is ProcessorCounts.Note when no metric of the
// processor has a datapoint in the period: an invocation writes its
// counts, zeros too, so none ran (or its log lines did not reach
// CloudWatch).
const NoProcessorDatapoint = "no datapoint: the processor handled no message in the period, or its metrics do not reach CloudWatch"

// Processor sums the processor function's metrics over the CountsPeriod
// before now, on whole minutes: namespace sqs-once, dimension FunctionName
// (the dimension set every document of the processor declares), statistic
// Sum. A failure to read is not the command's: the note says it, and the
// SDK's error is kept, as for the queues' age.
func (c *Counts) Processor(ctx context.Context, function string) ProcessorCounts {
	pc := c.period(function)
	if c.Metrics == nil {
		pc.Note = "unknown (no CloudWatch client)"
		return pc
	}
	queries := make([]cwtypes.MetricDataQuery, len(countedMetrics))
	for i, name := range countedMetrics {
		queries[i] = cwtypes.MetricDataQuery{
			Id: aws.String("m" + strconv.Itoa(i)),
			MetricStat: &cwtypes.MetricStat{
				Metric: &cwtypes.Metric{
					Namespace:  aws.String(metrics.Namespace),
					MetricName: aws.String(name),
					Dimensions: []cwtypes.Dimension{{Name: aws.String(metrics.DimensionFunction), Value: aws.String(function)}},
				},
				// Minutes, summed here: a period the length of the
				// window might be split across two buckets.
				Period: aws.Int32(60),
				Stat:   aws.String(string(cwtypes.StatisticSum)),
			},
		}
	}
	in := &cloudwatch.GetMetricDataInput{MetricDataQueries: queries, StartTime: aws.Time(pc.Start), EndTime: aws.Time(pc.End)}
	sums := make([]float64, len(countedMetrics))
	seen := false
	// 11 metrics of 60 minutes fit one page; the bound only keeps a
	// misbehaving endpoint from looping.
	for page := 0; page < 20; page++ {
		out, err := c.Metrics.GetMetricData(ctx, in)
		if err != nil {
			pc.Note, pc.Error = metricNote(err, c.MetricsEndpoint != "")
			return pc
		}
		for _, r := range out.MetricDataResults {
			// An id is "m" and the metric's index in countedMetrics.
			digits, ok := strings.CutPrefix(aws.ToString(r.Id), "m")
			i, err := strconv.Atoi(digits)
			if !ok || err != nil || i < 0 || i >= len(sums) {
				continue
			}
			for _, v := range r.Values {
				sums[i] += v
				seen = true
			}
		}
		if aws.ToString(out.NextToken) == "" {
			break
		}
		in.NextToken = out.NextToken
	}
	pc.Counts = map[string]int64{}
	for i, name := range countedMetrics {
		pc.Counts[name] = int64(sums[i])
	}
	if !seen {
		pc.Note = NoProcessorDatapoint
	}
	return pc
}

// period is the counts of function not read yet: the period they cover,
// the CountsPeriod before now on whole minutes.
func (c *Counts) period(function string) ProcessorCounts {
	end := c.Now().UTC().Truncate(time.Minute)
	return ProcessorCounts{Function: function, Namespace: metrics.Namespace, PeriodSeconds: int64(CountsPeriod / time.Second),
		Start: end.Add(-CountsPeriod), End: end}
}

// StackProcessor is Processor for the processor function of stack, found
// as status finds the stack's other resources (its logical id
// ProcessorFunction). A stack without one, or whose resources cannot be
// listed, gives counts with a note saying so and no error: the rest of
// status is still worth showing.
func (c *Counts) StackProcessor(ctx context.Context, cf StackAPI, stack string) ProcessorCounts {
	ids, err := stackResources(ctx, cf, stack)
	if err != nil {
		pc := c.period("")
		pc.Note, pc.Error = "unknown: "+err.Error(), err.Error()
		return pc
	}
	function, ok := ids[processorLogicalID]
	if !ok || function == "" {
		pc := c.period("")
		pc.Note = "unknown: no " + processorLogicalID + " in stack " + stack
		return pc
	}
	return c.Processor(ctx, function)
}

// processorCountsWords is status's line of the processor's counts: those always
// shown, then every other that is not zero, under the names the processor
// writes (those a dashboard or alarm uses).
func processorCountsWords(pc ProcessorCounts) string {
	var words string
	for _, name := range countedMetrics {
		n := pc.Counts[name]
		if n == 0 && !alwaysShown[name] {
			continue
		}
		if words != "" {
			words += ", "
		}
		words += fmt.Sprintf("%d %s", n, name)
	}
	return words
}

// periodWords says the period counted, "last hour (10:12 to 11:12 UTC)".
func periodWords(pc ProcessorCounts) string {
	span := "last " + (time.Duration(pc.PeriodSeconds) * time.Second).String()
	if pc.PeriodSeconds == int64(time.Hour/time.Second) {
		span = "last hour"
	}
	return fmt.Sprintf("%s, %s to %s UTC", span, pc.Start.UTC().Format("15:04"), pc.End.UTC().Format("15:04"))
}
