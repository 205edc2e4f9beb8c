package demo

import (
	"context"
	"io"
	"log/slog"

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
