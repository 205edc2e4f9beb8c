package mariaserver

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

// The faults, as package sqlproxy applies them to MariaDB.
const (
	// LoseCommitAnswer: the COMMIT reaches mariadbd; its answer, an OK or
	// ERR packet, never reaches the client.
	LoseCommitAnswer = sqlproxy.LoseCommitAnswer
	// DropBeforeCommit: the connection ends instead of the COMMIT, which
	// the server rolls back.
	DropBeforeCommit = sqlproxy.DropBeforeCommit
	// LoseCommitAnswerAndCrash: LoseCommitAnswer, then Crash; the client
	// cannot settle the commit until Recover.
	LoseCommitAnswerAndCrash = sqlproxy.LoseCommitAnswerAndCrash
)

// MySQL protocol constants the proxy needs.
const (
	// maxPayload is the largest payload of one packet: a longer one is
	// split, and a packet of exactly this length is followed by more.
	maxPayload = 1<<24 - 1
	// comQuery is the command byte of a text query (COM_QUERY).
	comQuery = 0x03
	// handshakeV10 is the first byte of the server's greeting.
	handshakeV10 = 0x0a
	// clientSSL and clientCompress are capability flags: the greeting's
	// lower two bytes and the client's answer carry them.
	clientSSL      = 0x0800
	clientCompress = 0x0020
)

// Proxy forwards MySQL-protocol connections to a server, packet by packet,
// and applies a fault to a COMMIT on request (Arm; a COMMIT sent as a text
// query, COM_QUERY "COMMIT", as go-sql-driver/mysql's Tx.Commit and the
// mariadb client send it). Crash drops every connection and refuses new
// ones, as a host that died. DSN is the data source name of the server's
// database as root through the proxy, as Server.DSN.
//
// The proxy reads plain packets only: it clears TLS from the server's
// capabilities in its greeting, so that a client that would use TLS
// when offered speaks plain, and it drops a client that asks for
// compression (go-sql-driver/mysql's compress=true), whose frames it
// cannot read.
type Proxy = sqlproxy.Proxy

// NewProxy listens on a free loopback port, forwarding to s, until t
// ends.
func NewProxy(t testing.TB, s *Server) *Proxy {
	t.Helper()
	p := sqlproxy.New(t, s.Addr, protocol{})
	p.DSN = "root@tcp(" + p.Addr + ")/" + Database
	return p
}

// protocol is the MySQL protocol to the proxy: the server speaks first,
// its greeting; every message is a packet.
type protocol struct{}

// FromClient refuses compression in the client's first packet, its answer
// to the greeting.
func (protocol) FromClient(r io.Reader, first bool) ([]byte, error) {
	pkt, err := readPacket(r)
	if err == nil && first && asksCompression(pkt) {
		return nil, errors.New("mariaserver proxy: the client asks for compression, whose frames the proxy cannot read")
	}
	return pkt, err
}

// FromServer clears TLS from the server's first packet, its greeting.
func (protocol) FromServer(r io.Reader, first bool) ([]byte, error) {
	pkt, err := readPacket(r)
	if err == nil && first {
		withoutTLS(pkt)
	}
	return pkt, err
}

func (protocol) IsCommit(pkt []byte) bool { return isCommit(pkt) }

// EndsAnswer: a COMMIT's answer is one packet, an OK (0x00) or an ERR
// (0xff).
func (protocol) EndsAnswer(pkt []byte) bool {
	return len(pkt) > 4 && (pkt[4] == 0x00 || pkt[4] == 0xff)
}

// readPacket reads one protocol packet whole: its header (a 3-byte
// little-endian payload length and a sequence id) and its payload. A
// payload of maxPayload bytes continues in the next packet, which the
// caller reads next.
func readPacket(r io.Reader) ([]byte, error) {
	head := make([]byte, 4, 64)
	if _, err := io.ReadFull(r, head); err != nil {
		return nil, err
	}
	n := int(head[0]) | int(head[1])<<8 | int(head[2])<<16
	pkt := append(head, make([]byte, n)...)
	if _, err := io.ReadFull(r, pkt[4:]); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return pkt, nil
}

// isCommit reports whether pkt is a client's COMMIT: the first packet of
// a command (sequence id 0: the rest of a command longer than a packet
// comes in packets numbered from 1, and the protocol caps a command far
// below 256 packets), a text query (COM_QUERY) whose text is COMMIT in any
// case, as go-sql-driver/mysql's Tx.Commit sends it.
func isCommit(pkt []byte) bool {
	if len(pkt) < 5 || pkt[3] != 0 || pkt[4] != comQuery {
		return false
	}
	text := bytes.TrimSpace(bytes.TrimRight(bytes.TrimSpace(pkt[5:]), ";"))
	return bytes.EqualFold(text, []byte("commit"))
}

// withoutTLS clears the TLS capability in pkt when it is the server's
// greeting (protocol 10): after its server version (NUL-terminated), a
// connection id (4 bytes), the first part of the auth data (8) and a
// filler (1) come the capabilities' lower two bytes, little-endian.
func withoutTLS(pkt []byte) {
	if len(pkt) < 5 || pkt[4] != handshakeV10 {
		return
	}
	end := bytes.IndexByte(pkt[5:], 0)
	if end < 0 {
		return
	}
	at := 5 + end + 1 + 4 + 8 + 1
	if len(pkt) < at+2 {
		return
	}
	caps := binary.LittleEndian.Uint16(pkt[at:])
	binary.LittleEndian.PutUint16(pkt[at:], caps&^clientSSL)
}

// asksCompression reports whether pkt, a client's answer to the greeting
// (its capabilities first, 4 bytes little-endian), asks for compression.
func asksCompression(pkt []byte) bool {
	return len(pkt) >= 8 && binary.LittleEndian.Uint32(pkt[4:])&clientCompress != 0
}
