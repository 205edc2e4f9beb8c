package ops

import (
	"io"
	"sync"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
)

// progressBar is a bar (known total) or a spinner (total 0) drawn by mpb on
// a terminal. Commands make one only when IO.Terminal says the error stream
// is a terminal: a pipe or a log file gets the summary alone.
type progressBar struct {
	p *mpb.Progress
	b *mpb.Bar

	mu     sync.Mutex
	status string
	total  int64
}

func newProgressBar(w io.Writer, name string, total int64) *progressBar {
	pb := &progressBar{p: mpb.New(mpb.WithOutput(w), mpb.WithWidth(40)), total: total}
	status := decor.Any(func(decor.Statistics) string {
		pb.mu.Lock()
		defer pb.mu.Unlock()
		return pb.status
	}, decor.WCSyncSpaceR)
	if total > 0 {
		pb.b = pb.p.AddBar(total,
			mpb.PrependDecorators(decor.Name(name, decor.WCSyncSpaceR), decor.CountersNoUnit("%d/%d", decor.WCSyncSpace)),
			mpb.AppendDecorators(status))
	} else {
		pb.b = pb.p.New(0, mpb.SpinnerStyle(),
			mpb.PrependDecorators(decor.Name(name, decor.WCSyncSpaceR)),
			mpb.AppendDecorators(status))
	}
	return pb
}

// set moves the bar to current, growing its total when the estimate it
// started from (an approximate queue depth) was too low.
func (pb *progressBar) set(current int64, status string) {
	pb.mu.Lock()
	pb.status = status
	grow := pb.total > 0 && current > pb.total
	if grow {
		pb.total = current
	}
	pb.mu.Unlock()
	if grow {
		pb.b.SetTotal(current, false)
	}
	pb.b.SetCurrent(current)
}

// setStatus replaces the text after the bar.
func (pb *progressBar) setStatus(status string) {
	pb.mu.Lock()
	defer pb.mu.Unlock()
	pb.status = status
}

// done completes the bar where it is and waits for mpb's last frame, so the
// summary printed next starts on a clean line.
func (pb *progressBar) done() {
	pb.b.SetTotal(-1, true)
	pb.p.Wait()
}
