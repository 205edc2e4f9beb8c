package dynalite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqs-once/sqs-once/internal/local/mototest"
	"github.com/sqs-once/sqs-once/internal/local/proc"
)

// Version is the dynalite release the tests run against. The Makefile's
// DYNALITE_VERSION installs it (a test keeps the two equal).
const Version = "4.0.0"

// Dir is where dynalite is installed, relative to the repository's root:
// npm's prefix, so the binary is Dir/node_modules/.bin/dynalite.
const Dir = ".tools"

// Region is the region of the configuration Config returns; dynalite
// keeps one set of tables whatever the region.
const Region = "us-east-1"

// InstallCommand installs the pinned dynalite where Binary looks for it;
// run it in the repository's root. dynalite 4 needs Node.js 20 or later.
const InstallCommand = "npm install --prefix " + Dir + " --no-audit --no-fund --save-exact dynalite@" + Version

// Binary returns the path of the pinned dynalite under the repository's root,
// or an error that says how to install it.
func Binary() (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	hint := fmt.Sprintf("install it with `%s` in %s (it needs Node.js 20 or later)", InstallCommand, root)
	if _, err := exec.LookPath("node"); err != nil {
		return "", fmt.Errorf("dynalite needs node, which is not on PATH: install Node.js 20 or later, then %s", hint)
	}
	bin := filepath.Join(root, Dir, "node_modules", ".bin", "dynalite")
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("dynalite is not installed at %s: %s", bin, hint)
	}
	// A stale install would test against another implementation than the
	// one the project pins.
	b, err := os.ReadFile(filepath.Join(root, Dir, "node_modules", "dynalite", "package.json"))
	if err != nil {
		return "", fmt.Errorf("dynalite's package.json: %w; %s", err, hint)
	}
	var pkg struct{ Version string }
	if err := json.Unmarshal(b, &pkg); err != nil || pkg.Version != Version {
		return "", fmt.Errorf("dynalite at %s is version %q, not %s: %s", bin, pkg.Version, Version, hint)
	}
	return bin, nil
}

// repoRoot is where make setup installs dynalite (under Dir): the
// repository's root, from a test of any of its modules.
func repoRoot() (string, error) { return proc.RepoRoot() }

// Server is a running dynalite bound to the loopback interface.
type Server struct {
	// URL is the endpoint, http://127.0.0.1:<port>.
	URL string

	proc *proc.Process
}

// Start launches dynalite on a free loopback port for t, and stops it when
// t ends. A missing dynalite fails t with the install command.
func Start(t testing.TB) *Server {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var lastErr error
	// Another process may take the free port between the probe and
	// dynalite's bind (dynalite cannot pick a port itself: its --port 0 means
	// the default, 4567); a few attempts make that race harmless.
	for range 3 {
		port, err := proc.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		s, err := launch(ctx, bin, port)
		if err == nil {
			t.Cleanup(s.Stop)
			return s
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	t.Fatalf("start dynalite: %v", lastErr)
	return nil
}

func launch(ctx context.Context, bin string, port int) (*Server, error) {
	// Tables become ACTIVE at once: the default keeps them CREATING for
	// half a second, a wait every test would pay.
	cmd := exec.Command(bin, "--host", "127.0.0.1", "--port", strconv.Itoa(port),
		"--createTableMs", "0", "--deleteTableMs", "0", "--updateTableMs", "0")
	stderr := proc.NewTail(4096)
	cmd.Stderr = stderr
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	// dynalite prints one line once it listens; the line names the port,
	// so a server of someone else's that answers on it is never taken for
	// ours.
	want := fmt.Sprintf(":%d", port)
	pr, err := proc.Start(ctx, cmd, func(line string) bool {
		return strings.HasPrefix(line, "Dynalite listening at") && strings.HasSuffix(line, want)
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("dynalite on %s: %w; stderr: %s", url, err, stderr)
	}
	return &Server{URL: url, proc: pr}, nil
}

// Stop terminates the process this Server started, and only that one.
func (s *Server) Stop() { s.proc.Stop(5 * time.Second) }

// Config is an SDK configuration that talks to this server only, with
// dummy credentials. It is built field by field, not loaded, so that
// nothing in the environment (a package's moto_server endpoint, a profile)
// sends it elsewhere, and it never asks the instance metadata service for
// credentials.
func (s *Server) Config() aws.Config {
	return aws.Config{
		Region:       Region,
		Credentials:  credentials.NewStaticCredentialsProvider("dynalite", "dynalite", ""),
		BaseEndpoint: aws.String(s.URL),
	}
}

// Config starts a dynalite for t (see Start) and returns its configuration.
func Config(t testing.TB) aws.Config {
	t.Helper()
	return Start(t).Config()
}

// NewIdempotencyTable creates a table with the schema the DynamoDB store
// expects (partition key id, string) and returns its name once the table
// is ACTIVE. dynalite has no TTL (no UpdateTimeToLive), so none is set.
func NewIdempotencyTable(t testing.TB, cfg aws.Config) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name := mototest.Name("idem")
	client := dynamodb.NewFromConfig(cfg)
	_, err := client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
	})
	// The name is this test's alone: a table that exists already is this
	// call's own first attempt, applied and retried by the SDK.
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		t.Fatalf("create table %s: %v", name, err)
	}
	// dynalite answers CreateTable with the table CREATING and refuses its
	// items until it is ACTIVE, at once with --createTableMs 0.
	mototest.WaitTableActive(ctx, t, client, name)
	return name
}
