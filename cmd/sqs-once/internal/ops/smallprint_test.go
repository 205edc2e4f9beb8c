package ops_test

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sqs-once/sqs-once/cmd/sqs-once/internal/ops"
)

// noConfig is an IO whose AWS configuration must not be loaded: the test
// fails if the command gets that far.
func noConfig(t *testing.T, out, errOut io.Writer) ops.IO {
	return ops.IO{Stdout: out, Stderr: errOut, LoadConfig: func(context.Context, string, string) (aws.Config, error) {
		t.Errorf("the AWS configuration was loaded")
		return *offline(), nil
	}}
}

// TestRedriveRefusesAnUnknownReason: a --reason that sqs-once never writes
// (a typo) would match nothing, move nothing and exit 0; it is refused as
// bad usage before any AWS call, naming the reasons there are and the one
// meant.
func TestRedriveRefusesAnUnknownReason(t *testing.T) {
	t.Parallel()
	var out, errOut strings.Builder
	code := ops.Main(context.Background(), []string{"redrive", "--stack", "orders", "--from", "operator", "--reason", "permanent-eror"}, noConfig(t, &out, &errOut))
	if code != ops.ExitUsage {
		t.Errorf("exit %d, want %d", code, ops.ExitUsage)
	}
	msg := errOut.String()
	t.Logf("stderr:\n%s", msg)
	for _, r := range ops.Reasons {
		if !strings.Contains(msg, r) {
			t.Errorf("the refusal does not name the reason %s", r)
		}
	}
	for _, want := range []string{`--reason "permanent-eror" is not a reason sqs-once writes`, "Did you mean permanent-error?", "--help"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the refusal does not say %q", want)
		}
	}
	// A reason far from every known one gets no suggestion.
	errOut.Reset()
	ops.Main(context.Background(), []string{"redrive", "--from", "operator", "--reason", "zzz"}, noConfig(t, &out, &errOut))
	if strings.Contains(errOut.String(), "Did you mean") {
		t.Errorf("a suggestion for zzz: %s", errOut.String())
	}
	// Every known reason passes the check: the command goes on, to a queue
	// nothing answers.
	for _, r := range ops.Reasons {
		if res := run(t, runOpts{cfg: offline()}, "redrive", "--from", "operator", "--operator-queue", "http://127.0.0.1:1/q", "--main-queue", "http://127.0.0.1:1/m", "--reason", r, "--dry-run"); res.code != ops.ExitError {
			t.Errorf("--reason %s: exit %d, want %d (the offline queue unreachable)", r, res.code, ops.ExitError)
		}
	}
}

// TestReasonsAreEveryReasonWritten keeps ops.Reasons equal to the reasons
// the processor (package sqsonce: the Reason constants whose doc comment
// names KindForwardedToOperator) and the replayer (package replay: its
// Reason constants) write, read from their source: a reason added there and
// not here would be refused by redrive --reason.
func TestReasonsAreEveryReasonWritten(t *testing.T) {
	t.Parallel()
	var written []string
	for _, dir := range []string{filepath.Join("..", "..", "..", "..", "sqsonce"), filepath.Join("..", "..", "..", "..", "internal", "replay")} {
		// The processor's Reasons also say why a record failed; only those
		// of a forwarded record reach the operator queue.
		forwardedOnly := filepath.Base(dir) == "sqsonce"
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no Go files in %s: %v", dir, err)
		}
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range f.Decls {
				g, ok := d.(*ast.GenDecl)
				if !ok || g.Tok != token.CONST {
					continue
				}
				for _, s := range g.Specs {
					vs := s.(*ast.ValueSpec)
					if forwardedOnly && !strings.Contains(vs.Doc.Text(), "KindForwardedToOperator") {
						continue
					}
					for i, name := range vs.Names {
						if !strings.HasPrefix(name.Name, "Reason") || i >= len(vs.Values) {
							continue
						}
						if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
							v, _ := strconv.Unquote(lit.Value)
							written = append(written, v)
						}
					}
				}
			}
		}
	}
	slices.Sort(written)
	known := slices.Sorted(slices.Values(ops.Reasons))
	if len(written) < 8 || !slices.Equal(written, known) {
		t.Errorf("the forwarded Reasons of sqsonce and the Reasons of replay are %v; ops.Reasons is %v", written, known)
	}
}

// TestHelpHasNoMarkdown: what the terminal shows is plain text; pflag turns
// a flag's `NAME` into its placeholder, so no backtick may survive.
func TestHelpHasNoMarkdown(t *testing.T) {
	t.Parallel()
	for _, command := range []string{"", "status", "inspect", "release", "forget", "peek", "redrive", "preflight", "cutover"} {
		args := []string{"--help"}
		if command != "" {
			args = []string{command, "--help"}
		}
		r := run(t, runOpts{cfg: offline()}, args...)
		for _, md := range []string{"`", "**", "](", "\n#"} {
			if strings.Contains(r.stdout, md) {
				t.Errorf("sqs-once %s --help has Markdown %q", command, md)
			}
		}
	}
}

