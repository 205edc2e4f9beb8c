package samstack_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sqs-once/sqs-once/cmd/sqs-once/samstack"
)

// A template as the translator emits it: long-form intrinsics only.
const resolverTemplate = `{
  "Parameters": {"Timeout": {"Type": "Number"}, "Label": {"Type": "String"}},
  "Mappings": {"Visibility": {"5": {"0": 30, "10": 40}}},
  "Conditions": {
    "HasLabel": {"Fn::Not": [{"Fn::Equals": [{"Ref": "Label"}, ""]}]},
    "Short": {"Fn::And": [{"Condition": "HasLabel"}, {"Fn::Equals": [{"Ref": "Timeout"}, 5]}]},
    "Loop": {"Fn::Not": [{"Condition": "Loop"}]}
  }
}`

func TestResolver(t *testing.T) {
	t.Parallel()
	var tmpl samstack.Template
	if err := json.Unmarshal([]byte(resolverTemplate), &tmpl); err != nil {
		t.Fatal(err)
	}
	newResolver := func(params map[string]string) *samstack.Resolver {
		r := samstack.NewResolver(tmpl, params)
		r.Pseudo = map[string]string{"AWS::StackName": "st", "AWS::Region": "eu-west-1"}
		r.Resource = func(id string) (string, bool) { return "phys-" + id, id == "Table" }
		return r
	}
	tests := []struct {
		name   string
		params map[string]string
		in     string // JSON
		want   any
		err    string // in the error, when one is wanted
	}{
		{name: "literal", in: `"x"`, want: "x"},
		{name: "Ref parameter", params: map[string]string{"Timeout": "5"}, in: `{"Ref": "Timeout"}`, want: "5"},
		{name: "Ref pseudo", in: `{"Ref": "AWS::StackName"}`, want: "st"},
		{name: "Ref resource", in: `{"Ref": "Table"}`, want: "phys-Table"},
		{name: "Ref unknown", in: `{"Ref": "Nope"}`, err: "Ref Nope"},
		{name: "Ref unknown pseudo", in: `{"Ref": "AWS::AccountId"}`, err: "AWS::AccountId"},
		{name: "Fn::Sub", params: map[string]string{"Label": "blue"}, in: `{"Fn::Sub": "${AWS::StackName}-${Label}-${!Literal}"}`, want: "st-blue-${Literal}"},
		{name: "Fn::Sub with variables", in: `{"Fn::Sub": ["${A}/${Table}", {"A": {"Ref": "AWS::Region"}}]}`, want: "eu-west-1/phys-Table"},
		{name: "Fn::Sub attribute", in: `{"Fn::Sub": "${Table.Arn}"}`, err: "Fn::GetAtt"},
		{name: "Fn::Join", params: map[string]string{"Timeout": "5"}, in: `{"Fn::Join": ["-", ["a", {"Ref": "Timeout"}, 3]]}`, want: "a-5-3"},
		{name: "Fn::Split", params: map[string]string{"Label": "a:b::c"}, in: `{"Fn::Split": [":", {"Ref": "Label"}]}`, want: []any{"a", "b", "", "c"}},
		{name: "Fn::Select", params: map[string]string{"Label": "a:b"}, in: `{"Fn::Select": [1, {"Fn::Split": [":", {"Ref": "Label"}]}]}`, want: "b"},
		{name: "Fn::Select index from a Ref", params: map[string]string{"Timeout": "1", "Label": "a:b"}, in: `{"Fn::Select": [{"Ref": "Timeout"}, {"Fn::Split": [":", {"Ref": "Label"}]}]}`, want: "b"},
		{name: "Fn::Select out of range", params: map[string]string{"Label": "a:b"}, in: `{"Fn::Select": [2, {"Fn::Split": [":", {"Ref": "Label"}]}]}`, err: "out of range"},
		{name: "Fn::FindInMap", params: map[string]string{"Timeout": "5"}, in: `{"Fn::FindInMap": ["Visibility", {"Ref": "Timeout"}, "10"]}`, want: 40.0},
		{name: "Fn::FindInMap compares keys as strings", params: map[string]string{"Timeout": "5.0"}, in: `{"Fn::FindInMap": ["Visibility", {"Ref": "Timeout"}, "0"]}`, err: `no key "5.0"`},
		{name: "Fn::If", params: map[string]string{"Label": "x", "Timeout": "5"}, in: `{"Fn::If": ["Short", "yes", "no"]}`, want: "yes"},
		{name: "Fn::If other branch", params: map[string]string{"Label": "", "Timeout": "5"}, in: `{"Fn::If": ["Short", "yes", "no"]}`, want: "no"},
		{name: "condition refers to itself", in: `{"Fn::If": ["Loop", "yes", "no"]}`, err: "refers to itself"},
		{name: "object resolved member by member", params: map[string]string{"Label": "x"}, in: `{"A": {"Ref": "Label"}, "B": [1, {"Ref": "Label"}]}`, want: map[string]any{"A": "x", "B": []any{1.0, "x"}}},
		{name: "GetAtt", in: `{"Fn::GetAtt": ["Table", "Arn"]}`, err: "Fn::GetAtt cannot be evaluated"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var in any
			if err := json.Unmarshal([]byte(tt.in), &in); err != nil {
				t.Fatal(err)
			}
			got, err := newResolver(tt.params).Value(in)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Value(%s) = %v, %v; want an error with %q", tt.in, got, err, tt.err)
				}
				return
			}
			if err != nil || !jsonEqual(got, tt.want) {
				t.Errorf("Value(%s) = %#v, %v; want %#v", tt.in, got, err, tt.want)
			}
		})
	}

	t.Run("Bool", func(t *testing.T) {
		t.Parallel()
		r := newResolver(map[string]string{"Label": "TRUE"})
		for in, want := range map[string]bool{`true`: true, `"false"`: false, `{"Ref": "Label"}`: true, `{"Condition": "HasLabel"}`: true} {
			var v any
			if err := json.Unmarshal([]byte(in), &v); err != nil {
				t.Fatal(err)
			}
			if got, err := r.Bool(v); err != nil || got != want {
				t.Errorf("Bool(%s) = %v, %v; want %v", in, got, err, want)
			}
		}
		if _, err := r.Bool("maybe"); err == nil {
			t.Error(`Bool("maybe") is not an error`)
		}
	})
}
