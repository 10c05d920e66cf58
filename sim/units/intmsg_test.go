package units

import (
	"fmt"
	"math"
	"testing"
)

// TestIntMsgIsSprintf: IntMsg writes what fmt.Sprintf writes, on its
// fast path (%d and %% only, as many arguments as verbs) and off it
// (other verbs, a trailing %, too few or too many arguments).
func TestIntMsgIsSprintf(t *testing.T) {
	for _, row := range []struct {
		format string
		args   []int64
	}{
		{"cp=%d does not divide the %d attention heads of each tensor-parallel rank (Ulysses splits heads)", []int64{4, 6}},
		{"micro_batches=%d, pp=%d", []int64{-3, 0}},
		{"%d%d", []int64{math.MinInt64, math.MaxInt64}},
		{"100%% of %d", []int64{12}},
		{"no verb", nil},
		{"", nil},
		{"width %5d", []int64{7}},
		{"a %s", []int64{1}},
		{"trailing %", nil},
		{"missing %d and %d", []int64{1}},
		{"extra %d", []int64{1, 2}},
		{"fp8 layer %d", []int64{8}},
	} {
		as := make([]any, len(row.args))
		for i, a := range row.args {
			as[i] = a
		}
		want := fmt.Sprintf(row.format, as...)
		if got := IntMsg(row.format, row.args...); got != want {
			t.Errorf("IntMsg(%q, %v) = %q, fmt.Sprintf: %q", row.format, row.args, got, want)
		}
		if got := string(AppendIntMsg([]byte("before: "), row.format, row.args...)); got != "before: "+want {
			t.Errorf("AppendIntMsg(%q, %v) = %q, want %q", row.format, row.args, got, "before: "+want)
		}
	}
}
