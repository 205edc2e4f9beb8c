package ops

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
)

// The settled states of an event source mapping that cutover sets.
const (
	stateEnabled  = "Enabled"
	stateDisabled = "Disabled"
)

// CutoverStep is one mapping a cutover sets to a state.
type CutoverStep struct {
	// Whose says whose mapping it is: "consumer" or "stack".
	Whose    string `json:"whose"`
	Function string `json:"function"`
	UUID     string `json:"uuid"`
	// Want is Enabled or Disabled; Was the state found before the step.
	Want string `json:"want"`
	Was  string `json:"was,omitempty"`
	// Changed says whether the step updated the mapping; false when it was
	// in the wanted state already.
	Changed bool `json:"changed"`
	Done    bool `json:"done"`
}

// owner names the mapping: "the stack's mapping <uuid>" or
// "<consumer>'s mapping <uuid>".
func (s CutoverStep) owner() string {
	if s.Whose == "consumer" {
		return s.Function + "'s mapping " + s.UUID
	}
	return "the stack's mapping " + s.UUID
}

func (s CutoverStep) verb() string {
	if s.Want == stateDisabled {
		return "disable"
	}
	return "enable"
}

// words is the step as an order: "disable <consumer>'s mapping <uuid>".
func (s CutoverStep) words() string { return s.verb() + " " + s.owner() }

// CutoverPlan is the steps of a cutover, in order: at no moment do the
// consumer's mapping and the stack's both consume the queue. The one being
// switched off is disabled first, and only once Lambda reports it Disabled
// (its batches in flight done) is the other enabled; meanwhile nothing
// reads the queue and messages wait, a delay of seconds rather than a
// window in which the consumer takes messages past the dedupe.
func CutoverPlan(m *Migration, rollback bool) ([]CutoverStep, error) {
	if m.StackMapping == nil {
		return nil, fmt.Errorf("stack %s has no event source mapping on queue %s: %w", m.Stack, QueueName(m.Queue.ARN), ErrNotFound)
	}
	stack := CutoverStep{Whose: "stack", Function: functionName(m.StackMapping.FunctionARN), UUID: m.StackMapping.UUID, Was: m.StackMapping.State}
	var consumer []CutoverStep
	for _, mp := range m.ConsumerMappings {
		consumer = append(consumer, CutoverStep{Whose: "consumer", Function: m.Consumer.Name, UUID: mp.UUID, Was: mp.State})
	}
	if !rollback {
		for i := range consumer {
			consumer[i].Want = stateDisabled
		}
		stack.Want = stateEnabled
		return append(consumer, stack), nil
	}
	if m.Consumer == nil {
		return nil, fmt.Errorf("%w: no consumer to give queue %s back to: give --consumer FUNCTION", ErrUsage, QueueName(m.Queue.ARN))
	}
	if len(consumer) == 0 {
		return nil, fmt.Errorf("%s has no event source mapping on queue %s to enable again (deleted?): recreate it in the consumer's infrastructure code, then run this again: %w",
			m.Consumer.Name, QueueName(m.Queue.ARN), ErrNotFound)
	}
	stack.Want = stateDisabled
	for i := range consumer {
		consumer[i].Want = stateEnabled
	}
	return append([]CutoverStep{stack}, consumer...), nil
}

// Mappings switches event source mappings on and off, waiting for each to
// settle.
type Mappings struct {
	Lambda MappingAPI
	// Wait bounds how long one mapping may take to reach its state.
	Wait time.Duration
	// Poll is the pause between two reads of a mapping's state.
	Poll time.Duration
	// Now and Sleep are the clock the waits use; tests inject them.
	Now   func() time.Time
	Sleep func(ctx context.Context, d time.Duration) error
	// Region names where the mappings are, for messages.
	Region string
}

// Run makes each step in order, calling done after each, and stops at the
// first that fails. A step whose mapping is in the wanted state already
// changes nothing, so Run can be repeated: a second run finishes what an
// interrupted one left.
func (c *Mappings) Run(ctx context.Context, steps []CutoverStep, done func(CutoverStep)) ([]CutoverStep, error) {
	for i := range steps {
		if err := c.set(ctx, &steps[i]); err != nil {
			return steps, err
		}
		if done != nil {
			done(steps[i])
		}
	}
	return steps, nil
}

// set brings one mapping to its wanted state. A mapping in transition
// (Enabling, Disabling, Updating, Creating) is waited for first: Lambda
// refuses to update a mapping that is being updated.
func (c *Mappings) set(ctx context.Context, s *CutoverStep) error {
	state, err := c.settle(ctx, s, "")
	if err != nil {
		return err
	}
	s.Was = state
	if state != s.Want {
		if _, err := c.Lambda.UpdateEventSourceMapping(ctx, &lambda.UpdateEventSourceMappingInput{
			UUID: aws.String(s.UUID), Enabled: aws.Bool(s.Want == stateEnabled),
		}); err != nil {
			return awsError(s.words()+inRegion(c.Region), err)
		}
		s.Changed = true
		if _, err := c.settle(ctx, s, s.Want); err != nil {
			return err
		}
	}
	s.Done = true
	return nil
}

// settle reads the mapping until its state is Enabled or Disabled (or
// want, when given) and returns it.
func (c *Mappings) settle(ctx context.Context, s *CutoverStep, want string) (string, error) {
	deadline := c.Now().Add(c.Wait)
	for {
		out, err := c.Lambda.GetEventSourceMapping(ctx, &lambda.GetEventSourceMappingInput{UUID: aws.String(s.UUID)})
		if err != nil {
			return "", awsError("read "+s.owner()+inRegion(c.Region), err)
		}
		state := aws.ToString(out.State)
		if (want == "" && (state == stateEnabled || state == stateDisabled)) || (want != "" && state == want) {
			return state, nil
		}
		if !c.Now().Before(deadline) {
			return "", fmt.Errorf("%s: still %s after %s: %w", s.words(), state, c.Wait, ErrIncomplete)
		}
		if err := c.Sleep(ctx, c.Poll); err != nil {
			return "", fmt.Errorf("%s: interrupted while it was %s: %w", s.words(), state, ErrIncomplete)
		}
	}
}

// cutoverBlockers are the failed checks that stop a cutover: all but the
// mappings' own state, which is what the cutover sets (both consuming, or
// neither), unless another function consumes the queue too.
func cutoverBlockers(m *Migration, checks []Check) []Check {
	var out []Check
	for _, c := range Failed(checks) {
		if c.Name == checkMappings && m.StackMapping != nil && !anyConsumes(m.OtherMappings) {
			continue
		}
		out = append(out, c)
	}
	return out
}

func anyConsumes(ms []Mapping) bool {
	for _, m := range ms {
		if m.Consumes() {
			return true
		}
	}
	return false
}

// stoppedWords says, after a step failed, what was done, whether the queue
// may be unconsumed now, and how to go on.
func stoppedWords(steps []CutoverStep, again, undo string) string {
	var did []string
	off, on := false, false
	for _, s := range steps {
		if s.Done && s.Changed {
			did = append(did, s.words()+": done")
		}
		if s.Done && s.Want == stateDisabled {
			off = true
		}
		if s.Done && s.Want == stateEnabled {
			on = true
		}
	}
	var b strings.Builder
	if len(did) > 0 {
		b.WriteString("Before it stopped: " + strings.Join(did, "; ") + ". ")
	}
	if off && !on {
		b.WriteString("Nothing consumes the queue now; messages wait there. ")
	}
	b.WriteString("Run " + again + " again to finish (it skips what is done), or " + undo + " to go back.")
	return b.String()
}
