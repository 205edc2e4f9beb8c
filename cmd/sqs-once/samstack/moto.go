package samstack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// forMoto returns a copy of t that moto_server's CloudFormation turns into
// what CloudFormation would, and the rewrites it made.
//
// moto 5.2 turns the value of a Number parameter into an integer wherever it
// is referenced. CloudFormation passes it as a string and converts it only
// where a property's schema wants a number. Two places in a template break:
// a Fn::FindInMap key (moto looks up the integer and fails with a server
// error) and a Lambda environment variable (moto stores a number, which the
// Lambda API cannot return as the string it is). In both, Ref P becomes
// Fn::Sub "${P}", which CloudFormation evaluates to the same string.
func forMoto(t Template) (Template, []Adaptation) {
	var c Template
	raw, _ := json.Marshal(t)
	_ = json.Unmarshal(raw, &c)

	numbers := map[string]bool{}
	for _, p := range c.Parameters() {
		if p.Type == "Number" {
			numbers[p.Name] = true
		}
	}
	asSub := func(v any) (any, string, bool) {
		fn, args, _ := Intrinsic(v)
		if fn != "Ref" || !numbers[AsString(args)] {
			return v, "", false
		}
		return map[string]any{"Fn::Sub": "${" + AsString(args) + "}"}, AsString(args), true
	}

	var out []Adaptation
	resources := AsMap(c["Resources"])
	ids := make([]string, 0, len(resources))
	for id := range resources {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		r := AsMap(resources[id])
		var keys []string
		walk(r, func(m map[string]any) {
			args := AsSlice(m["Fn::FindInMap"])
			for i, a := range args {
				if s, name, ok := asSub(a); ok {
					args[i] = s
					keys = append(keys, name)
				}
			}
		})
		if len(keys) > 0 {
			out = append(out, Adaptation{Rewritten, id, "Fn::FindInMap", "key Ref " + strings.Join(keys, ", ") +
				" written as Fn::Sub: moto_server makes Number parameters integers, which match no mapping key"})
		}
		if AsString(r["Type"]) != "AWS::Lambda::Function" {
			continue
		}
		vars := AsMap(AsMap(AsMap(r["Properties"])["Environment"])["Variables"])
		var rewritten []string
		for name, v := range vars {
			// The Ref may sit inside Fn::If or Fn::Join; the value is a string
			// whichever branch CloudFormation takes.
			changed := false
			if s, _, ok := asSub(v); ok {
				vars[name], changed = s, true
			}
			walk(v, func(m map[string]any) {
				for k, child := range m {
					if s, _, ok := asSub(child); ok {
						m[k], changed = s, true
					}
				}
				for _, child := range m {
					list := AsSlice(child)
					for i, item := range list {
						if s, _, ok := asSub(item); ok {
							list[i], changed = s, true
						}
					}
				}
			})
			if changed {
				rewritten = append(rewritten, name)
			}
		}
		if len(rewritten) > 0 {
			sort.Strings(rewritten)
			out = append(out, Adaptation{Rewritten, id, "Environment.Variables", strings.Join(rewritten, ", ") +
				": Ref to a Number parameter written as Fn::Sub, so moto_server stores the string CloudFormation would"})
		}
	}
	return c, out
}

