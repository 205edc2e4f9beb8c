// Package durablestub is a local stand-in of the three Lambda calls a
// durable target makes (Invoke with a DurableExecutionName,
// ListDurableExecutionsByFunction, GetDurableExecution), for tests through
// the real AWS SDK client: moto_server has no durable functions.
//
// It applies what AWS's documentation states, and nothing it does not:
//   - a DurableExecutionName is 1 to 64 of [A-Za-z0-9_-]; another is
//     refused (400 InvalidParameterValueException);
//   - a durable function is invoked by a qualified ARN: an Invoke without a
//     version or alias is refused (400);
//   - a name not yet taken starts an execution; a name taken with the same
//     payload returns that execution, starting nothing; a name taken with
//     another payload is refused with 409
//     DurableExecutionAlreadyStartedException;
//   - the name filter of the listing matches names that contain it.
//
// Executions never end: each stays RUNNING, its name taken for the test's
// life. Nothing runs: the stub only records.
package durablestub

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"
)

// Account and Region of the ARNs the stub makes.
const (
	Account = "123456789012"
	Region  = "us-east-1"
)

var nameRule = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Execution is one durable execution the stub started.
type Execution struct {
	Name     string
	ARN      string
	Function string
	Payload  []byte
	// Invokes counts the Invokes of its name with its payload, the first
	// included.
	Invokes int
	// Status is RUNNING until SetStatus changes it.
	Status string
}

// Invoke is one Invoke request as the stub received it.
type Invoke struct {
	Function       string
	Qualifier      string
	InvocationType string
	// Name is the X-Amz-Durable-Execution-Name header, "" when absent.
	Name    string
	Payload []byte
}

// Stub is a running stand-in.
type Stub struct {
	// URL is the BaseEndpoint to give the client.
	URL string

	srv *http.Server
	ln  net.Listener

	mu         sync.Mutex
	executions map[string]*Execution // by name
	byARN      map[string]*Execution
	invokes    []Invoke
	refusals   int
	next       int
	// functionError, when set, is the X-Amz-Function-Error of every
	// synchronous Invoke: the execution failed.
	functionError string
}

// Start serves a stub on a free loopback port until Close.
func Start() (*Stub, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Stub{URL: "http://" + ln.Addr().String(), ln: ln, executions: map[string]*Execution{}, byARN: map[string]*Execution{}}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go s.srv.Serve(ln) //nolint:errcheck // ends with Close
	return s, nil
}

// Close stops the stub.
func (s *Stub) Close() error { return s.srv.Close() }

// Executions is every execution started, by name.
func (s *Stub) Executions() map[string]Execution {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]Execution, len(s.executions))
	for n, e := range s.executions {
		out[n] = *e
	}
	return out
}

// Invokes is every Invoke received, in order.
func (s *Stub) Invokes() []Invoke {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Invoke(nil), s.invokes...)
}

// Refusals counts the Invokes refused with
// DurableExecutionAlreadyStartedException.
func (s *Stub) Refusals() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refusals
}

// FailSynchronous makes every synchronous Invoke answer as an execution
// that failed: X-Amz-Function-Error set to kind ("Unhandled"), an error
// object as the payload. "" turns it off.
func (s *Stub) FailSynchronous(kind string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.functionError = kind
}

// SetStatus sets the status the stub reports of the execution named name:
// RUNNING, SUCCEEDED, FAILED, TIMED_OUT or STOPPED.
func (s *Stub) SetStatus(name, status string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.executions[name]; ok {
		e.Status = status
	}
}

// Put records an execution as if started with payload, as another starter
// would have: a test's name taken beforehand.
func (s *Stub) Put(function, qualifier, name string, payload []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.start(function, qualifier, name, payload)
}

func (s *Stub) start(function, qualifier, name string, payload []byte) *Execution {
	s.next++
	e := &Execution{
		Name:     name,
		Function: functionARN(function),
		ARN:      fmt.Sprintf("%s:%s/durable-execution/%s/%08d-stub", functionARN(function), versionOf(qualifier), name, s.next),
		Payload:  bytes.Clone(payload),
		Status:   "RUNNING",
	}
	s.executions[name] = e
	s.byARN[e.ARN] = e
	return e
}

// splitQualifier cuts a qualified function name, partial or full ARN
// (<name>:<q>, <account>:function:<name>:<q>, arn:...:function:<name>:<q>)
// into the function and its qualifier.
func splitQualifier(function string) (string, string) {
	parts := strings.Split(function, ":")
	nameAt := 0
	for i, p := range parts {
		if p == "function" {
			nameAt = i + 1
		}
	}
	if len(parts) == nameAt+2 {
		return strings.Join(parts[:nameAt+1], ":"), parts[nameAt+1]
	}
	return function, ""
}

// functionARN is the unqualified ARN of function (a name or an ARN).
func functionARN(function string) string {
	if strings.HasPrefix(function, "arn:") {
		return function
	}
	return fmt.Sprintf("arn:aws:lambda:%s:%s:function:%s", Region, Account, function)
}

// versionOf is the version an execution's ARN names: an alias resolves to
// one; the stub's aliases all point at version 1.
func versionOf(qualifier string) string {
	if qualifier != "" && strings.Trim(qualifier, "0123456789") == "" {
		return qualifier
	}
	return "1"
}

