//go:build integration

package templatetest

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sqs-once/sqs-once/internal/local/mototest"
	"github.com/sqs-once/sqs-once/local/samstack"
)

func TestMain(m *testing.M) { mototest.Main(m) }

// root is the repository's root directory, where template.yaml lives.
func root(t testing.TB) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("repository root not found at %s: %v", dir, err)
	}
	return dir
}

func templatePath(t testing.TB) string { return filepath.Join(root(t), "template.yaml") }

func testContext(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

var translated = sync.OnceValues(func() (samstack.Template, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return samstack.Translate(ctx, filepath.Join("..", "..", "template.yaml"), nil)
})

// translatedTemplate is template.yaml as the SAM translator turns it into
// CloudFormation, with default parameters; shared by the tests.
func translatedTemplate(t testing.TB) samstack.Template {
	t.Helper()
	tmpl, err := translated()
	if err != nil {
		t.Fatal(err)
	}
	return tmpl
}
