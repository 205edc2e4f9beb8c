package faultproxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// AnyOperation in Script or ScriptWhen matches every operation.
const AnyOperation = "*"

// maxBody bounds what the proxy buffers of one request or drains of one
// response. The largest AWS payloads the project sends (an SQS batch of
// 1 MiB messages, a DynamoDB batch) fit with room to spare.
const maxBody = 32 << 20

// closeTimeout bounds how long Close waits for requests in flight to end.
const closeTimeout = 5 * time.Second

// Proxy forwards HTTP requests to one target, applying a Fault to each.
// It is safe for concurrent use.
type Proxy struct {
	// URL is the proxy's base URL (http://127.0.0.1:port), to be a client's
	// BaseEndpoint.
	URL string

	target    *url.URL
	transport *http.Transport
	server    *http.Server
	served    chan struct{}
	stop      context.CancelFunc
	closeOnce sync.Once
	// handlers are the requests being handled: Close waits for them, so
	// that what they forwarded is final when it returns.
	handlers inflight
	observe  func(op string, body []byte, header http.Header, f Fault)

	mu      sync.Mutex
	scripts []*script
	rates   Rates
	rng     *rand.Rand // nil when there are no random faults
	stats   Stats
}

// script is one Script or ScriptWhen call: faults still to hand out, in order.
type script struct {
	op     string
	match  func(body []byte) bool
	faults []Fault
}

// Stats counts what the proxy has seen and done, by operation name ("" for a
// request whose operation it could not name).
type Stats struct {
	// Requests is every request received.
	Requests map[string]int
	// Forwarded is the requests passed on to the target: the ones the target
	// may have applied.
	Forwarded map[string]int
	// Faults is the faults injected, by kind; Pass is not counted.
	Faults map[Kind]int
}

// Option configures a Proxy at Start.
type Option func(*options)

type options struct {
	rates   Rates
	rng     *rand.Rand
	observe func(op string, body []byte, header http.Header, f Fault)
}

// WithRandom injects faults at random, at the given rates, into requests that
// no script claims. rng is the only source of randomness, so a run is
// reproduced by its seed (rand.New(rand.NewPCG(seed, 0))) as long as its
// requests arrive in the same order; the proxy serialises its draws.
func WithRandom(r Rates, rng *rand.Rand) Option {
	return func(o *options) { o.rates, o.rng = r, rng }
}

// WithObserver calls fn with every request's operation, body, header and
// fault, as they are decided and before they are applied, so that a caller
// can tell which item or message a fault hit, and (by a header its client
// set) which of its callers made the call. fn may be called concurrently and
// must not keep body or header.
func WithObserver(fn func(op string, body []byte, header http.Header, f Fault)) Option {
	return func(o *options) { o.observe = fn }
}

