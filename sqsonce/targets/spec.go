package targets

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"sync"
)

// Kind is the kind of destination a Spec names.
type Kind string

// The kinds of target, as TARGET spells them before the colon.
const (
	Lambda Kind = "lambda" // lambda:<function name or ARN, with an optional :alias or :version>
	SQS    Kind = "sqs"    // sqs:<queue URL>
	SNS    Kind = "sns"    // sns:<topic ARN>
	Events Kind = "events" // events:<event bus name or ARN>
	States Kind = "states" // states:<state machine ARN>
)

// Durable is a Lambda durable function, qualified:
// durable:<function name or ARN>:<version or alias>.
const Durable Kind = "durable"

// Spec is a parsed TARGET: what kind of destination, and which.
type Spec struct {
	Kind Kind
	// Dest is the text after "<kind>:", exactly as given.
	Dest string
}

// String is the spec as TARGET spells it.
func (s Spec) String() string { return string(s.Kind) + ":" + s.Dest }

// ErrBadSpec is the cause of every error ParseSpec returns, and of a
// constructor's error for a destination that is not of its kind.
var ErrBadSpec = errors.New("targets: invalid target")

// The patterns are compiled on first use, not at package initialisation:
// their counted repetitions ({1,256}) make programs of about a megabyte that
// every cold start of the processor would build, a target configured or not.
var (
	// A function name, a partial ARN (<account>:function:<name>) or a full
	// ARN, with an optional alias or version; Lambda's own Invoke pattern.
	lambdaName = lazyRegexp(`^(arn:aws[a-zA-Z-]*:lambda:[a-z]{2}(-gov)?(-[a-z]+)+-\d{1}:\d{12}:function:|\d{12}:function:)?([a-zA-Z0-9_-]{1,64})(:(\$LATEST|[a-zA-Z0-9_-]{1,128}))?$`)
	topicARN   = lazyRegexp(`^arn:aws[a-zA-Z-]*:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]{1,256}(\.fifo)?$`)
	busName    = lazyRegexp(`^[A-Za-z0-9._/-]{1,256}$`)
	busARN     = lazyRegexp(`^arn:aws[a-zA-Z-]*:events:[a-z0-9-]+:\d{12}:event-bus/[A-Za-z0-9._/-]{1,256}$`)
	// A state machine's ARN, without a version or alias: its executions'
	// ARNs, which the processor looks up, follow from it. The name's
	// characters are the printable ASCII ones Step Functions allows.
	stateMachineARN = lazyRegexp(`^arn:aws[a-zA-Z-]*:states:[a-z0-9-]+:\d{12}:stateMachine:[A-Za-z0-9!'()+.=@_-]{1,80}$`)
)

// lazyRegexp is regexp.MustCompile(pattern) on first call.
func lazyRegexp(pattern string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(pattern) })
}

// valid reports whether dest names a destination of kind. It is the one
// check of a destination: the kind's constructor makes it on its argument,
// ParseSpec on the text after TARGET's colon.
func valid(kind Kind, dest string) bool {
	switch kind {
	case Lambda:
		return lambdaName().MatchString(dest)
	case SQS:
		return queueURL(dest)
	case SNS:
		return topicARN().MatchString(dest)
	case Events:
		return busName().MatchString(dest) || busARN().MatchString(dest)
	case States:
		return stateMachineARN().MatchString(dest)
	case Durable:
		return validDurable(dest)
	}
	return false
}

// validDurable accepts a function name, partial or full ARN with a version
// or alias, not $LATEST: a durable function is invoked by a qualified ARN,
// and an execution's replays must run the code it started with.
func validDurable(dest string) bool {
	m := lambdaName().FindStringSubmatch(dest)
	return m != nil && m[6] != "" && m[6] != "$LATEST"
}

