package sqsmsg

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// fakeSender records every call and answers with respond, or accepts every
// entry when respond is nil.
type fakeSender struct {
	mu      sync.Mutex
	calls   []*sqs.SendMessageBatchInput
	respond func(call int, in *sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error)
}

func (f *fakeSender) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	f.mu.Lock()
	f.calls = append(f.calls, in)
	call := len(f.calls)
	f.mu.Unlock()
	if f.respond != nil {
		return f.respond(call, in)
	}
	return acceptAll(in), nil
}

func acceptAll(in *sqs.SendMessageBatchInput) *sqs.SendMessageBatchOutput {
	out := &sqs.SendMessageBatchOutput{}
	for _, e := range in.Entries {
		out.Successful = append(out.Successful, sqstypes.SendMessageBatchResultEntry{Id: e.Id, MessageId: aws.String("m-" + *e.Id)})
	}
	return out
}

var validBatchID = regexp.MustCompile(`^[A-Za-z0-9_-]{1,80}$`)

// bodies returns the bodies of each call, checking the invariants every call
// must satisfy: valid unique Ids, at most 10 entries, within the byte limit.
func (f *fakeSender) bodies(t *testing.T) [][]string {
	t.Helper()
	var out [][]string
	for _, in := range f.calls {
		var bs []string
		ids := map[string]bool{}
		total := 0
		for _, e := range in.Entries {
			id := aws.ToString(e.Id)
			if !validBatchID.MatchString(id) || ids[id] {
				t.Errorf("entry id %q is invalid or repeated in its batch", id)
			}
			ids[id] = true
			total += Entry{Body: *e.MessageBody, Attributes: e.MessageAttributes}.Size()
			bs = append(bs, *e.MessageBody)
		}
		if len(in.Entries) == 0 || len(in.Entries) > MaxBatchEntries || total > MaxBatchBytes {
			t.Errorf("call with %d entries and %d bytes breaks SQS's batch limits", len(in.Entries), total)
		}
		out = append(out, bs)
	}
	return out
}

func entries(n, size int) []Entry {
	es := make([]Entry, n)
	for i := range es {
		body := fmt.Sprintf("b%d", i)
		es[i] = Entry{RecordID: fmt.Sprintf("record %d / ünïcode, not a valid batch id %s", i, strings.Repeat("x", 100)), Body: body + strings.Repeat(".", max(0, size-len(body)))}
	}
	return es
}

func TestSendBatchChunks(t *testing.T) {
	t.Parallel()
	const big = 400 << 10
	tests := []struct {
		name    string
		entries []Entry
		want    []int // entries per call
	}{
		{"none", nil, nil},
		{"one", entries(1, 10), []int{1}},
		{"ten is one call", entries(10, 10), []int{10}},
		{"by count", entries(25, 10), []int{10, 10, 5}},
		{"by bytes", entries(5, big), []int{2, 2, 1}},
		{"exactly the byte limit", entries(2, MaxBatchBytes/2), []int{2}},
		{"one byte over", append(entries(1, MaxBatchBytes/2), entries(1, MaxBatchBytes/2+1)...), []int{1, 1}},
		{"a message at the limit alone", entries(3, MaxMessageBytes), []int{1, 1, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeSender{}
			if failed := SendBatch(context.Background(), f, "q", tt.entries); len(failed) != 0 {
				t.Fatalf("failed = %v", failed)
			}
			calls := f.bodies(t)
			var got []int
			var order []string
			for _, c := range calls {
				got = append(got, len(c))
				order = append(order, c...)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("entries per call = %v, want %v", got, tt.want)
			}
			for i, b := range order {
				if b != tt.entries[i].Body {
					t.Fatalf("entry %d sent out of order", i)
				}
			}
		})
	}
}