// Start listens on a free port of 127.0.0.1 and forwards to target, the base
// URL of a server such as moto_server (scheme and host, no path). Close stops
// it.
func Start(target string, opts ...Option) (*Proxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: target %q: %w", target, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return nil, fmt.Errorf("faultproxy: target %q is not a base URL such as http://127.0.0.1:5000", target)
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if err := o.rates.validate(); err != nil {
		return nil, err
	}
	if o.rng == nil && o.rates.total() > 0 {
		return nil, errors.New("faultproxy: random rates need a random source")
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	// The base context ends with Close, which ends delays and forwards in
	// flight, so that Close never waits out a long delay or a long poll.
	ctx, stop := context.WithCancel(context.Background())
	p := &Proxy{
		URL:    "http://" + ln.Addr().String(),
		target: u,
		transport: &http.Transport{
			Proxy:       nil, // the target is local; never go through HTTP_PROXY
			DialContext: (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
			// The client's Accept-Encoding passes through as sent, and the
			// response body comes back byte for byte.
			DisableCompression:  true,
			MaxIdleConnsPerHost: 64,
			IdleConnTimeout:     30 * time.Second,
		},
		served:  make(chan struct{}),
		stop:    stop,
		observe: o.observe,
		rates:   o.rates,
		rng:     o.rng,
		stats:   Stats{Requests: map[string]int{}, Forwarded: map[string]int{}, Faults: map[Kind]int{}},
	}
	p.server = &http.Server{
		Handler:           p,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() {
		defer close(p.served)
		_ = p.server.Serve(ln)
	}()
	return p, nil
}

// Close stops the proxy: requests in flight end (a delayed one is not
// forwarded) and the listener closes. It is safe to call more than once.
func (p *Proxy) Close() error {
	var err error
	p.closeOnce.Do(func() {
		p.stop()
		// Close, not Shutdown: Shutdown waits up to five seconds for a
		// connection a client opened but sent nothing on yet (a retry's,
		// dialled as its context ended), which a busy machine makes
		// common. The handlers' context has ended (stop), so none waits
		// out a delay or a forward; they are waited for below.
		err = p.server.Close()
		<-p.served
		select {
		case <-p.handlers.close():
		case <-time.After(closeTimeout):
			err = errors.Join(err, fmt.Errorf("faultproxy: requests still being handled %s after Close", closeTimeout))
		}
		p.transport.CloseIdleConnections()
	})
	return err
}

// Script queues faults for the next requests of operation op (AnyOperation
// for all), one fault per request, in order; once they are used up those
// requests pass again (or get random faults). Scripts are consulted in the
// order they were added.
func (p *Proxy) Script(op string, faults ...Fault) { p.ScriptWhen(op, nil, faults...) }

// ScriptWhen is Script for only the requests of op whose body satisfies
// match, such as BodyContains("COMPLETED") for the UpdateItem that completes
// a record. match runs under the proxy's lock: it must be quick and must not
// call the proxy.
func (p *Proxy) ScriptWhen(op string, match func(body []byte) bool, faults ...Fault) {
	if len(faults) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.scripts = append(p.scripts, &script{op: op, match: match, faults: append([]Fault(nil), faults...)})
}

// BodyContains matches a request whose body contains s.
func BodyContains(s string) func(body []byte) bool {
	return func(body []byte) bool { return bytes.Contains(body, []byte(s)) }
}

// Pending is the number of scripted faults not yet applied, so that a test
// can tell that the requests it aimed at arrived.
func (p *Proxy) Pending() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, s := range p.scripts {
		n += len(s.faults)
	}
	return n
}

// Stats is a copy of the counts so far.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return Stats{Requests: maps.Clone(p.stats.Requests), Forwarded: maps.Clone(p.stats.Forwarded), Faults: maps.Clone(p.stats.Faults)}
}

// decide takes the request's fault: the first script that claims it, else a
// random draw, else Pass.
func (p *Proxy) decide(op string, body []byte) Fault {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stats.Requests[op]++
	f := p.scripted(op, body)
	if f == nil && p.rng != nil && p.rates.applies(op) {
		f = p.rates.pick(p.rng)
	}
	if f == nil {
		f = Pass
	}
	if k := KindOf(f); k != Pass {
		p.stats.Faults[k]++
	}
	return f
}

// scripted pops the next fault of the first script that claims the request,
// or returns nil. Callers hold p.mu.
func (p *Proxy) scripted(op string, body []byte) Fault {
	for i, s := range p.scripts {
		if (s.op != AnyOperation && s.op != op) || (s.match != nil && !s.match(body)) {
			continue
		}
		f := s.faults[0]
		s.faults = s.faults[1:]
		if len(s.faults) == 0 {
			p.scripts = append(p.scripts[:i], p.scripts[i+1:]...)
		}
		return f
	}
	return nil
}

// ServeHTTP applies the request's fault, forwarding it to the target unless
// the fault answers in the target's place.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !p.handlers.enter() {
		panic(http.ErrAbortHandler) // closing: nothing is forwarded any more
	}
	defer p.handlers.leave()
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		http.Error(w, "faultproxy: read request: "+err.Error(), http.StatusBadRequest)
		return
	}
	if len(body) > maxBody {
		http.Error(w, "faultproxy: request body over the proxy's limit", http.StatusRequestEntityTooLarge)
		return
	}
	c := identify(r, body)
	f := p.decide(c.op, body)
	if p.observe != nil {
		p.observe(c.op, body, r.Header, f)
	}
	kind, d := f.parts()
	a, _ := f.(answer)
	if f == Answered {
		a = answer{status: http.StatusOK, forward: true}
	}
	switch kind {
	case Answered:
		if !a.forward {
			a.write(w)
			return
		}
	case FailBefore, Throttle:
		writeError(w, c, kind)
		return
	case Delayed:
		if !wait(r.Context(), d) {
			// The client gave up or the proxy is closing: the request is
			// lost, never forwarded, and the connection closes without an
			// answer (returning would send an empty 200).
			panic(http.ErrAbortHandler)
		}
	}

	resp, err := p.forward(r, c.op, body)
	if err != nil {
		if r.Context().Err() != nil {
			panic(http.ErrAbortHandler)
		}
		http.Error(w, "faultproxy: forward: "+err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	switch kind {
	case FailAfter, ResetAfter, Answered:
		// Reading the whole answer means the target has finished applying
		// the request before the client learns of the failure.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxBody))
		switch kind {
		case FailAfter:
			writeError(w, c, FailAfter)
		case ResetAfter:
			reset(w)
		default:
			a.write(w)
		}
	default:
		copyHeader(w.Header(), resp.Header)
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	}
}

func (a answer) write(w http.ResponseWriter) {
	copyHeader(w.Header(), a.header)
	w.Header().Set("Content-Length", strconv.Itoa(len(a.body)))
	w.WriteHeader(a.status)
	_, _ = w.Write(a.body)
}

// forward sends the request to the target with its method, path, query,
// headers (the SigV4 signature among them) and Host unchanged.
func (p *Proxy) forward(r *http.Request, op string, body []byte) (*http.Response, error) {
	u := *p.target
	u.Path, u.RawPath, u.RawQuery = r.URL.Path, r.URL.RawPath, r.URL.RawQuery
	out, err := http.NewRequestWithContext(r.Context(), r.Method, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	copyHeader(out.Header, r.Header)
	out.Host = r.Host
	p.mu.Lock()
	p.stats.Forwarded[op]++
	p.mu.Unlock()
	return p.transport.RoundTrip(out)
}

// reset ends the client's connection with a TCP RST, as a dropped connection
// looks to the SDK: a linger of 0 makes Close send RST instead of FIN.
func reset(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler) // closes the connection without an answer
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tcp, ok := conn.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0)
	}
	_ = conn.Close()
}

