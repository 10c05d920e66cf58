package sim

import (
	"slices"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/timing"
)

// TestCompileFusedValues: in a compiled Llama block (bf16, SDPA, GQA)
// Inductor computes these values inside fused kernels, so they never exist
// in memory, in the forward or as gradients in the backward: each norm's
// fp32 copy, square, mean, normalized product and its bf16 cast (one
// persistent-reduction kernel per norm, whose output feeds the matmuls
// and is materialized), k after RoPE (fused into the repeat_kv copy), the
// residual sum after attention (recomputed from the block's input and
// o_proj's output wherever it is read) and silu's output (fused into the
// product with up_proj's). Everything else is a matmul's or the attention
// kernel's input or output, saved, or read after the block.
func TestCompileFusedValues(t *testing.T) {
	m := testmodels.Llama(256, 1, 8, 2, 688, 50, "sdpa")
	p := testmodels.LlamaPlan(m, 2, 64, "bf16", "none", "H100-80GB")
	p.Compile = core.Compile{Blocks: true}
	prog, err := p.LowerProgram()
	if err != nil {
		t.Fatal(err)
	}
	var fused []string
	for _, v := range prog.Values {
		if v.Fused {
			fused = append(fused, v.Name)
		}
	}
	var want []string
	for _, norm := range []string{"input_layernorm", "post_attention_layernorm"} {
		in := "out"
		if norm == "post_attention_layernorm" {
			in = "residual"
		}
		for _, v := range []string{in + ".fp32", "x2", "variance", "normalized", "normalized.bf16"} {
			want = append(want, "layers.0."+norm+"."+v)
		}
	}
	want = append(want, "layers.0.self_attn.k_rot", "layers.0.residual", "layers.0.mlp.silu")
	slices.Sort(fused)
	slices.Sort(want)
	if !slices.Equal(fused, want) {
		t.Errorf("fused values:\n got %q\nwant %q", fused, want)
	}
	if d := timing.DispatchOf(p); d != timing.DispatchCompiled {
		t.Errorf("a compiled plan is priced with dispatch %v, want compiled", d)
	}
}
