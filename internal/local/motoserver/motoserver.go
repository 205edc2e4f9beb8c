package motoserver

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sqs-once/sqs-once/internal/local/proc"
)

// InstallHint is what a user must do when moto_server is not on PATH: the
// module's setup step installs it, at the version CI runs, where the
// Makefile's recipes find it.
const InstallHint = "moto_server (moto 5) is not on PATH: make setup-demo (for the demo) or make setup (for the tests) " +
	"installs it into .venv from requirements-dev.txt; make demo and make test run that step themselves and put .venv/bin on PATH " +
	"(without make: python3 -m pip install -r requirements-dev.txt)"

// Region is the region every local client uses; moto keeps resources per region.
const Region = "us-east-1"

// ErrNotInstalled is returned by Start when moto_server cannot be found.
var ErrNotInstalled = errors.New(InstallHint)

// Server is a running moto_server bound to the loopback interface.
type Server struct {
	URL string

	proc *proc.Process
}

// Find returns the path of moto_server, or ErrNotInstalled. A caller that
// starts several servers at once asks first, so that a missing moto_server
// is reported once rather than by each Start.
func Find() (string, error) {
	bin, err := exec.LookPath("moto_server")
	if err != nil {
		return "", ErrNotInstalled
	}
	return bin, nil
}