func TestSendBatchFailuresMapToRecords(t *testing.T) {
	t.Parallel()
	errThrottled := errors.New("throttled")
	failBody := func(body string) func(int, *sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error) {
		return func(_ int, in *sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error) {
			out := &sqs.SendMessageBatchOutput{}
			for _, e := range in.Entries {
				if strings.HasPrefix(*e.MessageBody, body) {
					out.Failed = append(out.Failed, sqstypes.BatchResultErrorEntry{Id: e.Id, Code: aws.String("InternalError"), Message: aws.String("try again")})
				} else {
					out.Successful = append(out.Successful, sqstypes.SendMessageBatchResultEntry{Id: e.Id, MessageId: aws.String("m-" + *e.Id)})
				}
			}
			return out, nil
		}
	}
	tests := []struct {
		name    string
		n       int
		respond func(int, *sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error)
		want    map[int]error // entry index -> error it must match
	}{
		{"per-entry failure", 12, failBody("b3."), map[int]error{3: &EntryError{}}},
		{"whole second call fails", 25, func(call int, in *sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error) {
			if call == 2 {
				return nil, errThrottled
			}
			return acceptAll(in), nil
		}, map[int]error{10: errThrottled, 11: errThrottled, 12: errThrottled, 13: errThrottled, 14: errThrottled, 15: errThrottled, 16: errThrottled, 17: errThrottled, 18: errThrottled, 19: errThrottled}},
		{"entry missing from the answer", 3, func(_ int, in *sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error) {
			out := acceptAll(in)
			out.Successful = out.Successful[1:]
			return out, nil
		}, map[int]error{0: ErrNotConfirmed}},
		{"entry listed as sent and failed", 2, func(_ int, in *sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error) {
			out := acceptAll(in)
			out.Failed = []sqstypes.BatchResultErrorEntry{{Id: in.Entries[1].Id, Code: aws.String("X")}}
			return out, nil
		}, map[int]error{1: &EntryError{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			es := entries(tt.n, 10)
			failed := SendBatch(context.Background(), &fakeSender{respond: tt.respond}, "q", es)
			if len(failed) != len(tt.want) {
				t.Errorf("failed %d records, want %d: %v", len(failed), len(tt.want), failed)
			}
			for i, want := range tt.want {
				err := failed[es[i].RecordID]
				var ee *EntryError
				if _, isEntry := want.(*EntryError); isEntry && !errors.As(err, &ee) || !isEntry && !errors.Is(err, want) {
					t.Errorf("entry %d: error %v, want %T %v", i, err, want, want)
				}
			}

			// SendBatchAccepted fails the same records and gives every other
			// one the MessageId SQS returned for it (the fake's "m-<index>").
			accepted, failedToo := SendBatchAccepted(context.Background(), &fakeSender{respond: tt.respond}, "q", es)
			for i, e := range es {
				_, isFailed := failedToo[e.RecordID]
				id, isAccepted := accepted[e.RecordID]
				_, wantFailed := tt.want[i]
				switch {
				case isFailed == isAccepted:
					t.Errorf("entry %d: failed %v, accepted %v; want exactly one", i, isFailed, isAccepted)
				case isFailed != wantFailed:
					t.Errorf("entry %d: failed %v, want %v", i, isFailed, wantFailed)
				case isAccepted && id != fmt.Sprint("m-", i):
					t.Errorf("entry %d accepted as %q, want m-%d", i, id, i)
				}
			}
		})
	}
}

func TestSendBatchTooLargeEntryFailsAlone(t *testing.T) {
	t.Parallel()
	es := entries(3, 10)
	es[1].Body = strings.Repeat("x", MaxMessageBytes-20)
	es[1].Attributes = map[string]sqstypes.MessageAttributeValue{"attribute": String("pushes it over")}
	f := &fakeSender{}
	failed := SendBatch(context.Background(), f, "q", es)
	if len(failed) != 1 || !errors.Is(failed[es[1].RecordID], ErrTooLarge) {
		t.Errorf("failed = %v, want only the oversized record with ErrTooLarge", failed)
	}
	if got := f.bodies(t); len(got) != 1 || len(got[0]) != 2 {
		t.Errorf("calls = %d, want the two others in one call", len(got))
	}
}

func TestSendBatchHonoursContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	es := entries(15, 10)
	f := &fakeSender{respond: func(_ int, in *sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error) {
		cancel() // the deadline passes during the first call
		return acceptAll(in), nil
	}}
	failed := SendBatch(ctx, f, "q", es)
	if len(f.calls) != 1 || len(failed) != 5 {
		t.Fatalf("calls = %d, failed = %d; want 1 call and the 5 unsent records failed", len(f.calls), len(failed))
	}
	for _, e := range es[10:] {
		if !errors.Is(failed[e.RecordID], context.Canceled) {
			t.Errorf("%s: %v, want context.Canceled", e.RecordID, failed[e.RecordID])
		}
	}
}

