package core

import (
	"math"
	"strings"
	"testing"
)

// TestBudgetValidate: a budget is a fraction in [0, 1] or positive bytes;
// NaN is no fraction (checkpoint(budget=float("nan")) was taken and chose
// full checkpointing, its note reading "checkpoint(budget=NaN)").
func TestBudgetValidate(t *testing.T) {
	for _, row := range []struct {
		b   Budget
		err string
	}{
		{Budget{Fraction: 0}, ""},
		{Budget{Fraction: 0.5}, ""},
		{Budget{Fraction: 1}, ""},
		{Budget{Bytes: 70 << 30}, ""},
		{Budget{Fraction: math.NaN()}, "a fraction must be in [0, 1] (got NaN)"},
		{Budget{Fraction: math.Inf(1)}, "a fraction must be in [0, 1] (got +Inf)"},
		{Budget{Fraction: -0.1}, "a fraction must be in [0, 1]"},
		{Budget{Fraction: 1.5}, "a fraction must be in [0, 1]"},
		{Budget{Bytes: -1}, "bytes must be positive"},
		{Budget{Bytes: 1 << 30, Fraction: 0.5}, "not given with a fraction"},
	} {
		err := row.b.Validate()
		if row.err == "" && err != nil || row.err != "" && (err == nil || !strings.Contains(err.Error(), row.err)) {
			t.Errorf("%+v: %v, want %q", row.b, err, row.err)
		}
	}
}
