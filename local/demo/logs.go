package demo

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/aws/smithy-go/logging"

	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/sqs-once/sqs-once/internal/metrics"
)

// functionLogHandler writes the functions' logs as Lambda's JSON log format
// would (timestamp, level, message, requestId), to a file instead of stdout,
// so they do not tear the progress line.
type functionLogHandler struct{ slog.Handler }

func newFunctionLogger(w io.Writer) *slog.Logger {
	return slog.New(functionLogHandler{slog.NewJSONHandler(w, &slog.HandlerOptions{ReplaceAttr: lambdacontext.ReplaceAttr})})
}

func (h functionLogHandler) Handle(ctx context.Context, r slog.Record) error {
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		r.AddAttrs(slog.String("requestId", lc.AwsRequestID))
	}
	return h.Handler.Handle(ctx, r)
}

func (h functionLogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return functionLogHandler{h.Handler.WithAttrs(attrs)}
}

func (h functionLogHandler) WithGroup(name string) slog.Handler {
	return functionLogHandler{h.Handler.WithGroup(name)}
}

// The processor's per-record outcomes the report has a line for: the
// "outcome" attribute of its log lines, what the lock protocol answered a
// record (a failure may log twice, the failure and an unreleased lock; the
// last line is the answer). Any other outcome (payload-mismatch,
// not-acquired, no-key, ...) is counted under its own name.
const (
	outcomeProcessed  = "processed"
	outcomeUnrecorded = "processed-unrecorded"
	outcomeDuplicate  = "duplicate"
	outcomeInProgress = "in-progress"
	outcomeNotStarted = "not-started"
	outcomeFailed     = "failed"
)

// outcomeCounter passes the processor's log lines on and reports, for each
// that carries a record outcome (the "outcome" attribute, set with With or on
// the line itself), that outcome with its record's message id and its
// invocation's request id: the numbers are the processor's own decisions,
// not derived from what reached the queues.
type outcomeCounter struct {
	slog.Handler
	outcome   string // set by WithAttrs
	messageID string // set by WithAttrs
	count     func(Answer)
}

func newOutcomeCounter(h slog.Handler, count func(Answer)) slog.Handler {
	return outcomeCounter{Handler: h, count: count}
}

func (h outcomeCounter) Handle(ctx context.Context, r slog.Record) error {
	o, id := h.outcome, h.messageID
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "outcome":
			o = a.Value.String()
		case "messageId":
			id = a.Value.String()
		}
		return true
	})
	if h.count != nil && o != "" {
		a := Answer{MessageID: id, Outcome: o}
		if lc, ok := lambdacontext.FromContext(ctx); ok {
			a.RequestID = lc.AwsRequestID
		}
		h.count(a)
	}
	return h.Handler.Handle(ctx, r)
}

func (h outcomeCounter) WithAttrs(attrs []slog.Attr) slog.Handler {
	o, id := h.outcome, h.messageID
	for _, a := range attrs {
		switch a.Key {
		case "outcome":
			o = a.Value.String()
		case "messageId":
			id = a.Value.String()
		}
	}
	return outcomeCounter{Handler: h.Handler.WithAttrs(attrs), outcome: o, messageID: id, count: h.count}
}

// WithGroup stops counting: inside a group, "outcome" is some other value.
func (h outcomeCounter) WithGroup(name string) slog.Handler {
	return outcomeCounter{Handler: h.Handler.WithGroup(name)}
}

// processorMetrics is the processor's ConsumerConfig.Metrics: it reads back every
// EMF document the processor writes (each Write is whole documents, one per
// line: metrics.Set.Write) and reports the records hidden until the lock
// that refused them could be taken over. Counting the metric, by its
// exported name, rather than the log line that goes with it, keeps the
// report's number the one CloudWatch would show.
type processorMetrics struct{ hidden func(n int) }

func (m processorMetrics) Write(p []byte) (int, error) {
	docs, err := metrics.ParseAll(p)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, d := range docs {
		for _, v := range d.Values[metrics.InProgressHidden] {
			n += int(v)
		}
	}
	if n > 0 {
		m.hidden(n)
	}
	return len(p), nil
}

// sdkLogger sends the AWS SDK's log lines to log (the functions' log file)
// as warnings, tagged with their source.
func sdkLogger(log *slog.Logger) logging.Logger {
	return logging.LoggerFunc(func(class logging.Classification, format string, v ...any) {
		log.Warn(fmt.Sprintf(format, v...), "source", "aws-sdk-go-v2", "class", string(class))
	})
}
