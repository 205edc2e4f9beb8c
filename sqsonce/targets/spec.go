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
)

// Spec is a parsed TARGET: what kind of destination, and which.
type Spec struct {
	Kind Kind
	// Dest is the text after "<kind>:", exactly as given.
	Dest string
}

// String is the spec as TARGET spells it.
func (s Spec) String() string { return string(s.Kind) + ":" + s.Dest }

// ErrBadSpec is the cause of every error ParseSpec returns.
var ErrBadSpec = errors.New("invalid target")

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
)

// lazyRegexp is regexp.MustCompile(pattern) on first call.
func lazyRegexp(pattern string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(pattern) })
}

// ParseSpec reads a TARGET value. An error says what is wrong and what the
// value should look like.
func ParseSpec(s string) (Spec, error) {
	kind, dest, ok := strings.Cut(s, ":")
	spec := Spec{Kind: Kind(kind), Dest: dest}
	if !ok || dest == "" {
		return Spec{}, fmt.Errorf("%w %q: want lambda:<function>, sqs:<queue URL>, sns:<topic ARN> or events:<bus>", ErrBadSpec, s)
	}
	bad := func(want string) (Spec, error) {
		return Spec{}, fmt.Errorf("%w %q: %s", ErrBadSpec, s, want)
	}
	switch spec.Kind {
	case Lambda:
		if !lambdaName().MatchString(dest) {
			return bad("want lambda:<function name or ARN>[:<alias or version>]")
		}
	case SQS:
		if !queueURL(dest) {
			return bad("want sqs:https://sqs.<region>.amazonaws.com/<account>/<queue>")
		}
	case SNS:
		if !topicARN().MatchString(dest) {
			return bad("want sns:arn:aws:sns:<region>:<account>:<topic>")
		}
	case Events:
		if !busName().MatchString(dest) && !busARN().MatchString(dest) {
			return bad("want events:<bus name> or events:arn:aws:events:<region>:<account>:event-bus/<name>")
		}
	default:
		return bad(fmt.Sprintf("unknown kind %q: want lambda, sqs, sns or events", kind))
	}
	return spec, nil
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

// FunctionName is the function a lambda target names, without account,
// region or qualifier: what the processor compares with its own name.
func (s Spec) FunctionName() string {
	m := lambdaName().FindStringSubmatch(s.Dest)
	if s.Kind != Lambda || m == nil {
		return ""
	}
	return m[4]
}

// Qualifier is a lambda target's alias or version, "" for none.
func (s Spec) Qualifier() string {
	m := lambdaName().FindStringSubmatch(s.Dest)
	if s.Kind != Lambda || m == nil {
		return ""
	}
	return m[6]
}
