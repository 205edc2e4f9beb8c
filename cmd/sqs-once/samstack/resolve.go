package samstack

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Resolver evaluates a template's intrinsic functions as CloudFormation
// would for given parameter values, without an endpoint: Ref (to a
// parameter, a pseudo parameter, or a resource through Resource),
// Fn::If, Fn::Sub, Fn::Join, Fn::Split, Fn::Select, Fn::FindInMap, the
// condition functions
// Fn::Equals, Fn::Not, Fn::And, Fn::Or and Condition, and Fn::Contains as
// Rules use it. Anything else (Fn::GetAtt, Fn::ImportValue, ...) is an error
// that names it. It is the one evaluator behind Conditions, the Rules check,
// Deploy's reconciliation and the template tests.
type Resolver struct {
	// Pseudo holds pseudo parameter values by name (AWS::StackName,
	// AWS::Region, ...); a Ref to one not here cannot be resolved.
	Pseudo map[string]string
	// Resource returns what a Ref to the logical id yields (its physical
	// id); nil, or ok false, and the Ref cannot be resolved.
	Resource func(logicalID string) (string, bool)

	params     map[string]string
	mappings   map[string]any
	conditions map[string]any
	memo       map[string]bool
	visiting   map[string]bool
}

// NewResolver returns a resolver of t's intrinsic functions with the given
// parameter values (as ParameterValues returns them).
func NewResolver(t Template, params map[string]string) *Resolver {
	return &Resolver{
		params:     params,
		mappings:   AsMap(t["Mappings"]),
		conditions: AsMap(t["Conditions"]),
		memo:       map[string]bool{},
		visiting:   map[string]bool{},
	}
}

// Value resolves v: scalars stay as they are, lists and objects are resolved
// member by member, an intrinsic function is evaluated.
func (r *Resolver) Value(v any) (any, error) {
	switch x := v.(type) {
	case nil, string, float64, bool:
		return x, nil
	case []any:
		out := make([]any, len(x))
		for i, item := range x {
			y, err := r.Value(item)
			if err != nil {
				return nil, err
			}
			out[i] = y
		}
		return out, nil
	}
	fn, args, ok := Intrinsic(v)
	if !ok {
		m := AsMap(v)
		if m == nil {
			return nil, fmt.Errorf("%T is not a template value", v)
		}
		out := make(map[string]any, len(m))
		for k, item := range m {
			y, err := r.Value(item)
			if err != nil {
				return nil, err
			}
			out[k] = y
		}
		return out, nil
	}
	switch fn {
	case "Ref":
		return r.ref(AsString(args))
	case "Fn::If":
		a := AsSlice(args)
		if len(a) != 3 {
			return nil, fmt.Errorf("Fn::If needs a condition and two values: %s", jsonText(args))
		}
		b, err := r.Condition(AsString(a[0]))
		if err != nil {
			return nil, err
		}
		if b {
			return r.Value(a[1])
		}
		return r.Value(a[2])
	case "Fn::Sub":
		return r.sub(args)
	case "Fn::Join":
		a := AsSlice(args)
		if len(a) != 2 {
			return nil, fmt.Errorf("Fn::Join needs a delimiter and a list: %s", jsonText(args))
		}
		list, err := r.Value(a[1])
		if err != nil {
			return nil, err
		}
		parts := make([]string, 0, len(AsSlice(list)))
		for _, p := range AsSlice(list) {
			s, err := scalar(p)
			if err != nil {
				return nil, fmt.Errorf("Fn::Join: %w", err)
			}
			parts = append(parts, s)
		}
		return strings.Join(parts, AsString(a[0])), nil
	case "Fn::Split":
		a := AsSlice(args)
		if len(a) != 2 || AsString(a[0]) == "" {
			return nil, fmt.Errorf("Fn::Split needs a delimiter and a string: %s", jsonText(args))
		}
		s, err := r.String(a[1])
		if err != nil {
			return nil, fmt.Errorf("Fn::Split: %w", err)
		}
		parts := strings.Split(s, AsString(a[0]))
		out := make([]any, len(parts))
		for i, p := range parts {
			out[i] = p
		}
		return out, nil
	case "Fn::Select":
		a := AsSlice(args)
		if len(a) != 2 {
			return nil, fmt.Errorf("Fn::Select needs an index and a list: %s", jsonText(args))
		}
		is, err := r.String(a[0])
		if err != nil {
			return nil, fmt.Errorf("Fn::Select: %w", err)
		}
		i, err := strconv.Atoi(is)
		if err != nil {
			return nil, fmt.Errorf("Fn::Select: index %q is not a whole number", is)
		}
		list, err := r.Value(a[1])
		if err != nil {
			return nil, fmt.Errorf("Fn::Select: %w", err)
		}
		l := AsSlice(list)
		if i < 0 || i >= len(l) {
			// CloudFormation fails the stack operation, not only the branch.
			return nil, fmt.Errorf("Fn::Select: index %d out of range of %s", i, jsonText(list))
		}
		return l[i], nil
	case "Fn::FindInMap":
		return r.findInMap(args)
	case "Condition", "Fn::Equals", "Fn::Not", "Fn::And", "Fn::Or", "Fn::Contains":
		return r.Bool(v)
	}
	return nil, fmt.Errorf("%s cannot be evaluated without an endpoint", fn)
}

