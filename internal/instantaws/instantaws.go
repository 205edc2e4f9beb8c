package instantaws

import (
	"hash/crc32"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Operation names, as the X-Amz-Target header carries them.
const (
	UpdateItem                   = "DynamoDB_20120810.UpdateItem"
	GetItem                      = "DynamoDB_20120810.GetItem"
	DeleteItem                   = "DynamoDB_20120810.DeleteItem"
	DeleteMessageBatch           = "AmazonSQS.DeleteMessageBatch"
	ChangeMessageVisibilityBatch = "AmazonSQS.ChangeMessageVisibilityBatch"
	GetQueueAttributes           = "AmazonSQS.GetQueueAttributes"
	SendMessage                  = "AmazonSQS.SendMessage"
	SendMessageBatch             = "AmazonSQS.SendMessageBatch"
)

// Answer is what an operation answers: an HTTP status and a JSON body.
type Answer struct {
	Status int
	Body   []byte
}

// OK is an empty success, what a write without ReturnValues answers.
var OK = Answer{Status: http.StatusOK, Body: []byte("{}")}

// ConditionalCheckFailed is DynamoDB's refusal of a conditional write,
// carrying item (the JSON of an attribute map, as
// ReturnValuesOnConditionCheckFailure ALL_OLD returns it; "" for none).
func ConditionalCheckFailed(item string) Answer {
	body := `{"__type":"com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException","message":"The conditional request failed"`
	if item != "" {
		body += `,"Item":` + item
	}
	return Answer{Status: http.StatusBadRequest, Body: []byte(body + "}")}
}

// Server is the endpoint. Set answers with Answer before the calls that
// read them; it is safe for concurrent use.
type Server struct {
	srv *httptest.Server

	mu      sync.RWMutex
	answers map[string]canned
	calls   map[string]*atomic.Int64
}

// Start serves on a free port of 127.0.0.1 until Close.
func Start() *Server {
	s := &Server{answers: map[string]canned{}, calls: map[string]*atomic.Int64{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// URL is the endpoint's base URL, for aws.Config.BaseEndpoint or
// AWS_ENDPOINT_URL.
func (s *Server) URL() string { return s.srv.URL }

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// Answer makes every later call of op answer a.
func (s *Server) Answer(op string, a Answer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.answers[op] = newCanned(a)
}

// canned is an Answer with its headers built once.
type canned struct {
	status int
	body   []byte
	crc    []string
}

// newCanned prepares a. DynamoDB sends the CRC32 of every response body in
// X-Amz-Crc32, and its client checks it: a fake without it would measure
// the SDK's complaint, not its work.
func newCanned(a Answer) canned {
	if a.Status == 0 {
		a.Status = http.StatusOK
	}
	return canned{status: a.Status, body: a.Body, crc: []string{strconv.FormatUint(uint64(crc32.ChecksumIEEE(a.Body)), 10)}}
}

var okCanned = newCanned(OK)

// Calls is the number of calls of op so far; "" counts all operations.
func (s *Server) Calls(op string) int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var n int64
	for name, c := range s.calls {
		if op == "" || name == op {
			n += c.Load()
		}
	}
	return n
}

// CallsOf is the number of calls so far of the operations of service
// ("DynamoDB_20120810" or "AmazonSQS").
func (s *Server) CallsOf(service string) int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var n int64
	for name, c := range s.calls {
		if strings.HasPrefix(name, service+".") {
			n += c.Load()
		}
	}
	return n
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	// Read the request whole, as a real endpoint does, so the client's
	// connection is reused for the next call.
	_, _ = io.Copy(io.Discard, r.Body)
	op := r.Header.Get("X-Amz-Target")
	s.mu.RLock()
	a, ok := s.answers[op]
	c := s.calls[op]
	s.mu.RUnlock()
	if c == nil {
		s.mu.Lock()
		if c = s.calls[op]; c == nil {
			c = new(atomic.Int64)
			s.calls[op] = c
		}
		s.mu.Unlock()
	}
	c.Add(1)
	if !ok {
		a = okCanned
	}
	h := w.Header()
	// DynamoDB's content type; the SQS JSON client reads the body alike.
	h["Content-Type"] = contentType
	h["X-Amz-Crc32"] = a.crc
	w.WriteHeader(a.status)
	_, _ = w.Write(a.body)
}

var contentType = []string{"application/x-amz-json-1.0"}