func TestEntrySizeAndSetAttribute(t *testing.T) {
	t.Parallel()
	e := Entry{Body: "héllo", Attributes: map[string]sqstypes.MessageAttributeValue{
		"b": {DataType: aws.String("Binary.gzip"), BinaryValue: []byte{0, 1, 2}},
	}}
	if got, want := e.Size(), len("héllo")+len("b")+len("Binary.gzip")+3; got != want {
		t.Errorf("Size = %d, want %d (bytes, not runes)", got, want)
	}
	for i := len(e.Attributes); i < MaxAttributes; i++ {
		if !e.SetAttribute(fmt.Sprint("a", i), String("v")) {
			t.Fatalf("attribute %d refused with room left", i+1)
		}
	}
	if e.SetAttribute("one-too-many", String("v")) {
		t.Error("an 11th attribute was accepted")
	}
	if !e.SetAttribute("a1", String("replaced")) || *e.Attributes["a1"].StringValue != "replaced" {
		t.Error("replacing an existing attribute at the count limit was refused")
	}
	big := Entry{Body: strings.Repeat("x", MaxMessageBytes-len("k")-len("String")-2)}
	if big.SetAttribute("k", String("vvv")) || !big.SetAttribute("k", String("vv")) || big.Size() != MaxMessageBytes {
		t.Error("SetAttribute does not respect the message size limit exactly")
	}
}

// Where the batch limit is lower than MaxBatchBytes (256 KiB in some
// partitions), SQS refuses the whole call; every entry must still go out.
func TestBatchTooLongFallsBackToSingleSends(t *testing.T) {
	t.Parallel()
	f := &fakeSender{respond: func(_ int, in *sqs.SendMessageBatchInput) (*sqs.SendMessageBatchOutput, error) {
		if len(in.Entries) > 1 {
			return nil, &sqstypes.BatchRequestTooLong{Message: aws.String("batch over 262144 bytes")}
		}
		return acceptAll(in), nil
	}}
	if failed := SendBatch(context.Background(), f, "https://q", entries(3, 100_000)); len(failed) != 0 {
		t.Fatalf("failed %v, want every entry sent one by one", failed)
	}
	if got := len(f.calls); got != 4 {
		t.Errorf("%d calls, want 1 refused batch + 3 single sends", got)
	}
	es := entries(3, 100_000)
	accepted, failed := SendBatchAccepted(context.Background(), f, "https://q", es)
	if len(failed) != 0 || len(accepted) != 3 {
		t.Fatalf("accepted %v failed %v, want all 3 accepted one by one", accepted, failed)
	}
	for i, e := range es {
		if accepted[e.RecordID] != fmt.Sprint("m-", i) {
			t.Errorf("entry %d accepted as %q after the fallback, want m-%d", i, accepted[e.RecordID], i)
		}
	}
}

func TestForwardEntry(t *testing.T) {
	t.Parallel()
	rec := events.SQSMessage{MessageId: "m-1", Body: "b", Attributes: map[string]string{}}
	std := ForwardEntry(rec, "https://sqs/1/operator", "max-attempts")
	if aws.ToString(std.Attributes[AttrReason].StringValue) != "max-attempts" ||
		aws.ToString(std.Attributes[AttrOriginalMessageID].StringValue) != "m-1" || std.GroupID != "" || std.DeduplicationID != "" {
		t.Errorf("standard operator entry %+v", std)
	}
	fifo := ForwardEntry(rec, "https://sqs/1/operator.fifo", "max-attempts")
	if fifo.GroupID != "m-1" || fifo.DeduplicationID != ForwardEntry(rec, "https://sqs/1/operator.fifo", "max-attempts").DeduplicationID {
		t.Errorf("FIFO operator entry %+v: want its own group and a stable deduplication id", fifo)
	}
	rec.Attributes["MessageGroupId"] = "g"
	if got := ForwardEntry(rec, "https://sqs/1/operator.fifo", "x").GroupID; got != "g" {
		t.Errorf("group %q, want the record's own group kept", got)
	}
}

// meetingSender answers every call, but the first `meet` calls return only
// once all of them are in flight together (or their context ends): proof
// that many calls overlap, without a sleep. It records the most calls ever
// in flight, each group's bodies in the order SQS got them, and the groups
// two calls in flight held at once.
type meetingSender struct {
	meet int

	mu       sync.Mutex
	arrived  int
	met      chan struct{}
	inFlight int
	most     int
	held     map[string]bool
	clash    []string
	order    map[string][]string
}

func newMeetingSender(meet int) *meetingSender {
	return &meetingSender{meet: meet, met: make(chan struct{}), held: map[string]bool{}, order: map[string][]string{}}
}