// String resolves v to the string CloudFormation makes of it.
func (r *Resolver) String(v any) (string, error) {
	x, err := r.Value(v)
	if err != nil {
		return "", err
	}
	return scalar(x)
}

// Bool resolves a condition function, a literal boolean, or a value that is
// the string "true" or "false" in any case, as CloudFormation accepts for a
// Boolean property.
func (r *Resolver) Bool(v any) (bool, error) {
	if b, ok := v.(bool); ok {
		return b, nil
	}
	fn, args, _ := Intrinsic(v)
	switch fn {
	case "Condition":
		return r.Condition(AsString(args))
	case "Fn::Equals":
		x, y, err := r.pair(fn, args)
		return err == nil && equal(x, y), err
	case "Fn::Not":
		a := AsSlice(args)
		if len(a) != 1 {
			return false, fmt.Errorf("Fn::Not needs one condition: %s", jsonText(args))
		}
		b, err := r.Bool(a[0])
		return !b, err
	case "Fn::And", "Fn::Or":
		all := fn == "Fn::And"
		for _, c := range AsSlice(args) {
			b, err := r.Bool(c)
			if err != nil {
				return false, err
			}
			if b != all {
				return b, nil
			}
		}
		return all, nil
	case "Fn::Contains":
		list, x, err := r.pair(fn, args)
		if err != nil {
			return false, err
		}
		for _, item := range AsSlice(list) {
			if equal(item, x) {
				return true, nil
			}
		}
		return false, nil
	}
	s, err := r.String(v)
	if err != nil {
		return false, err
	}
	switch {
	case strings.EqualFold(s, "true"):
		return true, nil
	case strings.EqualFold(s, "false"):
		return false, nil
	}
	return false, fmt.Errorf("%s is %q, not true or false", jsonText(v), s)
}

// pair resolves the two arguments of Fn::Equals or Fn::Contains.
func (r *Resolver) pair(fn string, args any) (x, y any, err error) {
	a := AsSlice(args)
	if len(a) != 2 {
		return nil, nil, fmt.Errorf("%s needs two arguments: %s", fn, jsonText(args))
	}
	if x, err = r.Value(a[0]); err != nil {
		return nil, nil, err
	}
	y, err = r.Value(a[1])
	return x, y, err
}

// Condition evaluates the template's condition of that name.
func (r *Resolver) Condition(name string) (bool, error) {
	if b, ok := r.memo[name]; ok {
		return b, nil
	}
	def, ok := r.conditions[name]
	if !ok {
		return false, fmt.Errorf("no condition named %s", name)
	}
	if r.visiting[name] {
		return false, fmt.Errorf("condition %s refers to itself", name)
	}
	r.visiting[name] = true
	defer delete(r.visiting, name)
	b, err := r.Bool(def)
	if err != nil {
		return false, fmt.Errorf("condition %s: %w", name, err)
	}
	r.memo[name] = b
	return b, nil
}

func (r *Resolver) ref(name string) (any, error) {
	if v, ok := r.params[name]; ok {
		return v, nil
	}
	if strings.HasPrefix(name, "AWS::") {
		if v, ok := r.Pseudo[name]; ok {
			return v, nil
		}
		return nil, fmt.Errorf("Ref %s: no value for this pseudo parameter", name)
	}
	if r.Resource != nil {
		if v, ok := r.Resource(name); ok {
			return v, nil
		}
	}
	return nil, fmt.Errorf("Ref %s: not a parameter, and no physical id known for it", name)
}

