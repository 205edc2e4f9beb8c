package lambdaruntime

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// The Runtime API's names, as aws-lambda-go v1.55 sends and reads them.
const (
	pathPrefix = "/2018-06-01/runtime"

	headerRequestID   = "Lambda-Runtime-Aws-Request-Id"
	headerDeadlineMS  = "Lambda-Runtime-Deadline-Ms"
	headerFunctionARN = "Lambda-Runtime-Invoked-Function-Arn"
	headerTraceID     = "Lambda-Runtime-Trace-Id"
	// The error type of an /error or /init/error post; also the trailer
	// (with headerErrorBody, base64 JSON) of a /response whose body failed
	// while it was streamed.
	headerErrorType = "Lambda-Runtime-Function-Error-Type"
	headerErrorBody = "Lambda-Runtime-Function-Error-Body"
)

// maxResponseBytes is Lambda's limit on a synchronous invocation's response.
const maxResponseBytes = 6 << 20

// DefaultFunctionARN is the ARN a Server started with "" reports as invoked.
const DefaultFunctionARN = "arn:aws:lambda:us-east-1:123456789012:function:test"

var (
	// ErrTimeout: the function did not answer before its deadline.
	ErrTimeout = errors.New("lambdaruntime: function timed out")
	// ErrClosed: the Server was closed before the function answered.
	ErrClosed = errors.New("lambdaruntime: server closed")
)

// Result is one invocation's outcome as Lambda's Invoke reports it.
type Result struct {
	// RequestID is the invocation's id (Lambda-Runtime-Aws-Request-Id).
	RequestID string
	// Deadline is the one sent in Lambda-Runtime-Deadline-Ms; zero when the
	// runtime never took the event.
	Deadline time.Time
	// Payload is the function's response; nil when Error is set.
	Payload []byte
	// Error is the function's error report, nil when it succeeded.
	Error *FunctionError
}

// FunctionError is an error the function (or its runtime) reported.
type FunctionError struct {
	// Type is the errorType: the error's Go type name for aws-lambda-go
	// ("errorString", "runtime.Error" for a panic, ...), or the
	// Lambda-Runtime-Function-Error-Type header when the runtime set it.
	Type string
	// Message is the errorMessage.
	Message string
	// Document is the JSON error document as posted.
	Document []byte
}

func (e *FunctionError) Error() string {
	return fmt.Sprintf("function error %s: %s", e.Type, e.Message)
}

// Server is one emulated Lambda Runtime API. It is safe for concurrent use:
// several Invokes queue, and a runtime with AWS_LAMBDA_MAX_CONCURRENCY > 1
// may poll for several at once.
type Server struct {
	ln          net.Listener
	srv         *http.Server
	functionARN string

	// handoff passes an invocation from Invoke to a waiting poll; unbuffered,
	// so an event is never taken by a runtime that stopped polling.
	handoff   chan *invocation
	closed    chan struct{}
	closeOnce sync.Once

	mu         sync.Mutex
	inflight   map[string]*invocation // taken by the runtime, not answered
	initErr    *FunctionError
	initFailed chan struct{} // closed with initErr set

	// polled is closed when the runtime's first /next arrives, firstPoll
	// set before: the end of the function's init phase.
	polled    chan struct{}
	pollOnce  sync.Once
	firstPoll time.Time
}

type invocation struct {
	id      string
	event   []byte
	timeout time.Duration
	// started receives the deadline when a poll takes the invocation.
	started chan time.Time
	// done receives the answer; buffered, as the Invoke may have gone.
	done     chan answer
	deadline time.Time // set under Server.mu when taken
}

type answer struct {
	res  Result
	late bool // posted after the deadline: a timeout, whatever it says
}

// Start serves the Runtime API on a free port of 127.0.0.1, reporting
// functionARN (DefaultFunctionARN when "") as the invoked function. Close
// stops it.
func Start(functionARN string) (*Server, error) {
	if functionARN == "" {
		functionARN = DefaultFunctionARN
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("lambdaruntime: listen: %w", err)
	}
	s := &Server{
		ln:          ln,
		functionARN: functionARN,
		handoff:     make(chan *invocation),
		closed:      make(chan struct{}),
		inflight:    map[string]*invocation{},
		initFailed:  make(chan struct{}),
		polled:      make(chan struct{}),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+pathPrefix+"/invocation/next", s.next)
	mux.HandleFunc("POST "+pathPrefix+"/invocation/{id}/response", s.response)
	mux.HandleFunc("POST "+pathPrefix+"/invocation/{id}/error", s.invocationError)
	mux.HandleFunc("POST "+pathPrefix+"/init/error", s.initError)
	// No timeouts on reads or writes: /next is a long poll that lasts until
	// the next Invoke, however long the test takes to make it.
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// Addr is the value for the function's AWS_LAMBDA_RUNTIME_API: host:port.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the server. Invokes still waiting return ErrClosed, and a
// runtime's pending poll fails, on which aws-lambda-go exits. It is safe to
// call more than once.
func (s *Server) Close() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.closed)
		err = s.srv.Close()
	})
	return err
}

