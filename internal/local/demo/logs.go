package demo

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/aws/smithy-go/logging"

	"github.com/aws/aws-lambda-go/lambdacontext"
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

// The processor's per-record outcomes the demo counts: each is logged once
// per record it applies to (a failure may log twice: the failure and an
// unreleased lock), and names what the lock protocol answered.
const (
	outcomeProcessed  = "processed"
	outcomeUnrecorded = "processed-unrecorded"
	outcomeDuplicate  = "duplicate"
	outcomeInProgress = "in-progress"
	outcomeNotStarted = "not-started"
)

func counted(outcome string) bool {
	switch outcome {
	case outcomeProcessed, outcomeUnrecorded, outcomeDuplicate, outcomeInProgress, outcomeNotStarted:
		return true
	}
	return false
}

// outcomeCounter passes the processor's log lines on and counts, for each,
// the record outcome it carries (the "outcome" attribute, set with With or
// on the line itself): the numbers are the processor's own decisions, not
// derived from what reached the queues.
type outcomeCounter struct {
	slog.Handler
	outcome string // set by WithAttrs
	count   func(outcome string)
}

func newOutcomeCounter(h slog.Handler, count func(string)) slog.Handler {
	return outcomeCounter{Handler: h, count: count}
}

func (h outcomeCounter) Handle(ctx context.Context, r slog.Record) error {
	o := h.outcome
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "outcome" {
			o = a.Value.String()
		}
		return true
	})
	if h.count != nil && counted(o) {
		h.count(o)
	}
	return h.Handler.Handle(ctx, r)
}

func (h outcomeCounter) WithAttrs(attrs []slog.Attr) slog.Handler {
	o := h.outcome
	for _, a := range attrs {
		if a.Key == "outcome" {
			o = a.Value.String()
		}
	}
	return outcomeCounter{Handler: h.Handler.WithAttrs(attrs), outcome: o, count: h.count}
}

// WithGroup stops counting: inside a group, "outcome" is some other value.
func (h outcomeCounter) WithGroup(name string) slog.Handler {
	return outcomeCounter{Handler: h.Handler.WithGroup(name)}
}

// sdkLogger sends the AWS SDK's log lines to log (the functions' log file)
// as warnings, tagged with their source.
func sdkLogger(log *slog.Logger) logging.Logger {
	return logging.LoggerFunc(func(class logging.Classification, format string, v ...any) {
		log.Warn(fmt.Sprintf(format, v...), "source", "aws-sdk-go-v2", "class", string(class))
	})
}
