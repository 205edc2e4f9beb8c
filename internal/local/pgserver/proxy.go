package pgserver

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/sqs-once/sqs-once/internal/local/sqlproxy"
)

// Fault is what a Proxy does to the next COMMIT a client sends.
type Fault = sqlproxy.Fault

// The faults, as package sqlproxy applies them to PostgreSQL.
const (
	// LoseCommitAnswer: the COMMIT reaches postgres; its answer, up to the
	// ReadyForQuery that ends it, never reaches the client.
	LoseCommitAnswer = sqlproxy.LoseCommitAnswer
	// DropBeforeCommit: the connection ends instead of the COMMIT.
	DropBeforeCommit = sqlproxy.DropBeforeCommit
	// LoseCommitAnswerAndCrash: LoseCommitAnswer, then Crash.
	LoseCommitAnswerAndCrash = sqlproxy.LoseCommitAnswerAndCrash
)

// Proxy forwards PostgreSQL connections to a server, message by message,
// and applies a fault to a COMMIT on request (Arm; a COMMIT sent as a
// simple query, as pgx sends it). Crash drops every connection and
// refuses new ones, as a host that died. DSN is its connection string.
type Proxy = sqlproxy.Proxy

// NewProxy listens on a free loopback port, forwarding to s, until t
// ends.
func NewProxy(t testing.TB, s *Server) *Proxy {
	t.Helper()
	p := sqlproxy.New(t, s.Addr, protocol{})
	p.DSN = "postgres://postgres@" + p.Addr + "/postgres?sslmode=disable"
	return p
}

// protocol is PostgreSQL's wire protocol to the proxy: the client speaks
// first, a startup message (a length, then the rest); every message after
// it, either side's, is a type byte and a length.
type protocol struct{}

func (protocol) FromClient(r io.Reader, first bool) ([]byte, error) { return readMessage(r, !first) }

func (protocol) FromServer(r io.Reader, _ bool) ([]byte, error) { return readMessage(r, true) }

func (protocol) IsCommit(msg []byte) bool { return isCommit(msg) }

// EndsAnswer: ReadyForQuery (Z) ends the answer to every query.
func (protocol) EndsAnswer(msg []byte) bool { return msg[0] == 'Z' }

// readMessage reads one protocol message whole: a type byte (typed) and a
// length that counts itself.
func readMessage(r io.Reader, typed bool) ([]byte, error) {
	head := 4
	if typed {
		head = 5
	}
	buf := make([]byte, head, 64)
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint32(buf[head-4:]))
	if n < 4 || n > 1<<30 {
		return nil, errors.New("pgserver proxy: a message of a length out of bounds")
	}
	buf = append(buf, make([]byte, n-4)...)
	_, err := io.ReadFull(r, buf[head:])
	return buf, err
}

// isCommit reports whether msg is a client's COMMIT: a simple query (Q),
// which is how pgx sends it (pgx.Tx's Commit).
func isCommit(msg []byte) bool {
	return msg[0] == 'Q' && bytes.EqualFold(bytes.TrimRight(bytes.TrimSpace(bytes.TrimRight(msg[5:], "\x00")), ";"), []byte("commit"))
}
