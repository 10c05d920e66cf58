package models

import (
	"reflect"
	"strings"
	"testing"

	"go.starlark.net/starlark"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// TestResidualFP32AndToParamsDtype: residual(fp32=True) is core.Residual
// with FP32 (the Mamba blocks' residual_in_fp32), to_params_dtype() is
// nn.ToParams, and moe(router_name=) names the router; bad arguments are
// errors naming them.
func TestResidualFP32AndToParamsDtype(t *testing.T) {
	fns := map[string]func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error){}
	for _, b := range append(LayerBuiltins(), ExtraLayerBuiltins()...) {
		fns[b.Name] = b.Fn
	}
	thread := &starlark.Thread{}
	norm, err := fns["rmsnorm"](thread, starlark.NewBuiltin("rmsnorm", nil), starlark.Tuple{starlark.MakeInt(8)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kw := func(k string, v starlark.Value) []starlark.Tuple { return []starlark.Tuple{{starlark.String(k), v}} }
	ints := func(xs ...int) starlark.Tuple {
		var t starlark.Tuple
		for _, x := range xs {
			t = append(t, starlark.MakeInt(x))
		}
		return t
	}
	for _, tc := range []struct {
		builtin string
		args    starlark.Tuple
		kwargs  []starlark.Tuple
		want    core.Layer
		err     string
	}{
		{"residual", starlark.Tuple{norm}, nil, &core.Residual{Layer: &nn.Norm{Dim: 8, RMS: true}}, ""},
		{"residual", starlark.Tuple{norm}, kw("fp32", starlark.True), &core.Residual{Layer: &nn.Norm{Dim: 8, RMS: true}, FP32: true}, ""},
		{"residual", starlark.Tuple{norm}, kw("fp32", starlark.MakeInt(1)), nil, "fp32"},
		{"to_params_dtype", nil, nil, &nn.ToParams{}, ""},
		{"to_params_dtype", ints(1), nil, nil, "to_params_dtype"},
		{"moe", ints(8, 16, 4, 2), kw("router_name", starlark.String("router")),
			&nn.MoE{Dim: 8, Hidden: 16, Experts: 4, TopK: 2, Act: "swiglu", Impl: nn.MoELoop, Router: nn.RouterSoftmax, NormTopK: true, RouterName: "router"}, ""},
		{"moe", ints(8, 16, 4, 2), kw("router_name", starlark.String("")), nil, "router_name"},
	} {
		v, err := fns[tc.builtin](thread, starlark.NewBuiltin(tc.builtin, nil), tc.args, tc.kwargs)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s%v %v: error %v, want one naming %q", tc.builtin, tc.args, tc.kwargs, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s%v %v: %v", tc.builtin, tc.args, tc.kwargs, err)
		}
		if got := v.(*Layer).Sim(); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s%v %v: %#v, want %#v", tc.builtin, tc.args, tc.kwargs, got, tc.want)
		}
	}
}
