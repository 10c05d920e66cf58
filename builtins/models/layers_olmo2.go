package models

import (
	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
	"go.starlark.net/starlark"
)

// olmo2LayerBuiltins is OLMo 2's norm (hf_config builds the same sim
// layer from an olmo2 config.json; sim/hf/olmo2.go). Its attention is
// attention(..., qk_norm="olmo2", rope_tables_fp32=True).
func olmo2LayerBuiltins() []host.Builtin {
	return []host.Builtin{{
		Name: "olmo2_norm",
		Sig:  "olmo2_norm(dim, name=None)",
		Doc: "OLMo 2's RMS norm over the last dim (Olmo2RMSNorm): dim weights; it runs in fp32 and multiplies by the weight " +
			"before the cast back, so in a 16-bit model it keeps the fp32 normalised rows where rmsnorm() keeps a copy in the " +
			"activations' dtype.",
		Fn: olmo2NormFn,
	}}
}

func olmo2NormFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var dim, name starlark.Value
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "dim", &dim, "name?", &name); err != nil {
		return nil, err
	}
	return normLayer(thread, dim, name, func(d int64, n string) core.Layer { return &nn.Olmo2Norm{Name: n, Dim: d} })
}
