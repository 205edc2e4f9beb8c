// Package leasectx carries the key and fencing token a function runs under
// in its context: set by package sqsonce when it holds the lock, and by
// sqsoncetest for a handler's own unit test.
package leasectx

import "context"

// Lease is what a context carries.
type Lease struct {
	Key   string
	Fence int64
	// Outbox is the lock's staging of emitted messages (package sqsonce's
	// own type), nil outside a lock: carried here so that a lock adds one
	// context value, not two.
	Outbox any
}

type key struct{}

// With returns ctx carrying l.
func With(ctx context.Context, l Lease) context.Context { return context.WithValue(ctx, key{}, l) }

// From returns the lease ctx carries, the zero one when none.
func From(ctx context.Context) Lease {
	l, _ := ctx.Value(key{}).(Lease)
	return l
}