// Invoke hands event to the runtime's next poll and waits for its answer,
// as a synchronous Lambda Invoke does. The function has timeout from the
// moment it takes the event; ctx bounds the whole call, the wait for a poll
// included. The error is ErrTimeout, ErrClosed or ctx's cause; a function
// that answered, with a result or an error report, is a nil error and the
// Result says which.
func (s *Server) Invoke(ctx context.Context, event []byte, timeout time.Duration) (Result, error) {
	id := newRequestID()
	if timeout <= 0 {
		return Result{RequestID: id}, fmt.Errorf("lambdaruntime: timeout %v: want a positive duration", timeout)
	}
	// A failed init fails every invocation, even when a poll is waiting.
	if fe := s.failedInit(); fe != nil {
		return Result{RequestID: id, Error: fe}, nil
	}
	inv := &invocation{
		id:      id,
		event:   event,
		timeout: timeout,
		started: make(chan time.Time, 1),
		done:    make(chan answer, 1),
	}
	select {
	case s.handoff <- inv:
	case <-ctx.Done():
		return Result{RequestID: id}, context.Cause(ctx)
	case <-s.closed:
		return Result{RequestID: id}, ErrClosed
	case <-s.initFailed:
		return Result{RequestID: id, Error: s.failedInit()}, nil
	}
	deadline := <-inv.started
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	taken := Result{RequestID: id, Deadline: deadline}
	select {
	case a := <-inv.done:
		return s.result(inv, a)
	case <-timer.C:
		if s.abandon(id) {
			return taken, fmt.Errorf("%w: no answer within %v (request %s)", ErrTimeout, timeout, id)
		}
		// An answer was being recorded as the deadline passed: it decides.
		return s.result(inv, <-inv.done)
	case <-ctx.Done():
		s.abandon(id)
		return taken, context.Cause(ctx)
	case <-s.closed:
		s.abandon(id)
		return taken, ErrClosed
	case <-s.initFailed:
		s.abandon(id)
		taken.Error = s.failedInit()
		return taken, nil
	}
}

func (s *Server) result(inv *invocation, a answer) (Result, error) {
	if a.late {
		return a.res, fmt.Errorf("%w: answered after its deadline of %v (request %s)", ErrTimeout, inv.timeout, inv.id)
	}
	return a.res, nil
}

// abandon forgets an invocation the runtime has not answered, so a late
// answer is refused. It reports whether the invocation was still open.
func (s *Server) abandon(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.inflight[id]
	delete(s.inflight, id)
	return ok
}

func (s *Server) failedInit() *FunctionError {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.initErr
}

// FirstPoll waits for the runtime's first request for an event, the end
// of its init phase as Lambda times it, and returns when it arrived; at
// most until ctx ends.
func (s *Server) FirstPoll(ctx context.Context) (time.Time, error) {
	select {
	case <-s.polled:
		return s.firstPoll, nil
	case <-ctx.Done():
		return time.Time{}, context.Cause(ctx)
	}
}

// next answers the runtime's long poll with the next invocation.
func (s *Server) next(w http.ResponseWriter, r *http.Request) {
	s.pollOnce.Do(func() {
		s.firstPoll = time.Now()
		close(s.polled)
	})
	select {
	case inv := <-s.handoff:
		// The header has millisecond precision; the deadline the function
		// sees and the one Invoke enforces are the same instant.
		deadline := time.UnixMilli(time.Now().Add(inv.timeout).UnixMilli())
		s.mu.Lock()
		inv.deadline = deadline
		s.inflight[inv.id] = inv
		s.mu.Unlock()
		inv.started <- deadline

		h := w.Header()
		h.Set(headerRequestID, inv.id)
		h.Set(headerDeadlineMS, strconv.FormatInt(deadline.UnixMilli(), 10))
		h.Set(headerFunctionARN, s.functionARN)
		h.Set(headerTraceID, newTraceID())
		h.Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(inv.event)
	case <-r.Context().Done():
	case <-s.closed:
		apiError(w, http.StatusInternalServerError, "Runtime.ServerClosed", "the runtime API is shutting down")
	case <-s.initFailed:
		// Lambda's answer to a runtime it has given up on.
		apiError(w, http.StatusInternalServerError, "Runtime.InitError", "init failed: the runtime should exit")
	}
}

