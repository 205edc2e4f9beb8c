package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

func TestShippedHandlerLogsMetadataNeverTheBody(t *testing.T) {
	var buf bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewJSONHandler(&buf, nil)))
	defer slog.SetDefault(prev)

	body := `{"email":"jane@example.com","card":"4111111111111111"}`
	if err := handleMessage(context.Background(), events.SQSMessage{MessageId: "m-1", Body: body}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if !strings.Contains(out, `"messageId":"m-1"`) || !strings.Contains(out, fmt.Sprintf(`"bytes":%d`, len(body))) {
		t.Errorf("log line lacks id or size: %s", out)
	}
	if strings.Contains(out, "jane@example.com") || strings.Contains(out, "4111") {
		t.Errorf("log line leaks the body: %s", out)
	}
}