// fakeAWS answers every call with the error of the service it is for:
// DynamoDB's JSON protocol, CloudFormation's query protocol.
func fakeAWS(t *testing.T, dynamoCode, cfnCode string) *aws.Config {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch {
		case strings.HasPrefix(r.Header.Get("X-Amz-Target"), "DynamoDB_"):
			w.Header().Set("Content-Type", "application/x-amz-json-1.0")
			w.Header().Set("X-Amzn-Errortype", dynamoCode)
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"__type":"com.amazonaws.dynamodb.v20120810#`+dynamoCode+`","message":"User: arn:aws:iam::123456789012:user/op is not authorized to perform: dynamodb:GetItem"}`)
		case strings.Contains(string(body), "Action=DescribeStacks"):
			w.Header().Set("Content-Type", "text/xml")
			w.WriteHeader(http.StatusForbidden)
			_, _ = io.WriteString(w, `<ErrorResponse><Error><Type>Sender</Type><Code>`+cfnCode+`</Code><Message>User: arn:aws:iam::123456789012:user/op is not authorized to perform: cloudformation:DescribeStacks</Message></Error><RequestId>1</RequestId></ErrorResponse>`)
		default:
			t.Errorf("unexpected call: %s %s %s", r.Method, r.URL, body)
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	t.Cleanup(srv.Close)
	cfg := offline()
	cfg.BaseEndpoint = aws.String(srv.URL)
	return cfg
}

// TestErrorsNameWhere: a not-found or an access error names the table (or
// stack) and the region it happened in, and a second line says where the
// command looked and what to check.
func TestErrorsNameWhere(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		cfg  *aws.Config
		args []string
		code int
		want []string
	}{
		{"table access denied", fakeAWS(t, "AccessDeniedException", ""), []string{"inspect", "--table", "orders-idem", "--key-prefix", "p", "k"}, ops.ExitError,
			[]string{"read record p#k in table orders-idem, region us-east-1: AWS call failed", "AccessDeniedException",
				"sqs-once: refused in region us-east-1, table orders-idem: the credentials in use lack the permission the error names"}},
		{"no table", fakeAWS(t, "ResourceNotFoundException", ""), []string{"inspect", "--table", "orders-idem", "--key-prefix", "p", "k"}, ops.ExitNoTable,
			[]string{"in table orders-idem, region us-east-1: no such table",
				"sqs-once: looked in region us-east-1, table orders-idem. If it is elsewhere, give --region and --profile (or set AWS_REGION and AWS_PROFILE)."}},
		{"stack access denied", fakeAWS(t, "", "AccessDenied"), []string{"status", "--stack", "orders"}, ops.ExitError,
			[]string{"describe stack orders in region us-east-1: AWS call failed", "sqs-once: refused in region us-east-1, stack orders: "}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := run(t, runOpts{cfg: tt.cfg}, tt.args...)
			if r.code != tt.code {
				t.Errorf("exit %d, want %d", r.code, tt.code)
			}
			for _, w := range tt.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr does not say %q", w)
				}
			}
			if strings.Contains(r.stderr, "--help") {
				t.Errorf("an AWS error is not a usage error: %s", r.stderr)
			}
		})
	}
}

// TestNoRegion: without a region every call would fail with the SDK's
// words; the CLI says what to set instead.
func TestNoRegion(t *testing.T) {
	t.Parallel()
	cfg := offline()
	cfg.Region = ""
	r := run(t, runOpts{cfg: cfg}, "status", "--stack", "orders")
	if r.code != ops.ExitUsage || !strings.Contains(r.stderr, "no AWS region: give --region, set AWS_REGION, or set a region in the profile") {
		t.Errorf("exit %d, want %d naming --region", r.code, ops.ExitUsage)
	}
}

// TestMigrationUsage: preflight and cutover refuse what cannot work before
// any AWS call: a ProcessorTimeout or batching window the template does
// not allow, a stack's values given as flags, a cutover without a stack.
func TestMigrationUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"preflight", "--main-queue", "https://sqs.us-east-1.amazonaws.com/123456789012/orders", "--processor-timeout", "7"},
		{"preflight", "--main-queue", "https://sqs.us-east-1.amazonaws.com/123456789012/orders", "--batching-window", "3"},
		{"preflight", "--stack", "orders", "--processor-timeout", "60"},
		{"preflight", "extra"},
		{"cutover", "extra"},
	} {
		var out, errOut strings.Builder
		if code := ops.Main(context.Background(), args, noConfig(t, &out, &errOut)); code != ops.ExitUsage {
			t.Errorf("sqs-once %s: exit %d, want %d", strings.Join(args, " "), code, ops.ExitUsage)
		}
	}
	for _, args := range [][]string{{"preflight"}, {"preflight", "--consumer", "f"}, {"cutover"}, {"cutover", "--main-queue", "http://127.0.0.1:1/q"}} {
		if r := run(t, runOpts{cfg: offline()}, args...); r.code != ops.ExitUsage || !strings.Contains(r.stderr, "--stack") {
			t.Errorf("sqs-once %s: exit %d, want %d naming --stack", strings.Join(args, " "), r.code, ops.ExitUsage)
		}
	}
}
