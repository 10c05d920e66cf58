package search

import (
	"errors"
	"testing"

	"github.com/memsh/memsh/sim/units"
)

// TestReasonOf: a refusal's class is its message (without the path)
// with every run of digits written N, wherever the run stands.
func TestReasonOf(t *testing.T) {
	for _, row := range []struct {
		err  error
		want string
	}{
		{&units.Error{Path: "parallel", Msg: "the interleaved schedule needs micro_batches divisible by pp (micro_batches=30, pp=4)"},
			"the interleaved schedule needs micro_batches divisible by pp (micro_batches=N, pp=N)"},
		{&units.Error{Msg: "12 heads"}, "N heads"},
		{&units.Error{Msg: "fp8 layer 2048"}, "fpN layer N"},
		{&units.Error{Msg: "-1 and 1.5"}, "-N and N.N"},
		{&units.Error{Msg: ""}, ""},
		{errors.New("tp=3 of 64"), "tp=N of N"},
	} {
		if got := reasonOf(row.err); got != row.want {
			t.Errorf("reasonOf(%q) = %q, want %q", row.err, got, row.want)
		}
	}
}
