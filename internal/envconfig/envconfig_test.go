package envconfig

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestReaderNamesEveryBadVariable(t *testing.T) {
	t.Parallel()
	r := NewReader(Map(map[string]string{
		"COUNT":   "ten",
		"RATE":    "NaN",
		"WINDOW":  "-5",
		"MODE":    "sometimes",
		"BLANK":   "  ",
		"GOOD":    " 7 ",
		"SECONDS": "1.5",
	}))
	if got := r.Int("COUNT", 3, 0, 100); got != 3 {
		t.Errorf("bad Int should fall back to the default, got %d", got)
	}
	r.Float("RATE", 2, 1, 10)
	r.Seconds("WINDOW", time.Minute, 0, time.Hour)
	r.OneOf("MODE", "retry", "retry", "drop")
	r.Required("MISSING")
	r.Required("BLANK")
	if got := r.Int("GOOD", 0, 0, 10); got != 7 {
		t.Errorf("Int(GOOD) = %d, want 7", got)
	}
	if got := r.Seconds("SECONDS", 0, 0, time.Hour); got != 1500*time.Millisecond {
		t.Errorf("Seconds(SECONDS) = %v, want 1.5s", got)
	}

	err := r.Err()
	for _, name := range []string{"COUNT", "RATE", "WINDOW", "MODE", "MISSING", "BLANK"} {
		if err == nil || !strings.Contains(err.Error(), "environment variable "+name+":") {
			t.Errorf("error %v does not name %s", err, name)
		}
	}
	if strings.Contains(err.Error(), "GOOD") || strings.Contains(err.Error(), "SECONDS") {
		t.Errorf("error names a good variable: %v", err)
	}
	var ve *VarError
	if !errors.As(err, &ve) {
		t.Errorf("errors.As(*VarError) failed for %v", err)
	}
}

func TestReaderDefaultsWhenUnset(t *testing.T) {
	t.Parallel()
	r := NewReader(Map(nil))
	if r.String("S", "d") != "d" || r.Int("I", 4, 0, 9) != 4 || r.Float("F", 2.5, 0, 9) != 2.5 ||
		r.Seconds("D", time.Second, 0, time.Hour) != time.Second || r.OneOf("O", "a", "a", "b") != "a" {
		t.Error("an unset variable did not yield its default")
	}
	if err := r.Err(); err != nil {
		t.Errorf("unset optional variables reported %v", err)
	}
}

// TestRangesAreWrittenAsTyped: an error states its range the way the docs
// and the template do (31622400, not 3.16224e+07), so a user can find it.
func TestRangesAreWrittenAsTyped(t *testing.T) {
	t.Parallel()
	r := NewReader(Map(map[string]string{"WINDOW": "31622401", "RATE": "0.25", "COUNT": "2000000"}))
	r.Seconds("WINDOW", time.Hour, time.Second, 366*24*time.Hour)
	r.Float("RATE", 2, 0.5, 1e6)
	r.Int("COUNT", 0, 0, 1_000_000)
	for _, want := range []string{
		`environment variable WINDOW: "31622401" is not a number from 1 to 31622400`,
		`environment variable RATE: "0.25" is not a number from 0.5 to 1000000`,
		`environment variable COUNT: "2000000" is not a whole number from 0 to 1000000`,
	} {
		if err := r.Err(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v\nwant a line %s", err, want)
		}
	}
}
