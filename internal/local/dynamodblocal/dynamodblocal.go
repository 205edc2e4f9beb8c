package dynamodblocal

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sqs-once/sqs-once/internal/local/mototest"
	"github.com/sqs-once/sqs-once/internal/local/proc"
)

// Package is the npm package that ships DynamoDB Local.
const Package = "amplify-dynamodb-simulator"

// Version is the release of Package the tests run against. The Makefile's
// DYNAMODB_LOCAL_VERSION installs it (a test keeps the two equal).
const Version = "2.9.30"

// EngineVersion is the DynamoDB Local release that Version ships, as the
// server names itself at start-up.
const EngineVersion = "1.25.1"

// Dir is where Package is installed, relative to the repository's root:
// npm's prefix, shared with dynalite, so the jar is
// Dir/node_modules/amplify-dynamodb-simulator/emulator/DynamoDBLocal.jar.
const Dir = ".tools"

// Region is the region of the configuration Config returns. The server
// keeps one set of tables for every region and credential (-sharedDb), so
// a client with another region sees the same tables.
const Region = "us-east-1"

// InstallCommand installs the pinned Package where Jar looks for it; run it
// in the repository's root.
const InstallCommand = "npm install --prefix " + Dir + " --no-audit --no-fund --save-exact " + Package + "@" + Version

// JavaPackage is the Debian (and Ubuntu) package of the Java runtime that
// runs DynamoDB Local; its modules include the compiler that Java's
// source-file launcher needs to run Loopback.java.
const JavaPackage = "openjdk-17-jre-headless"

// JavaInstallCommand installs JavaPackage; run it as root.
const JavaInstallCommand = "apt-get install -y " + JavaPackage

// Jar returns the path of the pinned DynamoDBLocal.jar under the
// repository's root, or an error that says how to install what is missing:
// the npm package, java, or both.
func Jar() (string, error) {
	root, err := proc.RepoRoot()
	if err != nil {
		return "", err
	}
	var missing []string
	if _, err := exec.LookPath("java"); err != nil {
		missing = append(missing, fmt.Sprintf("DynamoDB Local needs java (Java 17), which is not on PATH: install it with `%s` as root (Debian, Ubuntu), or a Java 17 runtime otherwise", JavaInstallCommand))
	}
	hint := fmt.Sprintf("install it with `%s` in %s (npm comes with Node.js)", InstallCommand, root)
	pkg := filepath.Join(root, Dir, "node_modules", Package)
	jar := filepath.Join(pkg, "emulator", "DynamoDBLocal.jar")
	if _, err := os.Stat(jar); err != nil {
		missing = append(missing, fmt.Sprintf("DynamoDB Local is not installed at %s: %s", jar, hint))
	} else {
		// A stale install would test against another release than the one
		// the project pins.
		var meta struct{ Version string }
		b, err := os.ReadFile(filepath.Join(pkg, "package.json"))
		if err == nil {
			err = json.Unmarshal(b, &meta)
		}
		switch {
		case err != nil:
			missing = append(missing, fmt.Sprintf("%s's package.json: %v; %s", Package, err, hint))
		case meta.Version != Version:
			missing = append(missing, fmt.Sprintf("%s at %s is version %q, not %s: %s", Package, pkg, meta.Version, Version, hint))
		}
	}
	if len(missing) > 0 {
		return "", errors.New(strings.Join(missing, "; and "))
	}
	return jar, nil
}

// loopbackSource is the launcher that binds DynamoDB Local to 127.0.0.1
// (see its comment).
//
//go:embed Loopback.java
var loopbackSource []byte

// readyPrefix starts the one line the launcher prints once the server
// listens; the port follows it.
const readyPrefix = "DynamoDB Local listening on 127.0.0.1:"

// jvmFlags trade the JIT's peak speed for start-up time and CPU on a
// machine of two cores shared by parallel test binaries: C1 alone compiles
// a fraction of what C2 would, and the serial collector starts no threads
// of its own; a test's load never needs more.
var jvmFlags = []string{"-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"}

// startTimeout bounds a server's start: a JVM loading DynamoDB Local and
// compiling the launcher takes 3 to 5 s on an idle machine of two cores,
// several times that beside other test binaries.
const startTimeout = 2 * time.Minute

// Server is a running DynamoDB Local bound to the loopback interface.
type Server struct {
	// URL is the endpoint, http://127.0.0.1:<port>.
	URL string
	// Engine is the DynamoDB Local release the server named at start-up.
	Engine string

	proc *proc.Process
	// stdin is the write end of the server's standard input, which nothing
	// writes: the launcher exits when it closes, at Stop or when this
	// program exits.
	stdin *os.File
}