var subVar = regexp.MustCompile(`\$\{([^}!][^}]*)\}`)

// sub evaluates Fn::Sub in both forms: "text" and ["text", {name: value}].
// ${!Literal} stands for ${Literal}.
func (r *Resolver) sub(args any) (any, error) {
	text, vars := AsString(args), map[string]any{}
	if a := AsSlice(args); a != nil {
		if len(a) != 2 {
			return nil, fmt.Errorf("Fn::Sub needs a string and a map: %s", jsonText(args))
		}
		text, vars = AsString(a[0]), AsMap(a[1])
	}
	var firstErr error
	out := subVar.ReplaceAllStringFunc(text, func(m string) string {
		name := m[2 : len(m)-1]
		var v any
		var err error
		switch {
		case vars[name] != nil:
			v, err = r.Value(vars[name])
		case strings.Contains(name, "."):
			err = fmt.Errorf("Fn::Sub ${%s}: Fn::GetAtt cannot be evaluated without an endpoint", name)
		default:
			v, err = r.ref(name)
		}
		var s string
		if err == nil {
			s, err = scalar(v)
		}
		if err != nil && firstErr == nil {
			firstErr = err
		}
		return s
	})
	if firstErr != nil {
		return nil, firstErr
	}
	return strings.ReplaceAll(out, "${!", "${"), nil
}

// findInMap looks a value up as CloudFormation does: both keys are strings,
// compared exactly (a Number parameter "30.0" finds no key "30").
func (r *Resolver) findInMap(args any) (any, error) {
	a := AsSlice(args)
	if len(a) != 3 {
		return nil, fmt.Errorf("Fn::FindInMap needs a map name and two keys: %s", jsonText(args))
	}
	var keys [3]string
	for i, k := range a {
		s, err := r.String(k)
		if err != nil {
			return nil, fmt.Errorf("Fn::FindInMap: %w", err)
		}
		keys[i] = s
	}
	m, ok := r.mappings[keys[0]]
	if !ok {
		return nil, fmt.Errorf("Fn::FindInMap: no mapping %s", keys[0])
	}
	top, ok := AsMap(m)[keys[1]]
	if !ok {
		return nil, fmt.Errorf("Fn::FindInMap: mapping %s has no key %q", keys[0], keys[1])
	}
	v, ok := AsMap(top)[keys[2]]
	if !ok {
		return nil, fmt.Errorf("Fn::FindInMap: mapping %s key %q has no %q", keys[0], keys[1], keys[2])
	}
	return v, nil
}

// equal compares two resolved values as Fn::Equals does: scalars by the
// string CloudFormation makes of them (a Ref to a Number parameter equals
// the literal 0), anything else by its JSON form.
func equal(x, y any) bool {
	sx, errX := scalar(x)
	sy, errY := scalar(y)
	if errX == nil && errY == nil {
		return sx == sy
	}
	return jsonText(x) == jsonText(y)
}

// scalar is the string CloudFormation makes of a resolved scalar.
func scalar(v any) (string, error) {
	switch v.(type) {
	case string, float64, bool:
		return scalarString(v), nil
	}
	return "", fmt.Errorf("%s is not a string, number or boolean", jsonText(v))
}

// Intrinsic splits an intrinsic function {"Fn::X": args} (or {"Ref": name},
// {"Condition": name}) into its name and arguments; ok is false for anything
// else, including an object with several keys.
func Intrinsic(v any) (name string, args any, ok bool) {
	m, isMap := v.(map[string]any)
	if !isMap || len(m) != 1 {
		return "", nil, false
	}
	for k, a := range m {
		name, args = k, a
	}
	if name != "Ref" && name != "Condition" && !strings.HasPrefix(name, "Fn::") {
		return "", nil, false
	}
	return name, args, true
}

// AsMap returns v as a template object, or nil.
func AsMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// AsSlice returns v as a template list, or nil.
func AsSlice(v any) []any {
	s, _ := v.([]any)
	return s
}

// AsString returns v as a string, or "" when it is not one.
func AsString(v any) string {
	s, _ := v.(string)
	return s
}

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
