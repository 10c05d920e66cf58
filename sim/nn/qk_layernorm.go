package nn

import "github.com/memsh/memsh/sim/core"

// qkLayerNorm is Attention.QKNormLayer's norm of q's or k's heads: one
// nn.LayerNorm(head_dim) with a weight and a bias for all of them
// (Persimmon's q_layernorm and k_layernorm: PersimmonAttention.forward,
// modeling_persimmon.py at transformers 5.25.0, normalises
// [batch, seq, heads, head_dim] before the transpose). Under FusedQKV the
// heads are strided views of the fused projection's output, which
// native_layer_norm reads in place and saves whole (core.LayerNormView);
// otherwise x viewed as [..., heads, head_dim] (overHeads). The result is
// a new [..., heads*head_dim] tensor.
func (a *Attention) qkLayerNorm(b *core.Builder, name string, x core.Value, s []int64, heads, headDim int64) core.Value {
	if !a.FusedQKV {
		return overHeads(b, name, x, s, heads, headDim, func() core.Value { return b.LayerNorm(name, x, headDim, true) })
	}
	split := append(append([]int64(nil), s[:len(s)-1]...), heads, headDim)
	y := b.LayerNormView(name, x, split, headDim, true)
	b.Val(y).Shape = core.WithLast(s, heads*headDim)
	return y
}