// wait holds for d, and reports false if ctx ended first.
func wait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// copyHeader copies end-to-end headers; the hop-by-hop ones describe one
// connection and are the proxy's own business on each side.
func copyHeader(dst, src http.Header) {
	hop := map[string]bool{
		"Connection": true, "Proxy-Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true,
		"Proxy-Authorization": true, "Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
	}
	for _, f := range src.Values("Connection") {
		for name := range strings.SplitSeq(f, ",") {
			hop[http.CanonicalHeaderKey(strings.TrimSpace(name))] = true
		}
	}
	for k, vv := range src {
		if !hop[k] {
			dst[k] = append([]string(nil), vv...)
		}
	}
}

// inflight counts the requests being handled, and refuses new ones once
// closing.
type inflight struct {
	mu      sync.Mutex
	n       int
	closing bool
	done    chan struct{}
}

func (f *inflight) enter() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closing {
		return false
	}
	f.n++
	return true
}

func (f *inflight) leave() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n--
	if f.closing && f.n == 0 {
		close(f.done)
	}
}

// close refuses new requests and returns a channel closed once none is
// being handled.
func (f *inflight) close() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.closing {
		f.closing, f.done = true, make(chan struct{})
		if f.n == 0 {
			close(f.done)
		}
	}
	return f.done
}
