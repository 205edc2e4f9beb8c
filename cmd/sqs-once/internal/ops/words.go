package ops

import (
	"fmt"
	"slices"
	"strings"

	"github.com/sqs-once/sqs-once/internal/replay"
	"github.com/sqs-once/sqs-once/internal/suggest"
	"github.com/sqs-once/sqs-once/sqsonce"
)

// count is n and the noun that agrees with it: "1 message", "2 messages",
// "0 messages".
func count(n int, one, many string) string {
	return fmt.Sprintf("%d %s", n, plural(n, one, many))
}

// plural is one for n == 1, else many.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// Reasons are the values of sqs-once-reason that sqs-once writes on a
// message it sends to the operator queue: the processor's and the
// replayer's. redrive --reason accepts only these: a typo would match no
// message and move nothing. TestReasonsAreEveryReasonWritten keeps the list
// equal to the forwarded ones of sqsonce's Reason constants and to the
// Reason constants of replay.
var Reasons = []string{
	string(sqsonce.ReasonPermanent),
	string(sqsonce.ReasonPayloadMismatch),
	string(sqsonce.ReasonTargetRefused),
	replay.ReasonMaxAttempts,
	replay.ReasonInvalidCounter,
	replay.ReasonAttributeLimit,
	replay.ReasonMissingGroupID,
	replay.ReasonExpired,
}

// checkReason refuses a --reason that sqs-once never writes, naming the
// ones it does and the closest to what was typed (suggest.Closest).
func checkReason(reason string) error {
	if reason == "" || slices.Contains(Reasons, reason) {
		return nil
	}
	known := slices.Sorted(slices.Values(Reasons))
	hint := ""
	if best, ok := suggest.Closest(reason, known); ok {
		hint = " Did you mean " + best + "?"
	}
	return fmt.Errorf("%w: --reason %q is not a reason sqs-once writes, so it would match no message; the reasons are %s.%s",
		ErrUsage, reason, strings.Join(known, ", "), hint)
}