// Start launches moto_server on a free loopback port and waits until it answers.
// The process is stopped by Stop; ctx bounds only the start-up.
func Start(ctx context.Context) (*Server, error) {
	bin, err := Find()
	if err != nil {
		return nil, err
	}
	var lastErr error
	// Another process may take the free port between our probe and moto's bind;
	// a few attempts make that race harmless.
	for range 3 {
		port, err := proc.FreePort()
		if err != nil {
			return nil, err
		}
		s, err := launch(ctx, bin, port)
		if err == nil {
			return s, nil
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	return nil, lastErr
}

// patches is the folder moto_server's Python finds on PYTHONPATH:
// sitecustomize.py, which it loads at start-up, fixes two races of moto's
// SQS that lose messages and removes costs that make it slow under load
// (see the files).
//
//go:embed python/*.py
var patches embed.FS

// ErrNotPatched is returned by Start when moto_server did not load sqs-once's
// fixes, without which a sent message could vanish.
var ErrNotPatched = errors.New("moto_server started without sqs-once's fixes of its SQS races (internal/local/motoserver/python): a sent message could vanish")

// WritePatches writes the Python files that patch moto_server into dir, for
// PYTHONPATH.
func WritePatches(dir string) error {
	files, err := fs.Glob(patches, "python/*.py")
	if err != nil {
		return err
	}
	for _, name := range files {
		b, err := patches.ReadFile(name)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, path.Base(name)), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func launch(ctx context.Context, bin string, port int) (*Server, error) {
	dir, err := os.MkdirTemp("", "sqs-once-moto-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := WritePatches(dir); err != nil {
		return nil, err
	}
	mark := filepath.Join(dir, "patched")
	cmd := exec.Command(bin, "-H", "127.0.0.1", "-p", strconv.Itoa(port))
	pythonPath := dir
	if p := os.Getenv("PYTHONPATH"); p != "" {
		pythonPath += string(os.PathListSeparator) + p
	}
	cmd.Env = append(os.Environ(), "PYTHONPATH="+pythonPath, "SQS_ONCE_MOTO_PATCHED="+mark)
	cmd.Stdout = nil
	if os.Getenv("MOTO_SERVER_LOG") != "" {
		cmd.Stderr = os.Stderr
	}
	// moto_server prints nothing reliable when it listens: waitReady asks
	// its API instead.
	pr, err := proc.Start(ctx, cmd, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("start moto_server: %w", err)
	}
	s := &Server{URL: fmt.Sprintf("http://127.0.0.1:%d", port), proc: pr}

	readyCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := s.waitReady(readyCtx); err != nil {
		s.Stop()
		return nil, err
	}
	// Python runs sitecustomize before moto_server's main, so the mark is
	// there by the time the server answers.
	if _, err := os.Stat(mark); err != nil {
		s.Stop()
		return nil, ErrNotPatched
	}
	return s, nil
}

func (s *Server) waitReady(ctx context.Context) error {
	client := &http.Client{Timeout: time.Second}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/moto-api/", nil)
		if err != nil {
			return err
		}
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode < 500 {
				return nil
			}
		}
		select {
		case <-s.proc.Exited():
			return fmt.Errorf("moto_server on %s exited during start-up (port taken?)", s.URL)
		case <-ctx.Done():
			return fmt.Errorf("moto_server on %s did not answer: %w", s.URL, ctx.Err())
		case <-tick.C:
		}
	}
}

// Stop terminates the process this Server started, and only that one; a
// Server this process did not start (Attach) is left running.
func (s *Server) Stop() {
	if s.proc != nil {
		// Killed at once: moto_server keeps everything in memory and writes
		// nothing on exit, and its interrupt handler only starts Python's
		// shutdown, a second or more of CPU that on a busy machine ran past
		// a grace of 5 s at every stop.
		s.proc.Stop(0)
	}
}

// Env is the environment that points the AWS SDK (and the AWS CLI) at this
// server with dummy credentials, and never at AWS or the instance metadata
// service.
func (s *Server) Env() map[string]string {
	return map[string]string{
		"AWS_ACCESS_KEY_ID":           "testing",
		"AWS_SECRET_ACCESS_KEY":       "testing",
		"AWS_SESSION_TOKEN":           "testing",
		"AWS_REGION":                  Region,
		"AWS_DEFAULT_REGION":          Region,
		"AWS_EC2_METADATA_DISABLED":   "true",
		"AWS_ENDPOINT_URL":            s.URL,
		"AWS_PROFILE":                 "",
		"AWS_CONFIG_FILE":             os.DevNull,
		"AWS_SHARED_CREDENTIALS_FILE": os.DevNull,
	}
}

// SetProcessEnv applies Env to this process, so that every SDK client built
// afterwards with config.LoadDefaultConfig talks to the server.
func (s *Server) SetProcessEnv() error {
	if err := ScrubEndpointOverrides(); err != nil {
		return err
	}
	for k, v := range s.Env() {
		var err error
		if v == "" {
			err = os.Unsetenv(k)
		} else {
			err = os.Setenv(k, v)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// ScrubEndpointOverrides removes from this process's environment what would
// send a client somewhere other than AWS_ENDPOINT_URL or an explicit base
// endpoint: a service's own AWS_ENDPOINT_URL_<SERVICE> takes precedence over
// both, and AWS_IGNORE_CONFIGURED_ENDPOINT_URLS would make the SDK ignore the
// local endpoint and call AWS itself.
func ScrubEndpointOverrides() error {
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "AWS_ENDPOINT_URL_") || name == "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS" {
			if err := os.Unsetenv(name); err != nil {
				return err
			}
		}
	}
	return nil
}

// SharedEnv is the environment variable that gives test binaries one
// moto_server started for all of them (by withmoto, for a whole `make
// test`) instead of one each: its value is the server's URL,
// http://127.0.0.1:<port>.
//
// It is read from os.Environ (Shared), never with os.Getenv: go test keys
// its cache on the variables a test reads with os.Getenv, and a free port
// changes with every server, so every package that talks to moto would be
// run again on every `make test` for nothing but a new port. Which server
// answers is not an input of a test's result: a shared one and a private
// one are the same moto_server with the same patches, and every test names
// its own queues and tables.
const SharedEnv = "SQS_ONCE_TEST_MOTO_ENDPOINT"

// Shared returns the URL that SharedEnv gives, and whether it is set. A
// value that is not http://127.0.0.1:<port> is an error: the tests run
// against the loopback interface only.
func Shared() (string, bool, error) {
	var raw string
	var set bool
	// Not os.Getenv: see SharedEnv.
	for _, kv := range os.Environ() {
		if name, value, _ := strings.Cut(kv, "="); name == SharedEnv {
			raw, set = value, true
		}
	}
	if !set || raw == "" {
		return "", false, nil
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "http" || u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.User != nil {
		return "", false, fmt.Errorf("%s=%q: want http://127.0.0.1:<port>", SharedEnv, raw)
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil || host != "127.0.0.1" {
		return "", false, fmt.Errorf("%s=%q: want http://127.0.0.1:<port> (the loopback interface only)", SharedEnv, raw)
	}
	if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
		return "", false, fmt.Errorf("%s=%q: bad port", SharedEnv, raw)
	}
	return "http://" + u.Host, true, nil
}

// Attach returns a Server for the moto_server at url, started by another
// process, once it answers; ctx bounds the wait. Its Stop leaves the server
// running.
func Attach(ctx context.Context, url string) (*Server, error) {
	s := &Server{URL: url}
	client := &http.Client{Timeout: time.Second}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/moto-api/", nil)
		if err != nil {
			return nil, err
		}
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode < 500 {
				return s, nil
			}
			err = fmt.Errorf("GET /moto-api/: %s", resp.Status)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("moto_server on %s (%s) does not answer: %v", s.URL, SharedEnv, err)
		case <-tick.C:
		}
	}
}

// LambdaWithoutDocker switches the server's Lambda to moto's Docker-free
// backend: an Invoke answers the next result queued for its region (moto's
// /moto-api/static/lambda-simple/response), or echoes its payload when none
// is queued. The setting is the whole server's.
func (s *Server) LambdaWithoutDocker(ctx context.Context) error {
	body := []byte(`{"lambda":{"use_docker":false}}`)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/moto-api/config", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST /moto-api/config: %s", resp.Status)
	}
	return nil
}