// response records a function's result.
func (s *Server) response(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxResponseBytes+1))
	if err != nil {
		apiError(w, http.StatusBadRequest, "InvalidRequest", "read the response: "+err.Error())
		return
	}
	var res Result
	status := http.StatusAccepted
	switch {
	case len(body) > maxResponseBytes:
		status = http.StatusRequestEntityTooLarge
		res.Error = &FunctionError{
			Type:    "Function.ResponseSizeTooLarge",
			Message: fmt.Sprintf("response payload size exceeded maximum allowed payload size (%d bytes)", maxResponseBytes),
		}
	case r.Trailer.Get(headerErrorType) != "":
		// aws-lambda-go streamed a response whose reader failed: the body so
		// far is worthless, the trailers carry the error.
		doc, _ := base64.StdEncoding.DecodeString(r.Trailer.Get(headerErrorBody))
		res.Error = parseError(doc, r.Trailer.Get(headerErrorType))
	default:
		res.Payload = body
	}
	s.answer(w, r.PathValue("id"), res, status)
}

// invocationError records a function's error report.
func (s *Server) invocationError(w http.ResponseWriter, r *http.Request) {
	doc, err := io.ReadAll(io.LimitReader(r.Body, maxResponseBytes))
	if err != nil {
		apiError(w, http.StatusBadRequest, "InvalidRequest", "read the error: "+err.Error())
		return
	}
	s.answer(w, r.PathValue("id"), Result{Error: parseError(doc, r.Header.Get(headerErrorType))}, http.StatusAccepted)
}

// initError records a failed init: every invocation fails with it.
func (s *Server) initError(w http.ResponseWriter, r *http.Request) {
	doc, err := io.ReadAll(io.LimitReader(r.Body, maxResponseBytes))
	if err != nil {
		apiError(w, http.StatusBadRequest, "InvalidRequest", "read the error: "+err.Error())
		return
	}
	fe := parseError(doc, r.Header.Get(headerErrorType))
	s.mu.Lock()
	if s.initErr == nil {
		s.initErr = fe
		close(s.initFailed)
	}
	s.mu.Unlock()
	accepted(w)
}

// answer hands res to the Invoke waiting for id. An id that is unknown,
// answered already or abandoned is refused, as is an answer after the
// deadline: aws-lambda-go exits on the refusal, as the sandbox of a timed
// out function is stopped.
func (s *Server) answer(w http.ResponseWriter, id string, res Result, status int) {
	now := time.Now()
	s.mu.Lock()
	inv, ok := s.inflight[id]
	delete(s.inflight, id)
	s.mu.Unlock()
	if !ok {
		apiError(w, http.StatusBadRequest, "InvalidRequestID", "no open invocation "+strconv.Quote(id))
		return
	}
	res.RequestID = id
	res.Deadline = inv.deadline
	if now.After(inv.deadline) {
		inv.done <- answer{res: res, late: true}
		apiError(w, http.StatusBadRequest, "InvalidRequestID", "invocation "+id+" timed out")
		return
	}
	inv.done <- answer{res: res}
	if status != http.StatusAccepted {
		apiError(w, status, res.Error.Type, res.Error.Message)
		return
	}
	accepted(w)
}

// parseError reads an error document ({"errorType", "errorMessage", ...});
// errType, from the header or trailer, wins over the document's.
func parseError(doc []byte, errType string) *FunctionError {
	var d struct {
		Type    string `json:"errorType"`
		Message string `json:"errorMessage"`
	}
	_ = json.Unmarshal(doc, &d) // a document that is not JSON keeps its bytes
	if errType == "" {
		errType = d.Type
	}
	return &FunctionError{Type: errType, Message: d.Message, Document: doc}
}

func accepted(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusAccepted)
	_, _ = io.WriteString(w, `{"status":"OK"}`)
}

// apiError answers as the Runtime API does: an error document.
func apiError(w http.ResponseWriter, status int, errType, msg string) {
	doc, _ := json.Marshal(map[string]string{"errorType": errType, "errorMessage": msg})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(doc)
}

// newRequestID is a random UUID, the form of Lambda's request ids.
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// newTraceID is an X-Ray trace header, not sampled, in Lambda's form.
func newTraceID() string {
	var b [20]byte
	_, _ = rand.Read(b[:])
	h := hex.EncodeToString(b[:])
	return fmt.Sprintf("Root=1-%08x-%s;Parent=%s;Sampled=0", time.Now().Unix(), h[:24], h[24:])
}
