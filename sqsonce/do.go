package sqsonce

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/sqs-once/sqs-once/sqsonce/store"
)

// Do runs fn once per key (an API request, a job, any side effect). It
// returns nil when fn succeeded (its completion unrecorded is logged), fn's
// error when it failed (the key released for a retry), or, fn not run, an
// error matching ErrDuplicate, ErrInProgress (after Config.WaitInProgress),
// ErrPayloadMismatch, ErrNoKey, ErrUnavailable or ErrMisconfigured. When fn
// added writes to its transaction (store.Transactor), nil means they
// committed with the completion; an error means none of them is applied
// (ErrLockLost: another holder has the key; a *store.EffectError: a
// condition of fn's own writes failed; ErrUnavailable: the commit failed,
// or its answer was lost and the record settles it for the next call), and
// a retry is safe.
func (p *Processor) Do(ctx context.Context, key string, fn func(ctx context.Context) error) error {
	_, err := p.do(ctx, key, func(ctx context.Context) ([]byte, error) { return nil, fn(ctx) })
	return err
}

// DoResult is Do for fn with a result, stored as JSON with the key's
// completion: a later call within the window returns it, nil error, fn not
// run (a replay: see the example). A result over store.MaxResultSize, or
// not encodable, completes the key without it: this call gets a
// *ResultError, later ones ErrDuplicate, as for a key Do or Handle
// completed or a result that no longer decodes into T (docs/library.md).
func DoResult[T any](ctx context.Context, p *Processor, key string, fn func(ctx context.Context) (T, error)) (T, error) {
	var first, zero T
	var resultErr error
	res, err := p.do(ctx, key, func(ctx context.Context) ([]byte, error) {
		v, err := fn(ctx)
		if err != nil {
			return nil, err
		}
		first = v
		b, err := json.Marshal(v)
		switch {
		case err != nil:
			resultErr = &ResultError{Key: p.lock.shownKey(key), Err: err}
		case len(b) > store.MaxResultSize:
			resultErr = &ResultError{Key: p.lock.shownKey(key), Size: len(b)}
		default:
			return b, nil
		}
		return nil, nil
	})
	if res.resultDropped > 0 && resultErr == nil {
		resultErr = &ResultError{Key: p.lock.shownKey(key), Size: res.resultDropped, Err: errors.New("with the key's emitted messages it would not fit the record")}
	}
	switch {
	case res.outcome == processed || res.outcome == processedUnrecorded:
		return first, resultErr
	case res.outcome == duplicate && res.result != nil:
		var v T
		if derr := json.Unmarshal(res.result, &v); derr != nil {
			return zero, fmt.Errorf("%w: its stored result does not decode as %T: %w", err, zero, derr)
		}
		return v, nil
	}
	return zero, err
}

// ResultError is a DoResult whose fn succeeded but whose result was not
// stored, the key completed without it: Size bytes over
// store.MaxResultSize, or Err from encoding/json. Key is as Outcome's.
type ResultError struct {
	// Key is the key, as Outcome.Key shows it.
	Key string
	// Size is the encoded result's size in bytes when it did not fit; 0
	// when it could not be encoded.
	Size int
	// Err is encoding/json's error, or why the result did not fit beside
	// the key's emitted messages; nil when it was over
	// store.MaxResultSize alone.
	Err error
}

// Error describes the failure in one line.
func (e *ResultError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("sqsonce: result of key %q not stored: %v; the key is completed without it, and later calls get ErrDuplicate", e.Key, e.Err)
	}
	return fmt.Sprintf("sqsonce: result of key %q not stored: %d bytes of JSON, more than store.MaxResultSize (%d); the key is completed without it, and later calls get ErrDuplicate", e.Key, e.Size, store.MaxResultSize)
}

// Unwrap returns the cause, for errors.Is and errors.As.
func (e *ResultError) Unwrap() error { return e.Err }

// do is Do and DoResult: the key checked, the lock's work, its Outcome
// told, and the error Do returns.
func (p *Processor) do(ctx context.Context, key string, fn func(ctx context.Context) ([]byte, error)) (lockResult, error) {
	start := p.now()
	if err := p.checkKey(key); err != nil {
		o := failedFor(ReasonNoKey, err)
		o.Duration = p.now().Sub(start)
		p.tell(ctx, o)
		return lockResult{outcome: notAcquired, err: err}, err
	}
	shown := p.lock.shownKey(key)
	res := p.lock.do(ctx, key, "", p.cfg.WaitInProgress, fn)
	o := classify(res)
	o.Key, o.Duration = shown, p.now().Sub(start)
	p.tell(ctx, o)
	switch res.outcome {
	case processed:
		return res, nil
	case processedUnrecorded:
		p.log.ErrorContext(ctx, "function ran but its completion was not recorded: a later call with the same key after the lock expires would run it again (duplicate possible)",
			"key", shown, "error", res.err)
		return res, nil
	}
	return res, res.err
}

// checkKey refuses a key Do cannot lock.
func (p *Processor) checkKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty key", ErrNoKey)
	}
	if p.cfg.HashKeys {
		return nil
	}
	if len(key) > maxKeyBytes || !utf8.ValidString(key) {
		// Not UTF-8: the SDK would write each bad byte as U+FFFD, and two
		// keys could share one record.
		return fmt.Errorf("%w: key of %d bytes, want 1 to %d of valid UTF-8 (%s lifts both limits)", ErrNoKey, len(key), maxKeyBytes, p.cfg.setting("HashKeys"))
	}
	return nil
}
