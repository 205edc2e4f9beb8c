package lambdaruntime_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sqs-once/sqs-once/internal/local/lambdaruntime"
)

// testTimeout bounds every wait of these tests on the emulator or on a
// process: long enough for a loaded CI machine, short enough to fail.
const testTimeout = 30 * time.Second

const functionARN = "arn:aws:lambda:eu-west-1:111122223333:function:echo"

// TestCompiledFunction runs testdata/echo, a real aws-lambda-go function
// built by the test, against the emulator: each case is one way a function
// answers, checked in what Invoke returns and in whether the process
// survives it.
func TestCompiledFunction(t *testing.T) {
	bin := buildEcho(t)
	tests := []struct {
		name    string
		op      string
		data    string
		timeout time.Duration
		check   func(t *testing.T, start time.Time, res lambdaruntime.Result, err error)
		// exits: aws-lambda-go ends the process after this answer, as
		// Lambda would end the sandbox.
		exits bool
	}{
		{
			name: "a result carries the invocation the function saw", op: "echo", data: "hello", timeout: time.Minute,
			check: func(t *testing.T, start time.Time, res lambdaruntime.Result, err error) {
				if err != nil || res.Error != nil {
					t.Fatalf("Invoke = %v, %v; want a result", err, res.Error)
				}
				var got struct {
					RequestID, FunctionARN, TraceID, FunctionName, Data string
					DeadlineMS                                          int64
				}
				if err := json.Unmarshal(res.Payload, &got); err != nil {
					t.Fatalf("payload %q: %v", res.Payload, err)
				}
				if got.RequestID != res.RequestID || got.FunctionARN != functionARN || got.Data != "hello" ||
					got.FunctionName != "echo" || !strings.HasPrefix(got.TraceID, "Root=1-") {
					t.Errorf("function saw %+v; want request %s, ARN %s, data hello, name echo, a trace id", got, res.RequestID, functionARN)
				}
				if got.DeadlineMS != res.Deadline.UnixMilli() {
					t.Errorf("function's deadline %d, emulator's %d", got.DeadlineMS, res.Deadline.UnixMilli())
				}
				// The header has millisecond precision, so the deadline may
				// be up to 1 ms early.
				if lo, hi := start.Add(time.Minute-time.Millisecond), time.Now().Add(time.Minute); res.Deadline.Before(lo) || res.Deadline.After(hi) {
					t.Errorf("deadline %v, want the timeout from the take, in [%v, %v]", res.Deadline, lo, hi)
				}
			},
		},
		{
			name: "a returned error is a function error", op: "fail", data: "card declined", timeout: time.Minute,
			check: wantFunctionError("errorString", "card declined"),
		},
		{
			name: "a streamed response that fails is a function error", op: "stream-error", data: "stream broke", timeout: time.Minute,
			check: wantFunctionError("errorString", "stream broke"),
		},
		{
			name: "a panic is a function error, and the runtime exits", op: "panic", data: "boom", timeout: time.Minute,
			check: wantFunctionError("string", "boom"), exits: true,
		},
		{
			name: "a response over 6 MB is refused", op: "big", timeout: time.Minute,
			check: wantFunctionError("Function.ResponseSizeTooLarge", "response payload size exceeded maximum allowed payload size (6291456 bytes)"),
			exits: true,
		},
		{
			name: "no answer by the deadline is a timeout, and the late answer is refused", op: "late", timeout: 200 * time.Millisecond,
			check: func(t *testing.T, _ time.Time, res lambdaruntime.Result, err error) {
				if !errors.Is(err, lambdaruntime.ErrTimeout) {
					t.Fatalf("Invoke = %+v, %v; want ErrTimeout", res, err)
				}
			},
			exits: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := startServer(t)
			p := startProcess(t, srv, bin)
			ctx := testContext(t)
			event, _ := json.Marshal(map[string]string{"op": tt.op, "data": tt.data})
			start := time.Now()
			res, err := p.Invoke(ctx, event, tt.timeout)
			tt.check(t, start, res, err)
			if tt.exits {
				var exit *exec.ExitError
				if err := p.Wait(ctx); !errors.As(err, &exit) {
					t.Fatalf("process ended with %v; want it to exit with an error status", err)
				}
				return
			}
			// The runtime goes on polling: the next invocation is served.
			res, err = p.Invoke(ctx, []byte(`{"op":"echo","data":"again"}`), time.Minute)
			if err != nil || res.Error != nil || !bytes.Contains(res.Payload, []byte(`"data":"again"`)) {
				t.Fatalf("next Invoke = %s, %v, %v; want the echo", res.Payload, res.Error, err)
			}
		})
	}
}

