package demo

import (
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"
)

// progressWriter prints the live progress line: rewritten in place (\r) on a
// terminal, a plain line every few seconds otherwise (CI logs, pipes).
type progressWriter struct {
	w     io.Writer
	tty   bool
	every time.Duration
	last  time.Time
	drawn bool
}

func newProgressWriter(w io.Writer) *progressWriter {
	p := &progressWriter{w: w, tty: isTerminal(w), every: 5 * time.Second}
	if p.tty {
		p.every = 200 * time.Millisecond
	}
	return p
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// Update prints p if the last line is old enough, or always when force is set.
func (pw *progressWriter) Update(p Progress, now time.Time, force bool) {
	if !force && now.Sub(pw.last) < pw.every {
		return
	}
	pw.last = now
	line := p.Line()
	if pw.tty {
		// \033[K clears what a longer previous line left behind.
		fmt.Fprintf(pw.w, "\r%s\033[K", line)
		pw.drawn = true
		return
	}
	fmt.Fprintln(pw.w, line)
}

// Done ends the in-place line so what follows starts on its own line.
func (pw *progressWriter) Done() {
	if pw.drawn {
		fmt.Fprintln(pw.w)
		pw.drawn = false
	}
}

// Line is the progress line's text.
func (p Progress) Line() string {
	parts := []string{fmt.Sprintf("%d/%s done", p.Resolved, count(p.Sent, "message"))}
	if p.Outside {
		parts = append(parts, fmt.Sprintf("%d completed", p.Processed))
	} else {
		done := "processed"
		if p.Forwarding {
			done = "forwarded"
		}
		parts = append(parts, fmt.Sprintf("%d %s", p.Processed, done), count(p.Suppressed, "duplicate")+" suppressed",
			fmt.Sprintf("%d dead-lettered", p.DeadLettered), count(p.Replays, "replay"))
	}
	parts = append(parts, fmt.Sprintf("%d at operator", p.Operator))
	if p.TimedOut > 0 {
		parts = append(parts, fmt.Sprintf("%d timed out", p.TimedOut))
	}
	return fmt.Sprintf("[%5.1fs] ", p.Elapsed.Seconds()) + strings.Join(parts, " · ")
}

// Progress is the run's last progress line, printed once the pipeline has
// stopped: made of the report's own counts, so each of its numbers is one
// the report prints under the same name (TestLastProgressLineIsTheReport).
func (s Summary) Progress() Progress {
	p := Progress{
		Resolved:  s.Resolved,
		Sent:      s.Sent,
		Processed: s.Processed,
		Operator:  s.Operator.Total,
		Elapsed:   time.Duration(math.Round(s.DurationSeconds * float64(time.Second))),
	}
	if s.Mode == "stack" {
		p.Outside = true
		return p
	}
	p.Suppressed, p.DeadLettered, p.Replays, p.TimedOut = s.DuplicatesSuppressed, s.DeadLettered, s.Replays.Total, s.Invocations.TimedOut
	p.Forwarding = s.Target != nil
	return p
}
