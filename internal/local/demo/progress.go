package demo

import (
	"fmt"
	"io"
	"os"
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
	done := "processed"
	if p.Forwarding {
		done = "forwarded"
	}
	line := fmt.Sprintf("[%5.1fs] %d/%d messages done · %d %s · %d duplicates suppressed · %d dead-lettered · %d replays · %d at operator",
		p.Elapsed.Seconds(), p.Resolved, p.Sent, p.Processed, done, p.Suppressed, p.DeadLettered, p.Replays, p.Operator)
	if p.TimedOut > 0 {
		line += fmt.Sprintf(" · %d timed out", p.TimedOut)
	}
	return line
}