func (s *Stub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.EscapedPath()
	switch {
	case r.Method == http.MethodPost && strings.HasPrefix(path, "/2015-03-31/functions/") && strings.HasSuffix(path, "/invocations"):
		s.invoke(w, r, unescape(strings.TrimSuffix(strings.TrimPrefix(path, "/2015-03-31/functions/"), "/invocations")))
	case r.Method == http.MethodGet && strings.HasPrefix(path, "/2025-12-01/functions/") && strings.HasSuffix(path, "/durable-executions"):
		s.list(w, r)
	case r.Method == http.MethodGet && strings.HasPrefix(path, "/2025-12-01/durable-executions/"):
		s.get(w, unescape(strings.TrimPrefix(path, "/2025-12-01/durable-executions/")))
	default:
		fail(w, http.StatusNotFound, "UnknownOperationException", r.Method+" "+path)
	}
}

func unescape(s string) string {
	u, err := url.PathUnescape(s)
	if err != nil {
		return s
	}
	return u
}

func (s *Stub) invoke(w http.ResponseWriter, r *http.Request, function string) {
	payload, err := io.ReadAll(r.Body)
	if err != nil {
		fail(w, http.StatusBadRequest, "InvalidRequestContentException", err.Error())
		return
	}
	function, qualifier := splitQualifier(function)
	if q := r.URL.Query().Get("Qualifier"); q != "" {
		qualifier = q
	}
	in := Invoke{
		Function:       function,
		Qualifier:      qualifier,
		InvocationType: r.Header.Get("X-Amz-Invocation-Type"),
		Name:           r.Header.Get("X-Amz-Durable-Execution-Name"),
		Payload:        payload,
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.invokes = append(s.invokes, in)
	switch {
	case in.Qualifier == "":
		fail(w, http.StatusBadRequest, "InvalidParameterValueException", "durable functions are invoked by a qualified ARN (a version or alias)")
		return
	case in.Name == "":
		fail(w, http.StatusBadRequest, "InvalidParameterValueException", "the stub starts named executions only")
		return
	case !nameRule.MatchString(in.Name):
		fail(w, http.StatusBadRequest, "InvalidParameterValueException", fmt.Sprintf("DurableExecutionName %q: want 1 to 64 of [A-Za-z0-9_-]", in.Name))
		return
	case !json.Valid(payload):
		fail(w, http.StatusBadRequest, "InvalidRequestContentException", "the payload is not JSON")
		return
	}
	e, taken := s.executions[in.Name]
	switch {
	case !taken:
		e = s.start(function, qualifier, in.Name, payload)
	case !bytes.Equal(e.Payload, payload):
		s.refusals++
		fail(w, http.StatusConflict, "DurableExecutionAlreadyStartedException", "The durable execution with the specified name has already been started.")
		return
	}
	e.Invokes++
	w.Header().Set("X-Amz-Durable-Execution-Arn", e.ARN)
	w.Header().Set("X-Amz-Executed-Version", versionOf(qualifier))
	if in.InvocationType == "Event" {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if s.functionError != "" {
		w.Header().Set("X-Amz-Function-Error", s.functionError)
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, `{"errorType":"Error","errorMessage":"the execution failed"}`) //nolint:errcheck // the client reads what arrives
		return
	}
	w.WriteHeader(http.StatusOK)
	io.WriteString(w, "null") //nolint:errcheck // the client reads what arrives
}

type summary struct {
	DurableExecutionArn  string  `json:"DurableExecutionArn"`
	DurableExecutionName string  `json:"DurableExecutionName"`
	FunctionArn          string  `json:"FunctionArn"`
	Status               string  `json:"Status"`
	StartTimestamp       float64 `json:"StartTimestamp"`
}

func (s *Stub) list(w http.ResponseWriter, r *http.Request) {
	filter := r.URL.Query().Get("DurableExecutionName")
	s.mu.Lock()
	var out struct {
		DurableExecutions []summary `json:"DurableExecutions"`
	}
	out.DurableExecutions = []summary{}
	for _, e := range s.executions {
		if strings.Contains(e.Name, filter) {
			out.DurableExecutions = append(out.DurableExecutions, summary{
				DurableExecutionArn: e.ARN, DurableExecutionName: e.Name, FunctionArn: e.Function, Status: e.Status, StartTimestamp: 1.7e9,
			})
		}
	}
	s.mu.Unlock()
	writeJSON(w, out)
}

func (s *Stub) get(w http.ResponseWriter, arn string) {
	s.mu.Lock()
	e, ok := s.byARN[arn]
	var out map[string]any
	if ok {
		out = map[string]any{
			"DurableExecutionArn": e.ARN, "DurableExecutionName": e.Name, "FunctionArn": e.Function,
			"Status": e.Status, "StartTimestamp": 1.7e9, "InputPayload": string(e.Payload), "ExecutionDataIncluded": true,
		}
	}
	s.mu.Unlock()
	if !ok {
		fail(w, http.StatusNotFound, "ResourceNotFoundException", "no durable execution "+arn)
		return
	}
	writeJSON(w, out)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v) //nolint:errcheck // the client reads what arrives
}

// fail answers as Lambda's REST-JSON protocol does: the error's name in
// X-Amzn-ErrorType, a JSON body with Type and Message.
func fail(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("X-Amzn-ErrorType", code)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"Type": "User", "Message": msg}) //nolint:errcheck // the client reads what arrives
}
