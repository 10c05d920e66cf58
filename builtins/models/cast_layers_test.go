package models

import (
	"testing"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// TestResidualFP32AndToParamsDtype: residual(fp32=True) is core.Residual
// with FP32 (the Mamba blocks' residual_in_fp32), to_params_dtype() is
// nn.ToParams, moe(router_name=) names the router, and Granite's parts:
// moe(router_logits_fp32=True), mlp(fused=True) (nn.FusedGLU) and
// scale(rebinds=True); bad arguments are errors naming them.
func TestResidualFP32AndToParamsDtype(t *testing.T) {
	norm := NewLayer(&nn.Norm{Dim: 8, RMS: true}, syntax.Position{})
	kw := func(k string, v starlark.Value) []starlark.Tuple { return []starlark.Tuple{{starlark.String(k), v}} }
	moeArgs := starlark.Tuple{starlark.MakeInt(8), starlark.MakeInt(16), starlark.MakeInt(4), starlark.MakeInt(2)}
	checkLayerBuiltins(t, []layerBuiltinCase{
		{"residual", starlark.Tuple{norm}, nil, &core.Residual{Layer: &nn.Norm{Dim: 8, RMS: true}}, ""},
		{"residual", starlark.Tuple{norm}, kw("fp32", starlark.True), &core.Residual{Layer: &nn.Norm{Dim: 8, RMS: true}, FP32: true}, ""},
		{"residual", starlark.Tuple{norm}, kw("fp32", starlark.MakeInt(1)), nil, "fp32"},
		{"to_params_dtype", nil, nil, &nn.ToParams{}, ""},
		{"to_params_dtype", starlark.Tuple{starlark.MakeInt(1)}, nil, nil, "to_params_dtype"},
		{"moe", moeArgs, kw("router_name", starlark.String("router")),
			&nn.MoE{Dim: 8, Hidden: 16, Experts: 4, TopK: 2, Act: "swiglu", Impl: nn.MoELoop, Router: nn.RouterSoftmax, NormTopK: true, RouterName: "router"}, ""},
		{"moe", moeArgs, kw("router_name", starlark.String("")), nil, "router_name"},
		{"moe", moeArgs, []starlark.Tuple{{starlark.String("router"), starlark.String("topk_softmax")}, {starlark.String("router_logits_fp32"), starlark.True}},
			&nn.MoE{Dim: 8, Hidden: 16, Experts: 4, TopK: 2, Act: "swiglu", Impl: nn.MoELoop, Router: nn.RouterTopKSoftmax, NormTopK: true, TopKLogitsFP32: true}, ""},
		{"moe", moeArgs, kw("router_logits_fp32", starlark.True), nil, "router_logits_fp32"},
		{"mlp", starlark.Tuple{starlark.MakeInt(8), starlark.MakeInt(16)}, []starlark.Tuple{{starlark.String("act"), starlark.String("swiglu")}, {starlark.String("fused"), starlark.True}},
			&nn.FusedGLU{Dim: 8, Hidden: 16, Act: "swiglu"}, ""},
		{"mlp", starlark.Tuple{starlark.MakeInt(8), starlark.MakeInt(16)}, kw("fused", starlark.True), nil, "swiglu"},
		{"mlp", starlark.Tuple{starlark.MakeInt(8), starlark.MakeInt(16)}, []starlark.Tuple{{starlark.String("act"), starlark.String("swiglu")}, {starlark.String("fused"), starlark.True}, {starlark.String("dropout"), starlark.Float(0.1)}}, nil, "dropout"},
		{"scale", starlark.Tuple{starlark.MakeInt(12)}, kw("rebinds", starlark.True), &nn.Scale{Factor: 12, Rebinds: true}, ""},
		{"scale", starlark.Tuple{starlark.MakeInt(12)}, kw("buffer", starlark.True), &nn.Scale{Factor: 12, Buffer: true}, ""},
		{"scale", starlark.Tuple{starlark.MakeInt(12)}, kw("buffer", starlark.MakeInt(1)), nil, "buffer"},
		{"mlp", starlark.Tuple{starlark.MakeInt(8), starlark.MakeInt(16)}, []starlark.Tuple{{starlark.String("act"), starlark.String("relu2")},
			{starlark.String("proj_names"), starlark.NewList([]starlark.Value{starlark.String("up_proj"), starlark.String("down_proj")})}},
			&nn.MLP{Dim: 8, Hidden: 16, Act: "relu2", InName: "up_proj", OutName: "down_proj"}, ""},
		{"mlp", starlark.Tuple{starlark.MakeInt(8), starlark.MakeInt(16)}, []starlark.Tuple{{starlark.String("act"), starlark.String("swiglu")},
			{starlark.String("proj_names"), starlark.Tuple{starlark.String("w1"), starlark.String("w3"), starlark.String("w2")}}},
			&nn.MLP{Dim: 8, Hidden: 16, Act: "swiglu", GateName: "w1", InName: "w3", OutName: "w2"}, ""},
		{"mlp", starlark.Tuple{starlark.MakeInt(8), starlark.MakeInt(16)}, kw("proj_names", starlark.Tuple{starlark.String("up_proj")}), nil, "2 names (got 1)"},
		{"mlp", starlark.Tuple{starlark.MakeInt(8), starlark.MakeInt(16)}, kw("proj_names", starlark.String("up_proj")), nil, "not one string"},
		{"mlp", starlark.Tuple{starlark.MakeInt(8), starlark.MakeInt(16)}, kw("proj_names", starlark.Tuple{starlark.String("a.b"), starlark.String("c")}), nil, "without dots"},
		{"mlp", starlark.Tuple{starlark.MakeInt(8), starlark.MakeInt(16)}, []starlark.Tuple{{starlark.String("act"), starlark.String("swiglu")}, {starlark.String("fused"), starlark.True},
			{starlark.String("proj_names"), starlark.Tuple{starlark.String("a"), starlark.String("b"), starlark.String("c")}}}, nil, "drop proj_names"},
	})
}
