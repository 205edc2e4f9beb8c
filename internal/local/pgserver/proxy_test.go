package pgserver

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// query is a simple-query message (Q) carrying sql.
func query(sql string) []byte {
	body := append([]byte(sql), 0)
	msg := []byte{'Q', 0, 0, 0, 0}
	binary.BigEndian.PutUint32(msg[1:], uint32(4+len(body)))
	return append(msg, body...)
}

// TestIsCommit: the proxy's faults apply to a COMMIT as pgx sends it, in
// any case, and to nothing else.
func TestIsCommit(t *testing.T) {
	for sql, want := range map[string]bool{
		"commit": true, "COMMIT": true, " commit; ": true,
		"commit_stuff": false, "select 'commit'": false, "rollback": false, "": false,
	} {
		if got := isCommit(query(sql)); got != want {
			t.Errorf("isCommit(Q %q) = %v; want %v", sql, got, want)
		}
	}
	parse := []byte{'P', 0, 0, 0, 12, 0, 'c', 'o', 'm', 'm', 'i', 't', 0}
	if isCommit(parse) {
		t.Error("isCommit of a Parse message is true; the proxy matches simple queries only")
	}
	copyData := query("commit")
	copyData[0] = 'd'
	if isCommit(copyData) {
		t.Error("isCommit of a CopyData message carrying commit is true; the proxy matches simple queries only")
	}
}

// TestReadMessage: a message is read whole, with its type and length, and
// a length out of bounds is refused.
func TestReadMessage(t *testing.T) {
	msg := query("select 1")
	got, err := readMessage(bytes.NewReader(append(append([]byte(nil), msg...), 'X')), true)
	if err != nil || !bytes.Equal(got, msg) {
		t.Errorf("readMessage = %q, %v; want %q", got, err, msg)
	}
	if _, err := readMessage(bytes.NewReader([]byte{'Q', 0, 0, 0, 2}), true); err == nil {
		t.Error("readMessage of a length below 4 succeeded")
	}
}

// TestProtocol: the client's first message is the startup message, with
// no type byte, and the rest are typed; the server's ReadyForQuery, and
// nothing before it, ends a COMMIT's answer.
func TestProtocol(t *testing.T) {
	startup := []byte{0, 0, 0, 8, 0, 3, 0, 0}
	q := query("commit")
	r := bytes.NewReader(append(append([]byte(nil), startup...), q...))
	var p protocol
	if got, err := p.FromClient(r, true); err != nil || !bytes.Equal(got, startup) {
		t.Errorf("the first message read %q, %v; want the startup message %q", got, err, startup)
	}
	if got, err := p.FromClient(r, false); err != nil || !p.IsCommit(got) {
		t.Errorf("the next message read %q, %v; want the COMMIT", got, err)
	}
	complete := []byte{'C', 0, 0, 0, 11, 'C', 'O', 'M', 'M', 'I', 'T', 0}
	ready := []byte{'Z', 0, 0, 0, 5, 'I'}
	if p.EndsAnswer(complete) || !p.EndsAnswer(ready) {
		t.Error("EndsAnswer is not true of ReadyForQuery alone")
	}
}