// Start launches a DynamoDB Local of t's own on a free loopback port, and
// stops it when t ends. Most tests share the test binary's server instead
// (Shared): a JVM takes seconds to start. A missing jar or java fails t
// with the install command.
func Start(t testing.TB) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	s, err := launch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// shared is the test binary's one server, started by the first Shared.
var shared struct {
	once sync.Once
	srv  *Server
	err  error
}

// Shared returns the test binary's DynamoDB Local, starting it for the
// first test that asks (the others wait for it). It runs until the test
// binary exits: its standard input closes then, and the launcher exits. The
// tables of one server are everyone's (names from mototest.Name are a
// test's own). A start that failed fails every test that asks, with the
// same error.
func Shared(t testing.TB) *Server {
	t.Helper()
	shared.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		defer cancel()
		shared.srv, shared.err = launch(ctx)
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.srv
}

func launch(ctx context.Context) (*Server, error) {
	dir, err := os.MkdirTemp("", "dynamodblocal-")
	if err != nil {
		return nil, err
	}
	// The server needs nothing of it once it listens: the launcher is
	// compiled in memory, the tables are in memory, and it writes no file
	// (a write into the removed directory would fail, not land elsewhere).
	defer os.RemoveAll(dir)
	return launchIn(ctx, dir)
}

// launchIn starts a server whose working directory is dir, which holds the
// launcher's source.
func launchIn(ctx context.Context, dir string) (*Server, error) {
	jar, err := Jar()
	if err != nil {
		return nil, err
	}
	// The launcher compiled once (compiledLauncher), or else Java's
	// source-file launcher, which compiles the .java file in memory as the
	// JVM starts, every time.
	classPath, main := jar, "Loopback"
	if classes := compiledLauncher(ctx, jar); classes != "" {
		classPath += string(os.PathListSeparator) + classes
	} else {
		main = filepath.Join(dir, "Loopback.java")
		if err := os.WriteFile(main, loopbackSource, 0o644); err != nil {
			return nil, err
		}
	}
	in, stdin, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	args := append(append([]string{}, jvmFlags...),
		// The native SQLite of DynamoDB Local's storage, for this system.
		"-Djava.library.path="+filepath.Join(filepath.Dir(jar), "DynamoDBLocal_lib"),
		// The jar's manifest lists its libraries, relative to it.
		"-cp", classPath,
		main, "0")
	cmd := exec.Command("java", args...)
	cmd.Dir = dir
	// DynamoDB Local sets up its telemetry (a Pinpoint client, and a
	// dynamodb-local-metadata.json in its working directory) whenever it is
	// started as a library, as the launcher starts it, unless this is 0:
	// -disableTelemetry only silences the start-up event of its own main.
	cmd.Env = append(os.Environ(), "DDB_LOCAL_TELEMETRY=0")
	cmd.Stdin = in
	stderr := proc.NewTail(8192)
	cmd.Stderr = stderr
	// Written by proc's reader of the output before it reports the ready
	// line, read only after: Start returns after that report.
	var port, engine string
	pr, err := proc.Start(ctx, cmd, func(line string) bool {
		if v, ok := strings.CutPrefix(line, "Version:"); ok {
			engine = strings.TrimSpace(v)
		}
		p, ok := strings.CutPrefix(line, readyPrefix)
		if ok {
			port = strings.TrimSpace(p)
		}
		return ok
	}, nil)
	// The child has its own copy of the read end.
	_ = in.Close()
	if err != nil {
		_ = stdin.Close()
		return nil, fmt.Errorf("start DynamoDB Local (java %s): %w; stderr: %s", strings.Join(args, " "), err, stderr)
	}
	return &Server{URL: "http://127.0.0.1:" + port, Engine: engine, proc: pr, stdin: stdin}, nil
}