// exitAtOnce, set in a test binary's environment, makes it exit with status
// 1 before running any test: a process that fails its init.
const exitAtOnce = "LAMBDARUNTIME_TEST_EXIT_AT_ONCE"

func TestMain(m *testing.M) {
	if os.Getenv(exitAtOnce) != "" {
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// TestProcessExitEndsInvoke: a function that exits during init (as one with
// a bad configuration does) ends the Invoke waiting for it, at once.
func TestProcessExitEndsInvoke(t *testing.T) {
	srv := startServer(t)
	// This test binary, told to exit at once (TestMain), stands in for a
	// function whose init fails: it exits without ever polling. It needs
	// nothing but Go, so the test runs in the hermetic tier.
	p, err := srv.StartProcess(os.Args[0], []string{exitAtOnce + "=1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Kill() })
	_, err = p.Invoke(testContext(t), []byte(`{}`), time.Minute)
	if err == nil || !strings.Contains(err.Error(), "exited") {
		t.Fatalf("Invoke = %v; want the process's exit", err)
	}
	if st := p.State(); st == nil || st.ExitCode() != 1 {
		t.Fatalf("State() = %v; want the exit status 1", st)
	}
}

// TestFirstPoll: FirstPoll waits for the runtime's first request for an
// event (the end of its init phase) and says when it came.
func TestFirstPoll(t *testing.T) {
	srv := startServer(t)
	early, cancel := context.WithTimeout(testContext(t), 10*time.Millisecond)
	defer cancel()
	if at, err := srv.FirstPoll(early); err == nil {
		t.Fatalf("FirstPoll before any poll = %v; want ctx's end", at)
	}
	before := time.Now()
	got := invokeAsync(t, srv, `{}`, time.Minute)
	rt := runtimeClient{base: "http://" + srv.Addr() + "/2018-06-01/runtime/"}
	id, _, _ := rt.next(t)
	after := time.Now()
	at, err := srv.FirstPoll(testContext(t))
	if err != nil || at.Before(before) || at.After(after) {
		t.Fatalf("FirstPoll = %v, %v; want a time between %v and %v", at, err, before, after)
	}
	rt.post(t, "invocation/"+id+"/response", `{}`, nil)
	<-got
	// A later poll does not move it.
	later := invokeAsync(t, srv, `{}`, time.Minute)
	id, _, _ = rt.next(t)
	if again, _ := srv.FirstPoll(testContext(t)); !again.Equal(at) {
		t.Fatalf("FirstPoll after a second poll = %v; want the first, %v", again, at)
	}
	rt.post(t, "invocation/"+id+"/response", `{}`, nil)
	<-later
}

// TestProtocol drives the emulator as a runtime would, over raw HTTP, for
// the answers aws-lambda-go never gives.
func TestProtocol(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T, srv *lambdaruntime.Server, rt runtimeClient)
	}{
		{
			name: "an answer for an unknown request id is refused",
			run: func(t *testing.T, _ *lambdaruntime.Server, rt runtimeClient) {
				if status, body := rt.post(t, "invocation/nope/response", "{}", nil); status != http.StatusBadRequest || !strings.Contains(body, "InvalidRequestID") {
					t.Errorf("answer for an unknown id: %d %s; want 400 InvalidRequestID", status, body)
				}
			},
		},
		{
			name: "a second answer is refused, the first stands",
			run: func(t *testing.T, srv *lambdaruntime.Server, rt runtimeClient) {
				got := invokeAsync(t, srv, `{"n":1}`, time.Minute)
				id, _, event := rt.next(t)
				if event != `{"n":1}` {
					t.Errorf("event %s; want {\"n\":1}", event)
				}
				if status, _ := rt.post(t, "invocation/"+id+"/response", `"first"`, nil); status != http.StatusAccepted {
					t.Fatalf("first answer: %d; want 202", status)
				}
				if status, _ := rt.post(t, "invocation/"+id+"/error", `{"errorType":"X","errorMessage":"second"}`, nil); status != http.StatusBadRequest {
					t.Errorf("second answer: %d; want 400", status)
				}
				if r := <-got; r.err != nil || string(r.res.Payload) != `"first"` || r.res.Error != nil {
					t.Errorf("Invoke = %+v; want the first answer", r)
				}
			},
		},
		{
			name: "the error type header wins over the document's",
			run: func(t *testing.T, srv *lambdaruntime.Server, rt runtimeClient) {
				got := invokeAsync(t, srv, `{}`, time.Minute)
				id, _, _ := rt.next(t)
				hdr := http.Header{"Lambda-Runtime-Function-Error-Type": {"Runtime.Custom"}}
				if status, _ := rt.post(t, "invocation/"+id+"/error", `{"errorType":"Doc","errorMessage":"m"}`, hdr); status != http.StatusAccepted {
					t.Fatalf("error answer: %d; want 202", status)
				}
				if r := <-got; r.err != nil || r.res.Error == nil || r.res.Error.Type != "Runtime.Custom" || r.res.Error.Message != "m" {
					t.Errorf("Invoke = %+v, %v; want error Runtime.Custom: m", r.res.Error, r.err)
				}
			},
		},
		{
			name: "the deadline counts from the take, not from Invoke",
			run: func(t *testing.T, srv *lambdaruntime.Server, rt runtimeClient) {
				got := invokeAsync(t, srv, `{}`, time.Hour)
				// However long the runtime took to poll, it gets its hour.
				taken := time.Now()
				id, hdr, _ := rt.next(t)
				deadline, err := strconv.ParseInt(hdr.Get("Lambda-Runtime-Deadline-Ms"), 10, 64)
				if want := taken.Add(time.Hour - time.Millisecond).UnixMilli(); err != nil || deadline < want {
					t.Errorf("deadline %q; want at least %d", hdr.Get("Lambda-Runtime-Deadline-Ms"), want)
				}
				for _, h := range []string{"Lambda-Runtime-Aws-Request-Id", "Lambda-Runtime-Invoked-Function-Arn", "Lambda-Runtime-Trace-Id"} {
					if hdr.Get(h) == "" {
						t.Errorf("no %s header", h)
					}
				}
				rt.post(t, "invocation/"+id+"/response", `{}`, nil)
				<-got
			},
		},
		{
			name: "an Invoke given up before the take is never delivered",
			run: func(t *testing.T, srv *lambdaruntime.Server, rt runtimeClient) {
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				if _, err := srv.Invoke(ctx, []byte(`"abandoned"`), time.Minute); !errors.Is(err, context.Canceled) {
					t.Fatalf("Invoke with a cancelled context = %v", err)
				}
				got := invokeAsync(t, srv, `"wanted"`, time.Minute)
				id, _, event := rt.next(t)
				if event != `"wanted"` {
					t.Errorf("runtime took %s; want the event still wanted", event)
				}
				rt.post(t, "invocation/"+id+"/response", `{}`, nil)
				<-got
			},
		},
		{
			name: "an init error fails the waiting and later invocations, and the next poll",
			run: func(t *testing.T, srv *lambdaruntime.Server, rt runtimeClient) {
				got := invokeAsync(t, srv, `{}`, time.Minute)
				// The invocation is taken, as Lambda hands the first event to
				// a runtime whose init is still running, then init fails.
				rt.next(t)
				if status, _ := rt.post(t, "init/error", `{"errorType":"Runtime.BadConfig","errorMessage":"no table"}`, nil); status != http.StatusAccepted {
					t.Fatalf("init error: %d; want 202", status)
				}
				for _, r := range []invokeResult{<-got, <-invokeAsync(t, srv, `{}`, time.Minute)} {
					if r.err != nil || r.res.Error == nil || r.res.Error.Type != "Runtime.BadConfig" {
						t.Errorf("Invoke = %+v, %v; want the init error", r.res.Error, r.err)
					}
				}
				if status := rt.nextStatus(t); status != http.StatusInternalServerError {
					t.Errorf("poll after the init error: %d; want 500", status)
				}
			},
		},
		{
			name: "Close ends a waiting Invoke",
			run: func(t *testing.T, srv *lambdaruntime.Server, rt runtimeClient) {
				got := invokeAsync(t, srv, `{}`, time.Minute)
				rt.next(t)
				srv.Close()
				if r := <-got; !errors.Is(r.err, lambdaruntime.ErrClosed) {
					t.Errorf("Invoke = %v; want ErrClosed", r.err)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := startServer(t)
			tt.run(t, srv, runtimeClient{base: "http://" + srv.Addr() + "/2018-06-01/runtime/"})
		})
	}
}

func wantFunctionError(errType, msg string) func(*testing.T, time.Time, lambdaruntime.Result, error) {
	return func(t *testing.T, _ time.Time, res lambdaruntime.Result, err error) {
		t.Helper()
		if err != nil || res.Error == nil || res.Error.Type != errType || res.Error.Message != msg {
			t.Fatalf("Invoke = %q, %v, %v; want function error %s: %s", res.Payload, res.Error, err, errType, msg)
		}
		if res.Payload != nil {
			t.Errorf("payload %q with a function error", res.Payload)
		}
	}
}

// buildEcho compiles testdata/echo as a Lambda function is compiled: a
// static binary, the RPC mode compiled in (lambda.Start picks the Runtime
// API from the environment).
func buildEcho(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "bootstrap")
	// Not testTimeout: that bounds waits on the emulator and the process.
	// A compile is bounded by go test's -timeout alone, since on a fresh
	// clone it builds aws-lambda-go from a cold cache, beside every other
	// package's build: a loaded CI machine took more than 30 s.
	cmd := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "./testdata/echo")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./testdata/echo: %v\n%s", err, out)
	}
	return bin
}

