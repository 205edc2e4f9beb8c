package replay

import (
	"time"

	"github.com/sqs-once/sqs-once/internal/envconfig"
	"github.com/sqs-once/sqs-once/internal/jitter"
)

// MaxDelay is the longest DelaySeconds SQS accepts.
const MaxDelay = 900 * time.Second

// MaxMessageAgeLimit is the largest MAX_MESSAGE_AGE: SQS's longest message
// retention, 14 days. A longer limit could never be reached, since no queue
// keeps a message that long, and would only hide a typo.
const MaxMessageAgeLimit = 14 * 24 * time.Hour

// Config is the replayer's configuration.
type Config struct {
	MainQueueURL     string
	OperatorQueueURL string
	// MaxAttempts is how many times a message is replayed; 0 sends every dead
	// letter straight to the operator queue.
	MaxAttempts int
	// Backoff gives replay n its delay; Cap is at most MaxDelay.
	Backoff jitter.Policy
	// MaxMessageAge, when not 0, is the oldest a message may be (from its
	// first enqueue, sqs-once-first-sent) when a replay of it would become
	// visible; an older one goes to the operator queue as expired, so
	// replays cannot keep a message alive for ever.
	MaxMessageAge time.Duration
}

// LoadConfig reads the configuration; the error names every bad variable.
func LoadConfig(lookup envconfig.Lookup) (Config, error) {
	r := envconfig.NewReader(lookup)
	c := Config{
		MainQueueURL:     r.QueueURL("MAIN_QUEUE_URL", true),
		OperatorQueueURL: r.QueueURL("OPERATOR_QUEUE_URL", true),
		MaxAttempts:      r.Int("MAX_ATTEMPTS", 3, 0, 1000),
		Backoff: jitter.Policy{
			Base: r.Seconds("BACKOFF_BASE", 2*time.Second, 0, MaxDelay),
			Rate: r.Float("BACKOFF_RATE", 2, 1, 1000),
			// Whole seconds, so a rounded delay never exceeds it.
			Cap: time.Duration(r.Int("MAX_DELAY", int(MaxDelay/time.Second), 0, int(MaxDelay/time.Second))) * time.Second,
		},
		// Whole seconds, empty or 0 for no limit.
		MaxMessageAge: time.Duration(r.Int("MAX_MESSAGE_AGE", 0, 0, int(MaxMessageAgeLimit/time.Second))) * time.Second,
	}
	jit := r.String("JITTER", string(jitter.Full))
	var err error
	if c.Backoff.Strategy, err = jitter.ParseStrategy(jit); err != nil {
		r.Fail("JITTER", "%q is not one of full, equal, decorrelated, none", jit)
	}
	if c.MainQueueURL != "" && c.MainQueueURL == c.OperatorQueueURL {
		r.Fail("OPERATOR_QUEUE_URL", "must differ from MAIN_QUEUE_URL, or hopeless messages would be replayed forever")
	}
	if err := r.Err(); err != nil {
		return Config{}, err
	}
	return c, nil
}
