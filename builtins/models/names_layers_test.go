package models

import (
	"testing"

	"go.starlark.net/starlark"

	"github.com/memsh/memsh/sim/nn"
)

// TestModuleNameKeywords: attention(proj_names=, self_name=) and
// mlp(out_module=) name the modules as the model's tree does (BERT's
// attention.self.query and attention.output.dense, intermediate.dense
// and output.dense; GPT-2's c_attn and c_proj); bad names are errors
// naming the keyword.
func TestModuleNameKeywords(t *testing.T) {
	s := func(v ...string) *starlark.List {
		l := make([]starlark.Value, len(v))
		for i, x := range v {
			l[i] = starlark.String(x)
		}
		return starlark.NewList(l)
	}
	kv := func(pairs ...any) []starlark.Tuple {
		var out []starlark.Tuple
		for i := 0; i+1 < len(pairs); i += 2 {
			out = append(out, starlark.Tuple{starlark.String(pairs[i].(string)), pairs[i+1].(starlark.Value)})
		}
		return out
	}
	att := starlark.Tuple{starlark.MakeInt(8), starlark.MakeInt(2)}
	ffn := starlark.Tuple{starlark.MakeInt(8), starlark.MakeInt(16)}
	checkLayerBuiltins(t, []layerBuiltinCase{
		{"attention", att, kv("fused_qkv", starlark.False, "proj_names", s("query", "key", "value", "output.dense"), "self_name", starlark.String("self")),
			&nn.Attention{Dim: 8, Heads: 2, Impl: "flash", Causal: true, QKVNames: [3]string{"query", "key", "value"}, OutName: "output.dense", SelfName: "self"}, ""},
		{"attention", att, kv("proj_names", s("c_attn", "c_proj")),
			&nn.Attention{Dim: 8, Heads: 2, Impl: "flash", Causal: true, FusedQKV: true, QKVName: "c_attn", OutName: "c_proj"}, ""},
		{"attention", att, kv("fused_qkv", starlark.False, "proj_names", s("a", "b")), nil, "4 names (got 2)"},
		{"attention", att, kv("proj_names", s("c_attn")), nil, "2 names (got 1)"},
		{"attention", att, kv("proj_names", starlark.String("c_attn")), nil, "not one string"},
		{"attention", att, kv("proj_names", s("a..b", "c")), nil, "proj_names[0]"},
		{"attention", att, kv("proj_names", s("a", "b.*")), nil, "proj_names[1]"},
		{"attention", att, kv("self_name", starlark.String("")), nil, "self_name"},
		{"mlp", ffn, kv("proj_names", s("dense", "dense"), "out_module", starlark.String("output"), "name", starlark.String("intermediate")),
			&nn.MLP{Name: "intermediate", Dim: 8, Hidden: 16, Act: "gelu", InName: "dense", OutName: "dense", OutModule: "output"}, ""},
		{"mlp", ffn, kv("act", starlark.String("swiglu"), "proj_names", s("gate_up_proj", "down_proj")),
			&nn.MLP{Dim: 8, Hidden: 16, Act: "swiglu", FusedName: "gate_up_proj", OutName: "down_proj"}, ""},
		{"mlp", ffn, kv("act", starlark.String("swiglu"), "proj_names", s("gate_up_proj")), nil, "(gate, up, down) or (gate_up, down) gated"},
		{"mlp", ffn, kv("proj_names", s("a", "b", "c")), nil, "2 names (got 3)"},
		{"mlp", ffn, kv("act", starlark.String("swiglu"), "out_module", starlark.String("output")), nil, "ungated"},
		{"mlp", ffn, kv("out_module", starlark.MakeInt(1)), nil, "out_module"},
	})
}
