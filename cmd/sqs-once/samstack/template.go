package samstack

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/sqs-once/sqs-once/internal/suggest"
)

// Template is a CloudFormation template as decoded from JSON: numbers are
// float64, lists []any, objects map[string]any.
type Template map[string]any

// Resource is one entry of a template's Resources section.
type Resource struct {
	Type      string
	Condition string
	// DeletionPolicy and UpdateReplacePolicy as written; empty means
	// CloudFormation's default (Delete for most types).
	DeletionPolicy      string
	UpdateReplacePolicy string
	Properties          map[string]any
	Metadata            map[string]any
}

// Resources returns the template's resources by logical id.
func (t Template) Resources() map[string]Resource {
	out := map[string]Resource{}
	for id, raw := range AsMap(t["Resources"]) {
		r := AsMap(raw)
		out[id] = Resource{
			Type:                AsString(r["Type"]),
			Condition:           AsString(r["Condition"]),
			DeletionPolicy:      AsString(r["DeletionPolicy"]),
			UpdateReplacePolicy: AsString(r["UpdateReplacePolicy"]),
			Properties:          AsMap(r["Properties"]),
			Metadata:            AsMap(r["Metadata"]),
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
	raw := AsMap(t["Parameters"])
	names := make([]string, 0, len(raw))
	for name := range raw {
		names = append(names, name)
	}
	sort.Strings(names)
	out := make([]Parameter, 0, len(names))
	for _, name := range names {
		m := AsMap(raw[name])
		p := Parameter{
			Name:                  name,
			Type:                  AsString(m["Type"]),
			Description:           AsString(m["Description"]),
			AllowedPattern:        AsString(m["AllowedPattern"]),
			ConstraintDescription: AsString(m["ConstraintDescription"]),
			MinValue:              floatPtr(m["MinValue"]),
			MaxValue:              floatPtr(m["MaxValue"]),
			MinLength:             intPtr(m["MinLength"]),
			MaxLength:             intPtr(m["MaxLength"]),
		}
		if d, ok := m["Default"]; ok {
			s := scalarString(d)
			p.Default = &s
		}
		for _, v := range AsSlice(m["AllowedValues"]) {
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
		// CloudFormation compares the value with AllowedValues as strings,
		// and so does Fn::FindInMap with its keys: "30.0" is not "30".
		if len(p.AllowedValues) > 0 && !slices.Contains(p.AllowedValues, value) {
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
	names := make([]string, 0, len(params))
	for _, p := range params {
		names = append(names, p.Name)
	}
	// Sorted: the same misspellings are refused in the same order.
	for _, name := range slices.Sorted(maps.Keys(overrides)) {
		if !known[name] {
			errs = append(errs, NoSuchParameter(name, names))
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

// NoSuchParameter is the refusal of a parameter name that is none of
// known (the template's parameters), naming the one most likely meant when
// one is near enough (suggest.Closest): "parameter ProcesorTimeout: the
// template has no such parameter; did you mean ProcessorTimeout?". The
// try-out's own checks of Name=Value use it too, so that every refusal of
// a name reads alike.
func NoSuchParameter(name string, known []string) error {
	if best, ok := suggest.Closest(name, known); ok {
		return fmt.Errorf("parameter %s: the template has no such parameter; did you mean %s?", name, best)
	}
	return fmt.Errorf("parameter %s: the template has no such parameter", name)
}

// Conditions evaluates the template's Conditions with the given parameter
// values.
func (t Template) Conditions(values map[string]string) (map[string]bool, error) {
	r := NewResolver(t, values)
	out := map[string]bool{}
	for name := range AsMap(t["Conditions"]) {
		b, err := r.Condition(name)
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
	r := NewResolver(t, values)
	rules := AsMap(t["Rules"])
	names := make([]string, 0, len(rules))
	for name := range rules {
		names = append(names, name)
	}
	sort.Strings(names)
	var errs []error
	for _, name := range names {
		rule := AsMap(rules[name])
		if cond, ok := rule["RuleCondition"]; ok {
			applies, err := r.Bool(cond)
			if err != nil {
				errs = append(errs, fmt.Errorf("rule %s: %w", name, err))
				continue
			}
			if !applies {
				continue
			}
		}
		for _, a := range AsSlice(rule["Assertions"]) {
			am := AsMap(a)
			ok, err := r.Bool(am["Assert"])
			if err != nil {
				errs = append(errs, fmt.Errorf("rule %s: %w", name, err))
				continue
			}
			if !ok {
				desc := AsString(am["AssertDescription"])
				if desc == "" {
					desc = "assertion failed"
				}
				errs = append(errs, fmt.Errorf("rule %s: %s", name, desc))
			}
		}
	}
	return errors.Join(errs...)
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
