package main

import (
	"math"
	"testing"
)

// TestParseBench reads the figures of each run of each benchmark, custom
// metrics too, without the -GOMAXPROCS suffix; the median is the middle run.
func TestParseBench(t *testing.T) {
	out := `goos: linux
BenchmarkClient/new-2    	    2271	    463778 ns/op	         2.000 ddb-calls/record	         0 sqs-calls/record	   96059 B/op	    1278 allocs/op
BenchmarkClient/new-2    	    2271	    400000 ns/op	         2.000 ddb-calls/record	         0 sqs-calls/record	   96000 B/op	    1270 allocs/op
BenchmarkClient/new-2    	    2271	    500000 ns/op	         2.000 ddb-calls/record	         0 sqs-calls/record	   96100 B/op	    1290 allocs/op
BenchmarkClientFloor-2              	   20228	     54209 ns/op	    7317 B/op	      86 allocs/op
PASS
`
	res := parseBench(out)
	if got := median(res["BenchmarkClient/new"]["ns/op"]); got != 463778 {
		t.Errorf("median ns/op = %v, want 463778", got)
	}
	if got := median(res["BenchmarkClient/new"]["allocs/op"]); got != 1278 {
		t.Errorf("median allocs/op = %v, want 1278", got)
	}
	if got := res["BenchmarkClient/new"]["ddb-calls/record"]; len(got) != 3 || got[0] != 2 {
		t.Errorf("ddb-calls/record = %v, want three 2s", got)
	}
	if got := median(res["BenchmarkClientFloor"]["allocs/op"]); got != 86 {
		t.Errorf("floor allocs/op = %v, want 86", got)
	}
	if got := median(res["BenchmarkClient/duplicate"]["ns/op"]); !math.IsNaN(got) {
		t.Errorf("median of a missing benchmark = %v, want NaN", got)
	}
}
