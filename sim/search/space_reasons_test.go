package search

import (
	"errors"
	"reflect"
	"testing"
	"unsafe"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// TestReasonOf: a refusal's class is its message (without the path)
// with every run of digits written N, wherever the run stands, but for
// a dtype's name (fp8, bf16, MXFP8, float8, int4). A goroutine's
// reasons give the same class, and the refusals of one class share the
// string the first made.
func TestReasonOf(t *testing.T) {
	var rs reasons
	for _, row := range []struct {
		err  error
		want string
	}{
		{&units.Error{Path: "parallel", Msg: "the interleaved schedule needs micro_batches divisible by pp (micro_batches=30, pp=4)"},
			"the interleaved schedule needs micro_batches divisible by pp (micro_batches=N, pp=N)"},
		{&units.Error{Msg: "12 heads"}, "N heads"},
		{&units.Error{Msg: "fp8 layer 2048"}, "fp8 layer N"},
		{&units.Error{Msg: "a Transformer Engine fp8 GEMM (assert_dim_for_fp8_exec), got 126 rows"}, "a Transformer Engine fp8 GEMM (assert_dim_for_fp8_exec), got N rows"},
		{&units.Error{Msg: "MXFP8 blocks of 32, bf16 and int4 in stage0.mb3"}, "MXFP8 blocks of N, bf16 and int4 in stageN.mbN"},
		{&units.Error{Msg: "float8 under tp=8"}, "float8 under tp=N"},
		{&units.Error{Msg: "-1 and 1.5"}, "-N and N.N"},
		{&units.Error{Msg: ""}, ""},
		{errors.New("tp=3 of 64"), "tp=N of N"},
	} {
		if got := reasonOf(row.err); got != row.want {
			t.Errorf("reasonOf(%q) = %q, want %q", row.err, got, row.want)
		}
		first := rs.of(row.err)
		if again := rs.of(row.err); first != row.want || unsafe.StringData(again) != unsafe.StringData(first) {
			t.Errorf("reasons.of(%q) = %q, want %q, one string", row.err, first, row.want)
		}
	}
}

// TestLayoutRefusals: a lowering's refusal of its layout
// (core.LayoutError, of a profile or of a shape) rejects the layouts
// lowered with it and counts them by reason; any other lowering error is
// the search's, whatever else refused.
func TestLayoutRefusals(t *testing.T) {
	refuse := func(msg string) error { return &core.LayoutError{Err: &units.Error{Path: "layers.0.mlp", Msg: msg}} }
	bad := &units.Error{Path: "layers.0", Msg: "layers do not chain"}
	// Four layouts: profiles 0, 0, 1, 1; shapes 0, 1, 2, 3.
	profileAt, shapeAt := []int32{0, 0, 1, 1}, []int32{0, 1, 2, 3}
	for _, row := range []struct {
		name       string
		errs, serr []error
		refused    []bool
		counts     map[string]int
		err        error
	}{
		{"none", []error{nil, nil}, []error{nil, nil, nil, nil}, nil, map[string]int{}, nil},
		{"a profile", []error{nil, refuse("shard of 712")}, []error{nil, nil, nil, nil},
			[]bool{false, false, true, true}, map[string]int{"shard of N": 2}, nil},
		{"a shape", []error{nil, nil}, []error{nil, refuse("shard of 712"), nil, nil},
			[]bool{false, true, false, false}, map[string]int{"shard of N": 1}, nil},
		{"both", []error{refuse("width 520"), nil}, []error{nil, nil, refuse("shard of 344"), nil},
			[]bool{true, true, true, false}, map[string]int{"width N": 2, "shard of N": 1}, nil},
		{"a model's error", []error{refuse("width 520"), bad}, []error{nil, nil, nil, nil}, nil, map[string]int{}, bad},
		{"a shape's model error", []error{nil, nil}, []error{refuse("shard of 712"), nil, nil, bad}, nil, map[string]int{}, bad},
	} {
		counts := map[string]int{}
		refused, n, err := layoutRefusals(row.errs, row.serr, profileAt, shapeAt, counts)
		if err != row.err {
			t.Errorf("%s: error %v, want %v", row.name, err, row.err)
		}
		want := 0
		for _, c := range row.counts {
			want += c
		}
		if !reflect.DeepEqual(refused, row.refused) || n != want || !reflect.DeepEqual(counts, row.counts) {
			t.Errorf("%s: refused %v (%d), counts %v; want %v (%d), %v", row.name, refused, n, counts, row.refused, want, row.counts)
		}
	}
}
