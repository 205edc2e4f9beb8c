package samstack

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Template is a CloudFormation template as decoded from JSON: numbers are
// float64, lists []any, objects map[string]any.
type Template map[string]any

// Resource is one entry of a template's Resources section.
type Resource struct {
	Type       string
	Condition  string
	Properties map[string]any
	Metadata   map[string]any
}

// Resources returns the template's resources by logical id.
func (t Template) Resources() map[string]Resource {
	out := map[string]Resource{}
	for id, raw := range asMap(t["Resources"]) {
		r := asMap(raw)
		out[id] = Resource{
			Type:       asString(r["Type"]),
			Condition:  asString(r["Condition"]),
			Properties: asMap(r["Properties"]),
			Metadata:   asMap(r["Metadata"]),
		}
	}
	return out
}

// Parameter is one entry of a template's Parameters section, with its
// constraints as CloudFormation checks them.
type Parameter struct {
	Name           string
	Type           string
	Description    string
	Default        *string
	AllowedValues  []string
	AllowedPattern string
	// ConstraintDescription is what CloudFormation shows when a value breaks
	// the constraints.
	ConstraintDescription string
	MinValue              *float64
	MaxValue              *float64
	MinLength             *int
	MaxLength             *int
}

// Parameters returns the template's parameters sorted by name.
func (t Template) Parameters() []Parameter {
	raw := asMap(t["Parameters"])
	names := make([]string, 0, len(raw))
	for name := range raw {
		names = append(names, name)
	}
	sort.Strings(names)
	out := make([]Parameter, 0, len(names))
	for _, name := range names {
		m := asMap(raw[name])
		p := Parameter{
			Name:                  name,
			Type:                  asString(m["Type"]),
			Description:           asString(m["Description"]),
			AllowedPattern:        asString(m["AllowedPattern"]),
			ConstraintDescription: asString(m["ConstraintDescription"]),
			MinValue:              floatPtr(m["MinValue"]),
			MaxValue:              floatPtr(m["MaxValue"]),
			MinLength:             intPtr(m["MinLength"]),
			MaxLength:             intPtr(m["MaxLength"]),
		}
		if d, ok := m["Default"]; ok {
			s := scalarString(d)
			p.Default = &s
		}
		for _, v := range asSlice(m["AllowedValues"]) {
			p.AllowedValues = append(p.AllowedValues, scalarString(v))
		}
		out = append(out, p)
	}
	return out
}

// Check reports why value is not acceptable for p, as CloudFormation would
// refuse it, or nil.
func (p Parameter) Check(value string) error {
	if strings.HasPrefix(p.Type, "List<") || p.Type == "CommaDelimitedList" {
		return nil
	}
	if p.Type == "Number" {
		f, err := strconv.ParseFloat(value, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("parameter %s: %q is not a number", p.Name, value)
		}
		if p.MinValue != nil && f < *p.MinValue {
			return fmt.Errorf("parameter %s: %s is below MinValue %g", p.Name, value, *p.MinValue)
		}
		if p.MaxValue != nil && f > *p.MaxValue {
			return fmt.Errorf("parameter %s: %s is above MaxValue %g", p.Name, value, *p.MaxValue)
		}
		if len(p.AllowedValues) > 0 && !slices.ContainsFunc(p.AllowedValues, func(a string) bool {
			af, err := strconv.ParseFloat(a, 64)
			return err == nil && af == f
		}) {
			return fmt.Errorf("parameter %s: %s is not one of %s", p.Name, value, strings.Join(p.AllowedValues, ", "))
		}
		return nil
	}
	if len(p.AllowedValues) > 0 && !slices.Contains(p.AllowedValues, value) {
		return fmt.Errorf("parameter %s: %q is not one of %s", p.Name, value, strings.Join(p.AllowedValues, ", "))
	}
	if p.MinLength != nil && len(value) < *p.MinLength {
		return fmt.Errorf("parameter %s: %q is shorter than MinLength %d", p.Name, value, *p.MinLength)
	}
	if p.MaxLength != nil && len(value) > *p.MaxLength {
		return fmt.Errorf("parameter %s: %q is longer than MaxLength %d", p.Name, value, *p.MaxLength)
	}
	if p.AllowedPattern != "" {
		// CloudFormation matches the pattern against the whole value.
		re, err := regexp.Compile(`^(?:` + p.AllowedPattern + `)$`)
		if err != nil {
			return fmt.Errorf("parameter %s: AllowedPattern cannot be checked here: %v", p.Name, err)
		}
		if !re.MatchString(value) {
			hint := ""
			if p.ConstraintDescription != "" {
				hint = ": " + p.ConstraintDescription
			}
			return fmt.Errorf("parameter %s: %q does not match AllowedPattern %s%s", p.Name, value, p.AllowedPattern, hint)
		}
	}
	return nil
}