// withoutNoValue returns a copy of t without the list items that Fn::If
// makes AWS::NoValue with the parameter values res has, and the rewrites it
// made. CloudFormation leaves such an item out of its list; moto_server keeps
// it as a null, and then fails, e.g. on a null in a role's Policies (SAM's
// conditional policies are written this way).
func withoutNoValue(t Template, res *Resolver) (Template, []Adaptation, error) {
	var c Template
	raw, _ := json.Marshal(t)
	_ = json.Unmarshal(raw, &c)
	isNoValue := func(v any) bool {
		fn, args, _ := Intrinsic(v)
		return fn == "Ref" && AsString(args) == "AWS::NoValue"
	}
	var firstErr error
	var filter func(v any) (any, int)
	filter = func(v any) (any, int) {
		n := 0
		switch x := v.(type) {
		case map[string]any:
			for k, child := range x {
				var m int
				x[k], m = filter(child)
				n += m
			}
		case []any:
			out := x[:0]
			for _, item := range x {
				if fn, args, _ := Intrinsic(item); fn == "Fn::If" {
					if a := AsSlice(args); len(a) == 3 && (isNoValue(a[1]) || isNoValue(a[2])) {
						b, err := res.Condition(AsString(a[0]))
						if err != nil {
							if firstErr == nil {
								firstErr = err
							}
						} else if (b && isNoValue(a[1])) || (!b && isNoValue(a[2])) {
							n++
							continue
						}
					}
				}
				item, m := filter(item)
				n += m
				out = append(out, item)
			}
			return out, n
		}
		return v, n
	}
	var out []Adaptation
	resources := AsMap(c["Resources"])
	ids := make([]string, 0, len(resources))
	for id := range resources {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		r, n := filter(resources[id])
		resources[id] = r
		if n > 0 {
			out = append(out, Adaptation{Rewritten, id, "", fmt.Sprintf("%d list item(s) that Fn::If makes AWS::NoValue left out, "+
				"as CloudFormation does: moto_server would keep each as a null", n)})
		}
	}
	if firstErr != nil {
		return nil, nil, firstErr
	}
	return c, out, nil
}

// walk calls fn on every object inside v.
func walk(v any, fn func(map[string]any)) {
	switch x := v.(type) {
	case map[string]any:
		fn(x)
		for _, child := range x {
			walk(child, fn)
		}
	case []any:
		for _, child := range x {
			walk(child, fn)
		}
	}
}

// reconcile compares the created stack with the template: it applies through
// the service APIs the properties moto_server's CloudFormation drops and the
// services support, reports those it cannot, and disables the event source
// mappings (see Deploy). res resolves the template's values with the stack's
// parameters.
func reconcile(ctx context.Context, awsCfg aws.Config, st *Stack, res *Resolver) ([]Adaptation, error) {
	r := &reconciler{
		st:     st,
		res:    res,
		ddb:    dynamodb.NewFromConfig(awsCfg),
		lambda: lambda.NewFromConfig(awsCfg),
		sqs:    sqs.NewFromConfig(awsCfg),
	}
	resources := st.Template.Resources()
	ids := make([]string, 0, len(resources))
	for id := range resources {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		tr := resources[id]
		if tr.Condition != "" {
			created, err := res.Condition(tr.Condition)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", id, err)
			}
			if !created {
				continue
			}
		}
		deployed, ok := st.Resources[id]
		if !ok {
			r.add(Missing, id, "", "not created: moto_server's CloudFormation does not support "+tr.Type)
			continue
		}
		var err error
		switch tr.Type {
		case "AWS::DynamoDB::Table":
			err = r.table(ctx, id, deployed.PhysicalID, tr.Properties)
		case "AWS::SQS::Queue":
			err = r.queue(ctx, id, deployed.PhysicalID, tr.Properties)
		case "AWS::Lambda::Function":
			err = r.function(ctx, id, tr.Properties)
		case "AWS::Lambda::EventSourceMapping":
			err = r.disableMapping(ctx, id, deployed.PhysicalID)
		}
		if err != nil {
			return nil, err
		}
	}
	// Read the mappings again: they are disabled now.
	for id, fn := range st.Functions {
		sources, err := eventSources(ctx, r.lambda, fn, true)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", id, err)
		}
		fn.EventSources = sources
		st.Functions[id] = fn
	}
	return r.out, nil
}

type reconciler struct {
	st     *Stack
	res    *Resolver
	ddb    *dynamodb.Client
	lambda *lambda.Client
	sqs    *sqs.Client
	out    []Adaptation
}

func (r *reconciler) add(kind AdaptationKind, id, prop, detail string) {
	r.out = append(r.out, Adaptation{kind, id, prop, detail})
}

