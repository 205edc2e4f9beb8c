package faultproxy

import (
	"encoding/json"
	"encoding/xml"
	"hash/crc32"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// The X-Amz-Target prefixes of the services whose errors the proxy shapes as
// the service does; any other JSON service gets the common error codes.
const (
	dynamoDBTarget = "DynamoDB_20120810"
	sqsTarget      = "AmazonSQS"
)

// call is what the proxy reads from a request to name it and to answer it in
// the service's own error format.
type call struct {
	op string
	// target is the X-Amz-Target service prefix; empty for the query protocol.
	target      string
	contentType string
	// restJSON: Lambda's REST-JSON protocol, whose errors are named by the
	// X-Amzn-ErrorType header.
	restJSON bool
}

// lambdaInvoke is the path of Lambda's Invoke: /2015-03-31/functions/<name>/invocations.
func lambdaInvoke(path string) bool {
	return strings.HasPrefix(path, "/2015-03-31/functions/") && strings.HasSuffix(path, "/invocations")
}

// identify names the operation: X-Amz-Target is "<service>.<operation>" for
// the JSON protocols (DynamoDB, and SQS since the SDK moved it to JSON), and
// the query protocol (CloudFormation, STS) sends Action as a form parameter.
// An unnamed operation is "", and a request without X-Amz-Target is taken
// for the query protocol.
func identify(r *http.Request, body []byte) call {
	c := call{contentType: r.Header.Get("Content-Type")}
	if t := r.Header.Get("X-Amz-Target"); t != "" {
		c.target = t
		if i := strings.LastIndexByte(t, '.'); i >= 0 {
			c.target, c.op = t[:i], t[i+1:]
		}
		return c
	}
	if lambdaInvoke(r.URL.Path) {
		c.op, c.restJSON = "Invoke", true
		return c
	}
	if a := r.URL.Query().Get("Action"); a != "" {
		c.op = a
		return c
	}
	if strings.HasPrefix(c.contentType, "application/x-www-form-urlencoded") {
		if form, err := url.ParseQuery(string(body)); err == nil {
			c.op = form.Get("Action")
		}
	}
	return c
}

// awsError is an injected error in the terms of one service.
type awsError struct {
	status int
	code   string
	// sender marks a client fault (throttling), as the query protocol's
	// Type and SQS's x-amzn-query-error header say; otherwise the server's.
	sender bool
}

// errorFor is the error a fault answers with. DynamoDB's and SQS's are their
// modelled types, so that errors.As finds them in the SDK's error; the
// throttling codes are all in the SDK's retry.DefaultThrottleErrorCodes.
func errorFor(c call, k Kind) awsError {
	throttle := k == Throttle
	switch {
	case c.restJSON && throttle:
		return awsError{http.StatusTooManyRequests, "TooManyRequestsException", true}
	case c.restJSON:
		return awsError{http.StatusInternalServerError, "ServiceException", false}
	case c.target == dynamoDBTarget && throttle:
		return awsError{http.StatusBadRequest, "ProvisionedThroughputExceededException", true}
	case c.target == dynamoDBTarget:
		return awsError{http.StatusInternalServerError, "InternalServerError", false}
	case c.target == sqsTarget && throttle:
		return awsError{http.StatusBadRequest, "RequestThrottled", true}
	case c.target == "" && throttle:
		return awsError{http.StatusBadRequest, "Throttling", true}
	case throttle:
		return awsError{http.StatusBadRequest, "ThrottlingException", true}
	default:
		return awsError{http.StatusInternalServerError, "InternalFailure", false}
	}
}

// writeError answers the request as the service would fail it.
func writeError(w http.ResponseWriter, c call, k Kind) {
	e := errorFor(c, k)
	msg := "faultproxy injected " + k.String() + " into " + orUnknown(c.op)
	h := w.Header()
	h.Set("X-Amzn-RequestId", "faultproxy-"+strings.ToLower(k.String()))
	if c.restJSON {
		body, _ := json.Marshal(struct {
			Message string `json:"message"`
		}{msg})
		h.Set("X-Amzn-ErrorType", e.code)
		h.Set("Content-Type", "application/json")
		h.Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(e.status)
		_, _ = w.Write(body)
		return
	}
	if c.target == "" {
		writeQueryError(w, e, msg)
		return
	}
	typ := e.code
	switch c.target {
	case dynamoDBTarget:
		typ = "com.amazonaws.dynamodb.v20120810#" + e.code
	case sqsTarget:
		// SQS speaks JSON for an SDK that sends X-Amzn-Query-Mode, and
		// repeats the query protocol's code in this header, which the SDK
		// prefers as the error code.
		typ = "com.amazonaws.sqs#" + e.code
		h.Set("X-Amzn-Query-Error", e.code+";"+faultParty(e))
	}
	body, _ := json.Marshal(struct {
		Type    string `json:"__type"`
		Message string `json:"message"`
	}{typ, msg})
	ct := c.contentType
	if !strings.HasPrefix(ct, "application/x-amz-json") {
		ct = "application/x-amz-json-1.0"
	}
	h.Set("Content-Type", ct)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	if c.target == dynamoDBTarget {
		// DynamoDB checksums every response and the SDK verifies it when
		// present; an injected error carries one like a real one does.
		h.Set("X-Amz-Crc32", strconv.FormatUint(uint64(crc32.ChecksumIEEE(body)), 10))
	}
	w.WriteHeader(e.status)
	_, _ = w.Write(body)
}

// writeQueryError is the query protocol's XML error document.
func writeQueryError(w http.ResponseWriter, e awsError, msg string) {
	type errorElem struct {
		Type    string
		Code    string
		Message string
	}
	doc := struct {
		XMLName   xml.Name `xml:"ErrorResponse"`
		Error     errorElem
		RequestID string `xml:"RequestId"`
	}{Error: errorElem{faultParty(e), e.code, msg}, RequestID: w.Header().Get("X-Amzn-RequestId")}
	body, _ := xml.Marshal(doc)
	w.Header().Set("Content-Type", "text/xml")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(e.status)
	_, _ = w.Write(body)
}

func faultParty(e awsError) string {
	if e.sender {
		return "Sender"
	}
	return "Receiver"
}

func orUnknown(op string) string {
	if op == "" {
		return "an unnamed operation"
	}
	return op
}
