package demo

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// Entry is one side effect of the demo's business handler: the "charge" a
// customer must see exactly once per order.
type Entry struct {
	Seq          int       `json:"seq"`
	At           time.Time `json:"at"`
	Key          string    `json:"key"`
	Send         string    `json:"send"`
	MessageID    string    `json:"messageId"`
	RequestID    string    `json:"requestId"`
	ReceiveCount string    `json:"receiveCount"`
	ReplayCount  string    `json:"replayCount,omitempty"`
	// Crash: the invocation is made to hang right after this side effect,
	// as a crash or timeout between side effect and completion would.
	Crash bool `json:"crash,omitempty"`
}

// Ledger is an append-only file of side effects, one JSON line each, written
// before the business handler returns. The report is computed from the file,
// not from memory, so what it states is what was durably recorded.
type Ledger struct {
	mu     sync.Mutex
	f      *os.File
	seq    int
	path   string
	closed bool
}

// OpenLedger creates (or truncates) the ledger file at path.
func OpenLedger(path string) (*Ledger, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open ledger: %w", err)
	}
	return &Ledger{f: f, path: path}, nil
}

// Path is the ledger's file.
func (l *Ledger) Path() string { return l.path }

// Append records a side effect, numbered and timed; a write error fails the
// business handler, so an unrecorded side effect is never reported as done.
//
// It refuses once ctx is done: in Lambda nothing of an invocation runs past
// its timeout, but a handler abandoned by localesm is only left running. The
// check and the timestamp are taken under one lock, so no entry is dated
// after the deadline of the invocation that made it.
func (l *Ledger) Append(ctx context.Context, e Entry) error {
	_, err := l.record(ctx, e)
	return err
}

// record is Append, returning the entry as numbered and timed: with -tx the
// business handler writes that entry into the business table too.
func (l *Ledger) record(ctx context.Context, e Entry) (Entry, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return Entry{}, fmt.Errorf("no side effect: %w", err)
	}
	l.seq++
	e.Seq = l.seq
	e.At = time.Now().UTC()
	line, err := json.Marshal(e)
	if err != nil {
		return Entry{}, err
	}
	if _, err := l.f.Write(append(line, '\n')); err != nil {
		return Entry{}, fmt.Errorf("append to ledger: %w", err)
	}
	return e, nil
}

// Count is the number of entries appended so far.
func (l *Ledger) Count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seq
}

// Close closes the file; closing a closed ledger does nothing, so a deferred
// Close can back up the one that reports errors.
func (l *Ledger) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	return l.f.Close()
}

// ReadLedger reads every entry of a ledger file.
func ReadLedger(path string) ([]Entry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read ledger: %w", err)
	}
	defer f.Close()
	return decodeLedger(f)
}

func decodeLedger(r io.Reader) ([]Entry, error) {
	var out []Entry
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for line := 1; sc.Scan(); line++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var e Entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("ledger line %d: %w", line, err)
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read ledger: %w", err)
	}
	return out, nil
}