func (r *reconciler) table(ctx context.Context, id, name string, props map[string]any) error {
	if spec := AsMap(props["TimeToLiveSpecification"]); spec != nil {
		attr, errA := r.res.String(spec["AttributeName"])
		enabled, errE := r.res.Bool(spec["Enabled"])
		if err := errors.Join(errA, errE); err != nil {
			r.add(Missing, id, "TimeToLiveSpecification", "not resolvable locally: "+err.Error())
		} else if enabled {
			out, err := r.ddb.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(name)})
			if err != nil {
				return fmt.Errorf("%s: describe TTL: %w", id, err)
			}
			d := out.TimeToLiveDescription
			if d == nil || d.TimeToLiveStatus != ddbtypes.TimeToLiveStatusEnabled || aws.ToString(d.AttributeName) != attr {
				if _, err := r.ddb.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
					TableName:               aws.String(name),
					TimeToLiveSpecification: &ddbtypes.TimeToLiveSpecification{AttributeName: aws.String(attr), Enabled: aws.Bool(true)},
				}); err != nil {
					return fmt.Errorf("%s: update TTL: %w", id, err)
				}
				r.add(Applied, id, "TimeToLiveSpecification", fmt.Sprintf("moto_server's CloudFormation ignores it; set with UpdateTimeToLive (attribute %s)", attr))
			}
		}
	}
	if spec := AsMap(props["PointInTimeRecoverySpecification"]); spec != nil {
		want, err := r.res.Bool(spec["PointInTimeRecoveryEnabled"])
		if err != nil {
			r.add(Missing, id, "PointInTimeRecoverySpecification", "not resolvable locally: "+err.Error())
		} else {
			out, err := r.ddb.DescribeContinuousBackups(ctx, &dynamodb.DescribeContinuousBackupsInput{TableName: aws.String(name)})
			if err != nil {
				return fmt.Errorf("%s: describe continuous backups: %w", id, err)
			}
			var got bool
			if d := out.ContinuousBackupsDescription; d != nil && d.PointInTimeRecoveryDescription != nil {
				got = d.PointInTimeRecoveryDescription.PointInTimeRecoveryStatus == ddbtypes.PointInTimeRecoveryStatusEnabled
			}
			if got != want {
				if _, err := r.ddb.UpdateContinuousBackups(ctx, &dynamodb.UpdateContinuousBackupsInput{
					TableName:                        aws.String(name),
					PointInTimeRecoverySpecification: &ddbtypes.PointInTimeRecoverySpecification{PointInTimeRecoveryEnabled: aws.Bool(want)},
				}); err != nil {
					return fmt.Errorf("%s: update continuous backups: %w", id, err)
				}
				r.add(Applied, id, "PointInTimeRecoverySpecification", fmt.Sprintf("moto_server's CloudFormation ignores it; set with UpdateContinuousBackups (enabled %t)", want))
			}
		}
	}
	if spec := AsMap(props["SSESpecification"]); spec != nil {
		if want, err := r.res.Bool(spec["SSEEnabled"]); err == nil && want {
			out, err := r.ddb.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
			if err != nil {
				return fmt.Errorf("%s: describe table: %w", id, err)
			}
			if d := out.Table.SSEDescription; d == nil || (d.Status != ddbtypes.SSEStatusEnabled && d.Status != ddbtypes.SSEStatusEnabling) {
				r.add(Missing, id, "SSESpecification", "moto_server's CloudFormation drops it and its UpdateTable cannot set it; check the translated template")
			}
		}
	}
	return nil
}

func (r *reconciler) queue(ctx context.Context, id, url string, props map[string]any) error {
	if _, ok := props["RedriveAllowPolicy"]; !ok {
		return nil
	}
	out, err := r.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(url),
		// All, not RedriveAllowPolicy by name: moto_server rejects the name.
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll},
	})
	if err != nil {
		return fmt.Errorf("%s: queue attributes: %w", id, err)
	}
	if out.Attributes[string(sqstypes.QueueAttributeNameRedriveAllowPolicy)] == "" {
		r.add(Missing, id, "RedriveAllowPolicy", "moto_server does not report it (nor enforce it); check the translated template")
	}
	return nil
}