// forms are the ways a destination of kind is written, as its constructor
// takes it; TARGET puts "<kind>:" before each.
func forms(kind Kind) []string {
	switch kind {
	case Lambda:
		return []string{"<function name or ARN>[:<alias or version>]"}
	case SQS:
		return []string{"https://sqs.<region>.amazonaws.com/<account>/<queue>"}
	case SNS:
		return []string{"arn:aws:sns:<region>:<account>:<topic>"}
	case Events:
		return []string{"<bus name>", "arn:aws:events:<region>:<account>:event-bus/<name>"}
	case States:
		return []string{"arn:aws:states:<region>:<account>:stateMachine:<name>"}
	case Durable:
		return []string{"<function name or ARN>:<version or alias> (not $LATEST)"}
	}
	return nil
}

// checkArg is a constructor's check of its destination argument, named as
// the Go caller wrote it: ToQueue's queueURL, not TARGET.
func checkArg(constructor, param string, kind Kind, dest string) error {
	if valid(kind, dest) {
		return nil
	}
	return fmt.Errorf("%w: %s: %s %q: want %s", ErrBadSpec, constructor, param, dest, strings.Join(forms(kind), " or "))
}

// ParseSpec reads a TARGET value. An error says what is wrong and what the
// value should look like.
func ParseSpec(s string) (Spec, error) {
	spec, want := parseSpec(s)
	if want != "" {
		return Spec{}, fmt.Errorf("%w %q: %s", ErrBadSpec, s, want)
	}
	return spec, nil
}

// parseSpec is ParseSpec without the error's wrapping: want, when not "",
// says what s should look like, for an error in the words of whoever wrote
// s (FromEnv's names the variable, ParseSpec's the package).
func parseSpec(s string) (spec Spec, want string) {
	kind, dest, ok := strings.Cut(s, ":")
	spec = Spec{Kind: Kind(kind), Dest: dest}
	switch {
	case !ok || dest == "":
		return Spec{}, "want lambda:<function>, sqs:<queue URL>, sns:<topic ARN>, events:<bus>, states:<state machine ARN> or durable:<function>:<version or alias>"
	case forms(spec.Kind) == nil:
		return Spec{}, fmt.Sprintf("unknown kind %q: want lambda, sqs, sns, events, states or durable", kind)
	case spec.Kind == Durable && !valid(spec.Kind, dest) && durableFix(dest) != "":
		return Spec{}, durableFix(dest)
	case !valid(spec.Kind, dest):
		want := forms(spec.Kind)
		for i, f := range want {
			want[i] = kind + ":" + f
		}
		return Spec{}, "want " + strings.Join(want, " or ")
	}
	return spec, ""
}

// queueURL accepts http(s)://<host>/<account>/<queue name>.
func queueURL(s string) bool {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return false
	}
	path := strings.Split(strings.TrimPrefix(u.Path, "/"), "/")
	return len(path) == 2 && path[0] != "" && path[1] != ""
}

// durableFix says how to qualify a durable target's function that is
// unqualified or $LATEST; "" for a destination of another defect.
func durableFix(dest string) string {
	m := lambdaName().FindStringSubmatch(dest)
	switch {
	case m == nil:
		return ""
	case m[6] == "":
		return fmt.Sprintf("durable:%s names no version or alias: Lambda invokes a durable function by a qualified ARN; publish a version (or an alias to one) and write durable:%s:<version or alias>", dest, dest)
	case m[6] == "$LATEST":
		return fmt.Sprintf("durable:%s: $LATEST is refused: an execution's replays must run the code it started with; publish a version (or an alias to one) and name it instead", dest)
	}
	return ""
}

// FunctionName is the function a lambda or durable target names, without
// account, region or qualifier: what the processor compares with its own name.
func (s Spec) FunctionName() string {
	m := lambdaName().FindStringSubmatch(s.Dest)
	if (s.Kind != Lambda && s.Kind != Durable) || m == nil {
		return ""
	}
	return m[4]
}

// Qualifier is a lambda or durable target's alias or version, "" for none.
func (s Spec) Qualifier() string {
	m := lambdaName().FindStringSubmatch(s.Dest)
	if (s.Kind != Lambda && s.Kind != Durable) || m == nil {
		return ""
	}
	return m[6]
}