// ParameterValues returns the value of every parameter, overrides applied on
// the defaults, after checking each against its constraints and the template's
// Rules. Every problem is reported, each naming its parameter or rule.
func (t Template) ParameterValues(overrides map[string]string) (map[string]string, error) {
	params := t.Parameters()
	values := make(map[string]string, len(params))
	var errs []error
	known := map[string]bool{}
	for _, p := range params {
		known[p.Name] = true
		v, ok := overrides[p.Name]
		if !ok {
			if p.Default == nil {
				errs = append(errs, fmt.Errorf("parameter %s: no value and no Default", p.Name))
				continue
			}
			v = *p.Default
		}
		if err := p.Check(v); err != nil {
			errs = append(errs, err)
			continue
		}
		values[p.Name] = v
	}
	for name := range overrides {
		if !known[name] {
			errs = append(errs, fmt.Errorf("parameter %s: the template has no such parameter", name))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if err := t.checkRules(values); err != nil {
		return nil, err
	}
	return values, nil
}

// Conditions evaluates the template's Conditions with the given parameter
// values.
func (t Template) Conditions(values map[string]string) (map[string]bool, error) {
	e := newEvaluator(t, values)
	out := map[string]bool{}
	for name := range e.conditions {
		b, err := e.condition(name)
		if err != nil {
			return nil, err
		}
		out[name] = b
	}
	return out, nil
}

// checkRules applies the template's Rules section, which CloudFormation checks
// before creating anything and moto_server ignores.
func (t Template) checkRules(values map[string]string) error {
	e := newEvaluator(t, values)
	rules := asMap(t["Rules"])
	names := make([]string, 0, len(rules))
	for name := range rules {
		names = append(names, name)
	}
	sort.Strings(names)
	var errs []error
	for _, name := range names {
		rule := asMap(rules[name])
		if cond, ok := rule["RuleCondition"]; ok {
			applies, err := e.boolean(cond)
			if err != nil {
				errs = append(errs, fmt.Errorf("rule %s: %w", name, err))
				continue
			}
			if !applies {
				continue
			}
		}
		for _, a := range asSlice(rule["Assertions"]) {
			am := asMap(a)
			ok, err := e.boolean(am["Assert"])
			if err != nil {
				errs = append(errs, fmt.Errorf("rule %s: %w", name, err))
				continue
			}
			if !ok {
				desc := asString(am["AssertDescription"])
				if desc == "" {
					desc = "assertion failed"
				}
				errs = append(errs, fmt.Errorf("rule %s: %s", name, desc))
			}
		}
	}
	return errors.Join(errs...)
}

// evaluator computes the condition and rule functions CloudFormation offers
// on parameter values: Fn::Equals, Fn::Not, Fn::And, Fn::Or, Fn::Contains,
// Condition and Ref to a parameter.
type evaluator struct {
	values     map[string]string
	conditions map[string]any
	memo       map[string]bool
	visiting   map[string]bool
}

func newEvaluator(t Template, values map[string]string) *evaluator {
	return &evaluator{values: values, conditions: asMap(t["Conditions"]), memo: map[string]bool{}, visiting: map[string]bool{}}
}

func (e *evaluator) condition(name string) (bool, error) {
	if b, ok := e.memo[name]; ok {
		return b, nil
	}
	def, ok := e.conditions[name]
	if !ok {
		return false, fmt.Errorf("no condition named %s", name)
	}
	if e.visiting[name] {
		return false, fmt.Errorf("condition %s refers to itself", name)
	}
	e.visiting[name] = true
	b, err := e.boolean(def)
	if err != nil {
		return false, fmt.Errorf("condition %s: %w", name, err)
	}
	e.memo[name] = b
	return b, nil
}

func (e *evaluator) boolean(v any) (bool, error) {
	if b, ok := v.(bool); ok {
		return b, nil
	}
	fn, args, err := function(v)
	if err != nil {
		return false, err
	}
	switch fn {
	case "Condition":
		return e.condition(asString(args))
	case "Fn::Equals":
		a := asSlice(args)
		if len(a) != 2 {
			return false, fmt.Errorf("Fn::Equals needs two values")
		}
		x, err := e.value(a[0])
		if err != nil {
			return false, err
		}
		y, err := e.value(a[1])
		return x == y, err
	case "Fn::Not":
		a := asSlice(args)
		if len(a) != 1 {
			return false, fmt.Errorf("Fn::Not needs one condition")
		}
		b, err := e.boolean(a[0])
		return !b, err
	case "Fn::And", "Fn::Or":
		all := fn == "Fn::And"
		for _, c := range asSlice(args) {
			b, err := e.boolean(c)
			if err != nil {
				return false, err
			}
			if b != all {
				return b, nil
			}
		}
		return all, nil
	case "Fn::Contains":
		a := asSlice(args)
		if len(a) != 2 {
			return false, fmt.Errorf("Fn::Contains needs a list and a value")
		}
		x, err := e.value(a[1])
		if err != nil {
			return false, err
		}
		for _, item := range asSlice(a[0]) {
			s, err := e.value(item)
			if err != nil {
				return false, err
			}
			if s == x {
				return true, nil
			}
		}
		return false, nil
	}
	return false, fmt.Errorf("%s cannot be evaluated here", fn)
}

func (e *evaluator) value(v any) (string, error) {
	switch x := v.(type) {
	case string, float64, bool:
		return scalarString(x), nil
	}
	fn, args, err := function(v)
	if err != nil {
		return "", err
	}
	if fn != "Ref" {
		return "", fmt.Errorf("%s cannot be evaluated here", fn)
	}
	name := asString(args)
	val, ok := e.values[name]
	if !ok {
		return "", fmt.Errorf("Ref %s: not a parameter", name)
	}
	return val, nil
}

// function splits an intrinsic function {"Fn::X": args} into its name and
// arguments.
func function(v any) (string, any, error) {
	m, ok := v.(map[string]any)
	if !ok || len(m) != 1 {
		return "", nil, fmt.Errorf("%v is not a single intrinsic function", v)
	}
	var name string
	for k := range m {
		name = k
	}
	return name, m[name], nil
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}

func asString(v any) string {
	s, _ := v.(string)
	return s
}

// scalarString is the string CloudFormation makes of a template scalar.
func scalarString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	case nil:
		return ""
	}
	return fmt.Sprint(v)
}

func floatPtr(v any) *float64 {
	switch x := v.(type) {
	case float64:
		return &x
	case string:
		if f, err := strconv.ParseFloat(x, 64); err == nil {
			return &f
		}
	}
	return nil
}

func intPtr(v any) *int {
	if f := floatPtr(v); f != nil {
		n := int(*f)
		return &n
	}
	return nil
}
