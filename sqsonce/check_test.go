package sqsonce

import (
	"context"
	"errors"
	"testing"

	"github.com/sqs-once/sqs-once/sqsonce/sqsoncetest"
	"github.com/sqs-once/sqs-once/sqsonce/store"
)

// checkingStore is a Store of one's own with a Check method.
type checkingStore struct {
	store.Store
	err    error
	called int
}

func (s *checkingStore) Check(context.Context) error {
	s.called++
	return s.err
}

func TestCheckOtherStores(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p, err := New(Config{Store: sqsoncetest.NewStore(), KeyPrefix: "app"})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Check(ctx); err != nil {
		t.Errorf("Check on a store without Check: %v, want nil", err)
	}

	own := &checkingStore{Store: sqsoncetest.NewStore(), err: errors.New("bucket gone")}
	p, err = New(Config{Store: own, KeyPrefix: "app"})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Check(ctx); err != own.err || own.called != 1 {
		t.Errorf("Check: %v after %d calls of the store's Check, want its error after 1", err, own.called)
	}
}
