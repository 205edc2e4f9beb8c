package sqsonce

import (
	"context"
	"sync"
	"testing"
	"time"
)

// watchedCtx is a parent context that counts the children registered with
// it (the context package registers a child through AfterFunc when the
// parent offers it) and those that let go when they were cancelled.
type watchedCtx struct {
	context.Context
	done chan struct{}

	mu                  sync.Mutex
	registered, stopped int
}

func (c *watchedCtx) Done() <-chan struct{} { return c.done }

func (c *watchedCtx) AfterFunc(func()) (stop func() bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.registered++
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.stopped++
		return true
	}
}

type acceptingTarget struct{}

func (acceptingTarget) Deliver(_ context.Context, msgs []Delivery) []error {
	return make([]error, len(msgs))
}

// deliverBatch leaves no context of its own registered with the batch's
// once it returns, with a held lock's deadline and without one.
func TestDeliverBatchCancelsItsContext(t *testing.T) {
	t.Parallel()
	withDeadline, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for name, holdCtx := range map[string]context.Context{"deadline": withDeadline, "no deadline": context.Background()} {
		parent := &watchedCtx{Context: context.Background(), done: make(chan struct{})}
		p := &Processor{target: acceptingTarget{}}
		p.deliverBatch(parent, []*held{{hold: &hold{ctx: holdCtx}}}, []Delivery{{Key: "k"}})
		if parent.registered == 0 || parent.registered != parent.stopped {
			t.Errorf("%s: %d contexts registered with the batch's, %d let go; want every one let go", name, parent.registered, parent.stopped)
		}
	}
}
