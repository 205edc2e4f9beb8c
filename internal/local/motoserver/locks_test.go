package motoserver

import "context"

// serializeWithOneLock is the wrapper with one lock for every write, as
// SerializeWrites was before it locked per item, so that the tests and the
// benchmark can compare the two.
func serializeWithOneLock(api DynamoTableWriter) DynamoWriter {
	return serializeWith(api, newOneLock(nil))
}

// lockedItems is the number of items whose lock w, a SerializeWrites
// wrapper, holds or has writers waiting for.
func lockedItems(w DynamoWriter) int { return w.(*serialized).locks.(*itemLocks).size() }

// oneLock is a single lock for all items: right for one item, wrong for the
// concurrency of many.
type oneLock struct {
	turn      chan struct{}
	contended func(key string)
}

func newOneLock(contended func(string)) *oneLock {
	return &oneLock{turn: make(chan struct{}, 1), contended: contended}
}

func (l *oneLock) lock(ctx context.Context, key string) (func(), error) {
	select {
	case l.turn <- struct{}{}:
		return func() { <-l.turn }, nil
	default:
	}
	if l.contended != nil {
		l.contended(key)
	}
	select {
	case l.turn <- struct{}{}:
		return func() { <-l.turn }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// noLock is the wrapper with its lock taken out.
type noLock struct{}

func (noLock) lock(context.Context, string) (func(), error) { return func() {}, nil }
