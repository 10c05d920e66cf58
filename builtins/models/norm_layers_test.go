package models

import (
	"reflect"
	"strings"
	"testing"

	"go.starlark.net/starlark"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// TestNormBuiltins: layernorm, rmsnorm, gemma_norm and olmo2_norm unpack dim and
// name alike (normLayer) and build their own norm; a bad dim or name is
// an error naming the argument.
func TestNormBuiltins(t *testing.T) {
	checkLayerBuiltins(t, []layerBuiltinCase{
		{"layernorm", starlark.Tuple{starlark.MakeInt(64)}, nil, &nn.Norm{Dim: 64, Bias: true}, ""},
		{"layernorm", starlark.Tuple{starlark.MakeInt(64)}, []starlark.Tuple{{starlark.String("bias"), starlark.False}, {starlark.String("name"), starlark.String("ln_f")}},
			&nn.Norm{Name: "ln_f", Dim: 64}, ""},
		{"rmsnorm", starlark.Tuple{starlark.MakeInt(32), starlark.String("norm")}, nil, &nn.Norm{Name: "norm", Dim: 32, RMS: true}, ""},
		{"gemma_norm", starlark.Tuple{starlark.MakeInt(16)}, nil, &nn.GemmaNorm{Dim: 16}, ""},
		{"gemma_norm", starlark.Tuple{starlark.MakeInt(16), starlark.String("input_layernorm")}, nil, &nn.GemmaNorm{Name: "input_layernorm", Dim: 16}, ""},
		{"gemma_norm", starlark.Tuple{starlark.String("16")}, nil, nil, "dim"},
		{"olmo2_norm", starlark.Tuple{starlark.MakeInt(16), starlark.String("post_attention_layernorm")}, nil, &nn.Olmo2Norm{Name: "post_attention_layernorm", Dim: 16}, ""},
		{"olmo2_norm", starlark.Tuple{starlark.MakeInt(0)}, nil, nil, "dim"},
		{"rmsnorm", starlark.Tuple{starlark.MakeInt(32), starlark.MakeInt(3)}, nil, nil, "name"},
		{"layernorm", starlark.Tuple{starlark.Float(1.5)}, nil, nil, "dim"},
	})
}

// layerBuiltinCase is one call of a layer builtin: the layer it builds,
// or a word its error must contain.
type layerBuiltinCase struct {
	builtin string
	args    starlark.Tuple
	kwargs  []starlark.Tuple
	want    core.Layer
	err     string
}

// checkLayerBuiltins calls each case's builtin and compares what it builds
// (or its error) with the case's.
func checkLayerBuiltins(t *testing.T, cases []layerBuiltinCase) {
	t.Helper()
	fns := map[string]func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error){}
	for _, b := range append(LayerBuiltins(), ExtraLayerBuiltins()...) {
		if b.Fn != nil {
			fns[b.Name] = b.Fn
		}
	}
	for _, tc := range cases {
		fn, ok := fns[tc.builtin]
		if !ok {
			t.Fatalf("no builtin %s", tc.builtin)
		}
		v, err := fn(&starlark.Thread{}, starlark.NewBuiltin(tc.builtin, nil), tc.args, tc.kwargs)
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