func startServer(t *testing.T) *lambdaruntime.Server {
	t.Helper()
	srv, err := lambdaruntime.Start(functionARN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

func startProcess(t *testing.T, srv *lambdaruntime.Server, bin string) *lambdaruntime.Process {
	t.Helper()
	p, err := srv.StartProcess(bin, []string{"AWS_LAMBDA_FUNCTION_NAME=echo"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Kill(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("function output:\n%s", p.Output())
		}
	})
	return p
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

type invokeResult struct {
	res lambdaruntime.Result
	err error
}

// invokeAsync invokes in the background, for a test that plays the runtime.
func invokeAsync(t *testing.T, srv *lambdaruntime.Server, event string, timeout time.Duration) <-chan invokeResult {
	ctx := testContext(t)
	got := make(chan invokeResult, 1)
	go func() {
		res, err := srv.Invoke(ctx, []byte(event), timeout)
		got <- invokeResult{res, err}
	}()
	return got
}

// runtimeClient plays the runtime's side of the API.
type runtimeClient struct{ base string }

func (c runtimeClient) do(t *testing.T, method, path, body string, hdr http.Header) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(testContext(t), method, c.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read: %v", method, path, err)
	}
	return resp, string(b)
}

// next polls for an invocation and returns its id, headers and event.
func (c runtimeClient) next(t *testing.T) (string, http.Header, string) {
	t.Helper()
	resp, body := c.do(t, http.MethodGet, "invocation/next", "", nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("next: %d %s", resp.StatusCode, body)
	}
	return resp.Header.Get("Lambda-Runtime-Aws-Request-Id"), resp.Header, body
}

func (c runtimeClient) nextStatus(t *testing.T) int {
	t.Helper()
	resp, _ := c.do(t, http.MethodGet, "invocation/next", "", nil)
	return resp.StatusCode
}

func (c runtimeClient) post(t *testing.T, path, body string, hdr http.Header) (int, string) {
	t.Helper()
	resp, b := c.do(t, http.MethodPost, path, body, hdr)
	return resp.StatusCode, b
}
