//go:build integration

package templatetest

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sqs-once/sqs-once/cmd/sqs-once/samstack"
	"github.com/sqs-once/sqs-once/internal/local/mototest"
)

func TestMain(m *testing.M) {
	flag.Parse()
	warnTimeout(os.Stderr)
	mototest.Main(m)
}

// perCount is about what one run of this package's tests takes on a busy
// two-core machine (idle: a little over two minutes).
const perCount = 4 * time.Minute

// warnTimeout says, before the tests start, when -count repeats them more
// often than -timeout (go test's default is 10m) leaves room for: go test
// would otherwise end the run with "panic: test timed out", which reads
// like a hang of one test.
func warnTimeout(w io.Writer) {
	count, _ := strconv.Atoi(flagValue("test.count"))
	timeout, _ := time.ParseDuration(flagValue("test.timeout"))
	if count > 1 && timeout > 0 && time.Duration(count)*perCount > timeout {
		fmt.Fprintf(w, "templatetest: -count=%d runs these tests %d times, about %s each on a busy machine; -timeout %s may end it early: add -timeout %s\n",
			count, count, perCount, timeout, time.Duration(count+1)*perCount)
	}
}

// flagValue is the value of the testing flag name, "" if there is none.
func flagValue(name string) string {
	if f := flag.Lookup(name); f != nil {
		return f.Value.String()
	}
	return ""
}

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
