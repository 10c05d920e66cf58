package builtins

import (
	"testing"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/sim/units"
	"go.starlark.net/starlark"
)

func TestDTypes(t *testing.T) {
	runEvalCases(t, []evalCase{
		{expr: "fp32.bits", want: "32"},
		{expr: "tf32.bits", want: "32"},
		{expr: "bf16.bits", want: "16"},
		{expr: "fp16.bits", want: "16"},
		{expr: "fp8.bits", want: "8"},
		{expr: "int8.bits", want: "8"},
		{expr: "nf4.bits", want: "4"},
		{expr: "bf16.name", want: `"bf16"`},
		{expr: "type(bf16)", want: `"dtype"`},
		{expr: "str(fp16)", want: `"fp16"`},
		{expr: "bf16 == bf16", want: "True"},
		{expr: "bf16 != fp16", want: "True"},
		{expr: "{bf16: 1}[bf16]", want: "1"},
		{expr: "dir(bf16)", want: `["bits", "name"]`},
		{expr: "bf16.size", err: "dtype has no .size field or method"},
		{expr: "bf16 < fp16", err: "not supported"},
	})
}

func TestDTypeUnpack(t *testing.T) {
	for _, tc := range []struct {
		in   starlark.Value
		want units.DType
		err  string
	}{
		{host.NewDType(units.BF16), units.BF16, ""},
		{starlark.String("bfloat16"), units.BF16, ""},
		{starlark.String("fp32"), units.FP32, ""},
		{starlark.String("fp7"), 0, `unknown dtype "fp7"`},
		{starlark.MakeInt(16), 0, "got int, want dtype or string"},
	} {
		var d host.DType
		err := d.Unpack(tc.in)
		if tc.err != "" {
			if err == nil || err.Error()[:len(tc.err)] != tc.err {
				t.Errorf("Unpack(%v) error = %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || d.SimDType() != tc.want {
			t.Errorf("Unpack(%v) = %v, %v; want %v", tc.in, d, err, tc.want)
		}
	}
}