// compiledLauncher returns a directory holding the launcher compiled from
// loopbackSource, or "" when it cannot be compiled. It is compiled once per
// user and source, into the user's cache directory, by the compiler of the
// Java runtime itself (java -m jdk.compiler/..., there in every runtime
// that runs source files, no JDK needed): the source-file launcher would
// compile it at every start, some 2 s of CPU of each server's start. On
// "" the caller runs the source file, as before.
func compiledLauncher(ctx context.Context, jar string) string {
	cache, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(loopbackSource)
	dir := filepath.Join(cache, "sqs-once", "dynamodblocal-launcher-"+hex.EncodeToString(sum[:8]))
	if _, err := os.Stat(filepath.Join(dir, "Loopback.class")); err == nil {
		return dir
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return ""
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "compiling-")
	if err != nil {
		return ""
	}
	defer os.RemoveAll(tmp)
	src, classes := filepath.Join(tmp, "Loopback.java"), filepath.Join(tmp, "classes")
	if err := os.WriteFile(src, loopbackSource, 0o644); err != nil {
		return ""
	}
	args := append(append([]string{}, jvmFlags...), "-m", "jdk.compiler/com.sun.tools.javac.Main",
		"--release", "17", "-cp", jar, "-d", classes, src)
	if err := exec.CommandContext(ctx, "java", args...).Run(); err != nil {
		return ""
	}
	// Renamed whole, so a directory under the final name is complete.
	// Another test binary may have put one there meanwhile: the same
	// source's, as good as this one.
	if err := os.Rename(classes, dir); err != nil {
		if _, err := os.Stat(filepath.Join(dir, "Loopback.class")); err != nil {
			return ""
		}
	}
	return dir
}

// Stop terminates the server this Server started, and only that one, and
// waits until it has exited.
func (s *Server) Stop() {
	// The launcher exits when its input ends; the interrupt and the kill
	// after it are for a server that no longer reads it.
	_ = s.stdin.Close()
	s.proc.Stop(5 * time.Second)
}

// Exited is closed once the server has exited.
func (s *Server) Exited() <-chan struct{} { return s.proc.Exited() }

// Config is an SDK configuration that talks to this server only, with
// dummy credentials. It is built field by field, not loaded, so that
// nothing in the environment (a package's moto_server endpoint, a profile)
// sends it elsewhere, and it never asks the instance metadata service for
// credentials. Build DynamoDB clients from it with NewClient.
func (s *Server) Config() aws.Config {
	return aws.Config{
		Region:       Region,
		Credentials:  credentials.NewStaticCredentialsProvider("dynamodblocal", "dynamodblocal", ""),
		BaseEndpoint: aws.String(s.URL),
	}
}

// Client is a DynamoDB client of this server (NewClient of Config).
func (s *Server) Client() *dynamodb.Client { return NewClient(s.Config()) }

// Config returns the configuration of the test binary's shared server
// (Shared).
func Config(t testing.TB) aws.Config {
	t.Helper()
	return Shared(t).Config()
}

// ClientOptions is what every DynamoDB client of DynamoDB Local needs: no
// check of the CRC32 the answers carry, which is 0 on DynamoDB Local's
// error answers (the SDK would log "response did not match expected
// checksum" through the client's logger, into a test's output, and read
// the answer nonetheless). Only for clients of this server: DynamoDB's own
// answers keep the check.
func ClientOptions(o *dynamodb.Options) { o.DisableValidateResponseChecksum = true }

// NewClient is dynamodb.NewFromConfig with ClientOptions, then optFns: for
// a configuration from Config, or one whose endpoint is a proxy in front of
// the server.
func NewClient(cfg aws.Config, optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	return dynamodb.NewFromConfig(cfg, append([]func(*dynamodb.Options){ClientOptions}, optFns...)...)
}

// NewIdempotencyTable creates a table with the schema the DynamoDB store
// expects (partition key id, string) on cfg's server and returns its name
// once it is ACTIVE (at once: the server is started without
// -delayTransientStatuses). No TTL is set, as on moto_server's tables of
// the tests.
func NewIdempotencyTable(t testing.TB, cfg aws.Config) string {
	t.Helper()
	return NewTable(t, cfg, "idem", "id")
}

// NewTable creates a table named after prefix whose partition key is attr
// (String) on cfg's server, and returns its name once it is ACTIVE.
func NewTable(t testing.TB, cfg aws.Config, prefix, attr string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name := mototest.Name(prefix)
	client := NewClient(cfg)
	out, err := client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		BillingMode:          types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(attr), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(attr), KeyType: types.KeyTypeHash}},
	})
	// The name is this test's alone: a table that exists already is this
	// call's own first attempt, applied and retried by the SDK.
	var inUse *types.ResourceInUseException
	switch {
	case err == nil && out.TableDescription != nil && out.TableDescription.TableStatus == types.TableStatusActive:
		return name
	case err != nil && !errors.As(err, &inUse):
		t.Fatalf("create table %s: %v", name, err)
	}
	// A table still CREATING (a release that delays it) is waited for.
	mototest.WaitTableActive(ctx, t, client, name)
	return name
}