func (r *reconciler) function(ctx context.Context, id string, props map[string]any) error {
	fn := r.st.Functions[id]
	if v, ok := props["Architectures"]; ok {
		want, err := r.res.Value(v)
		var wantS []string
		for _, a := range AsSlice(want) {
			wantS = append(wantS, AsString(a))
		}
		if err != nil || !slices.Equal(wantS, fn.Architectures) {
			r.add(Missing, id, "Architectures", fmt.Sprintf("moto_server's CloudFormation ignores it (reports %v); check the translated template", fn.Architectures))
		}
	}
	if _, ok := props["LoggingConfig"]; ok && fn.Logging.Format == "" {
		r.add(Missing, id, "LoggingConfig", "moto_server's Lambda has no logging configuration; check the translated template")
	}
	if v, ok := props["TracingConfig"]; ok {
		want, err := r.res.String(AsMap(v)["Mode"])
		out, errC := r.lambda.GetFunctionConfiguration(ctx, &lambda.GetFunctionConfigurationInput{FunctionName: aws.String(fn.Name)})
		if err != nil || errC != nil || out.TracingConfig == nil || string(out.TracingConfig.Mode) != want {
			got := "none"
			if errC == nil && out.TracingConfig != nil {
				got = string(out.TracingConfig.Mode)
			}
			r.add(Missing, id, "TracingConfig", fmt.Sprintf("moto_server's CloudFormation ignores it (reports %s, the template says %s); check the translated template", got, want))
		}
	}
	if v, ok := props["RecursiveLoop"]; ok {
		out, err := r.lambda.GetFunctionRecursionConfig(ctx, &lambda.GetFunctionRecursionConfigInput{FunctionName: aws.String(fn.Name)})
		if err != nil || string(out.RecursiveLoop) != AsString(v) {
			r.add(Missing, id, "RecursiveLoop", "moto_server's Lambda has no recursion configuration; check the translated template")
		}
	}
	return nil
}

func (r *reconciler) disableMapping(ctx context.Context, id, uuid string) error {
	if _, err := r.lambda.UpdateEventSourceMapping(ctx, &lambda.UpdateEventSourceMappingInput{
		UUID:    aws.String(uuid),
		Enabled: aws.Bool(false),
	}); err != nil {
		return fmt.Errorf("%s: disable event source mapping: %w", id, err)
	}
	r.add(Disabled, id, "Enabled", "moto_server would invoke the function in Docker on every SendMessage and count a failed receive; poll the queue yourself (internal/localesm)")
	return nil
}

// nameFIFOQueues returns a copy of t in which each FIFO queue without a
// QueueName (with the parameter values res has) is given the name
// CloudFormation would generate, "<stack>-<logical id>-<id>.fifo", and the
// rewrites it made. CloudFormation ends a generated FIFO queue name with
// ".fifo", as SQS requires; moto_server generates one without it and then
// refuses its own name ("Queue name must end in .fifo for FIFO queues").
func nameFIFOQueues(t Template, res *Resolver, stackName string) (Template, []Adaptation) {
	var c Template
	raw, _ := json.Marshal(t)
	_ = json.Unmarshal(raw, &c)
	// absent says whether a property is missing or AWS::NoValue.
	absent := func(v any) bool {
		for {
			if v == nil {
				return true
			}
			fn, args, _ := Intrinsic(v)
			switch {
			case fn == "Ref" && AsString(args) == "AWS::NoValue":
				return true
			case fn == "Fn::If" && len(AsSlice(args)) == 3:
				b, err := res.Condition(AsString(AsSlice(args)[0]))
				if err != nil {
					return false
				}
				if b {
					v = AsSlice(args)[1]
				} else {
					v = AsSlice(args)[2]
				}
				continue
			}
			return false
		}
	}
	var out []Adaptation
	resources := AsMap(c["Resources"])
	ids := make([]string, 0, len(resources))
	for id := range resources {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		r := AsMap(resources[id])
		props := AsMap(r["Properties"])
		if AsString(r["Type"]) != "AWS::SQS::Queue" || props == nil || !absent(props["QueueName"]) {
			continue
		}
		if fifo := props["FifoQueue"]; absent(fifo) {
			continue
		} else if b, err := res.Bool(fifo); err != nil || !b {
			continue
		}
		suffix := strings.ToUpper(strconv.FormatUint(rand.Uint64(), 36))
		prefix := stackName + "-" + id + "-"
		if max := 80 - len(".fifo") - len(suffix); len(prefix) > max {
			prefix = prefix[:max]
		}
		name := prefix + suffix + ".fifo"
		props["QueueName"] = name
		out = append(out, Adaptation{Rewritten, id, "QueueName", "named " + name + " as CloudFormation names a FIFO queue without a QueueName " +
			"(<stack>-<logical id>-<id>.fifo): moto_server would generate a name without .fifo and refuse it"})
	}
	return c, out
}