func (m *meetingSender) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	groups := map[string]bool{}
	m.mu.Lock()
	m.inFlight++
	m.most = max(m.most, m.inFlight)
	for _, e := range in.Entries {
		g := aws.ToString(in.QueueUrl) + " " + aws.ToString(e.MessageGroupId)
		if IsFIFO(aws.ToString(in.QueueUrl)) && !groups[g] {
			if m.held[g] {
				m.clash = append(m.clash, g)
			}
			groups[g], m.held[g] = true, true
		}
		m.order[g] = append(m.order[g], aws.ToString(e.MessageBody))
	}
	if m.arrived++; m.arrived == m.meet {
		close(m.met)
	}
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.inFlight--
		for g := range groups {
			delete(m.held, g)
		}
	}()
	select {
	case <-m.met:
		return acceptAll(in), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func grouped(n int, prefix, group string) []Entry {
	es := entries(n, 10)
	for i := range es {
		es[i].RecordID = fmt.Sprintf("%s-%d", prefix, i)
		es[i].Body = fmt.Sprintf("%s %d", prefix, i)
		es[i].GroupID = group
	}
	return es
}

// SendBatches shares one bound on calls in flight across its batches, sends
// the calls of a standard queue all at once (a group id there orders
// nothing), and on a FIFO queue holds back a call until the earlier calls
// holding any of its groups have finished, so every group reaches SQS in
// order. (internal/replay's TestFIFOGroupsKeepTheirOrderUnderConcurrency
// pairs calls adversarially; this one checks the contract.)
func TestSendBatchesConcurrency(t *testing.T) {
	t.Parallel()
	// Standard: three calls of one group, all overlapping. FIFO: calls
	// [a×10] [b×10] [a×5 c×5] [c×10]: the third waits for the first, the
	// fourth for the third; the first two overlap with the standard ones.
	std := Batch{QueueURL: "https://sqs/1/std", Entries: grouped(30, "s", "g")}
	fifo := Batch{QueueURL: "https://sqs/1/q.fifo", Entries: slices.Concat(grouped(10, "a", "a"), grouped(10, "b", "b"), grouped(5, "a2", "a"), grouped(15, "c", "c"))}
	// A bound on waiting for the others, not a sleep: it ends when they meet.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m := newMeetingSender(5)
	if failed := SendBatches(ctx, m, 5, std, fifo); len(failed) != 0 {
		t.Fatalf("%d entries failed: the first 5 calls (3 standard, 2 FIFO) never met (most in flight %d)", len(failed), m.most)
	}
	if m.most != 5 {
		t.Errorf("most calls in flight %d, want the bound, 5", m.most)
	}
	if len(m.clash) != 0 {
		t.Errorf("FIFO groups %v were in two calls in flight at once", m.clash)
	}
	for _, g := range []string{"a", "b", "c"} {
		var want []string
		for _, e := range fifo.Entries {
			if e.GroupID == g {
				want = append(want, e.Body)
			}
		}
		if got := m.order[fifo.QueueURL+" "+g]; !slices.Equal(got, want) {
			t.Errorf("group %s reached SQS as %v, want %v", g, got, want)
		}
	}
}

// With a cancelled context no call is made and every entry fails with the
// context's error, whatever the bound.
func TestSendBatchesCancelled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f := &fakeSender{}
	es := entries(25, 10)
	failed := SendBatches(ctx, f, 10, Batch{QueueURL: "https://sqs/1/q", Entries: es})
	if len(f.calls) != 0 || len(failed) != len(es) {
		t.Fatalf("%d calls, %d failed; want none made and all %d failed", len(f.calls), len(failed), len(es))
	}
	for _, e := range es {
		if !errors.Is(failed[e.RecordID], context.Canceled) {
			t.Errorf("%s: %v, want context.Canceled", e.RecordID, failed[e.RecordID])
		}
	}
}

// TraceHeader goes out as the AWSTraceHeader system attribute, which SQS
// does not count against the message's attributes or size; no header, no
// system attributes.
func TestTraceHeaderIsASystemAttribute(t *testing.T) {
	t.Parallel()
	f := &fakeSender{}
	es := []Entry{{RecordID: "a", Body: "x", TraceHeader: "Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1"}, {RecordID: "b", Body: "y"}}
	if failed := SendBatch(context.Background(), f, "q", es); len(failed) != 0 {
		t.Fatal(failed)
	}
	got := f.calls[0].Entries
	h, ok := got[0].MessageSystemAttributes[SystemAttrTraceHeader]
	if !ok || aws.ToString(h.DataType) != "String" || aws.ToString(h.StringValue) != es[0].TraceHeader {
		t.Errorf("entry a: system attributes %+v", got[0].MessageSystemAttributes)
	}
	if got[1].MessageSystemAttributes != nil {
		t.Errorf("entry b: system attributes %+v, want none", got[1].MessageSystemAttributes)
	}
	if es[0].Size() != len("x") {
		t.Errorf("Size %d counts the trace header", es[0].Size())
	}
}
