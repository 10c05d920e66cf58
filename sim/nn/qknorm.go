package nn

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// Attention.QKNorm is an RMS norm over each head of q and k, applied after
// the projections and before the rotary embeddings: Qwen3's q_norm and
// k_norm (transformers/models/qwen3/modeling_qwen3.py,
// Qwen3Attention.forward), head_dim weights each. The norms are the same
// LlamaRMSNorm lowering as rmsnorm(), over [batch, seq, heads, head_dim].

// qkHeadNorm is an RMS norm over the last dim of x viewed as
// [..., heads, headDim] (x.view(hidden_shape) shares x's storage, so the
// view is x with its shape split): Llama's, or with gemma Gemma's
// (gemmaNorm: Gemma 3's q_norm and k_norm, Attention.QKNormGemma). The
// result is [..., heads*headDim].
func qkHeadNorm(b *core.Builder, name string, x core.Value, s []int64, heads, headDim int64, gemma bool) core.Value {
	return overHeads(b, name, x, s, heads, headDim, func() core.Value {
		if gemma {
			return gemmaNorm(b, name, x, headDim)
		}
		return b.RmsNorm(name, x, headDim)
	})
}

// overHeads runs norm on x viewed as [..., heads, headDim] and gives its
// result back as [..., heads*headDim].
func overHeads(b *core.Builder, name string, x core.Value, s []int64, heads, headDim int64, norm func() core.Value) core.Value {
	split := append(append([]int64(nil), s[:len(s)-1]...), heads, headDim)
	if core.Numel(split) != core.Numel(b.Shape(x)) {
		panic(core.LowerError{Err: units.Errorf(b.Name(name), "cannot view %v as %v heads of %d", b.Shape(x), heads, headDim)})
	}
	b.Val(x).Shape = split
	y := norm()
	b.Val(x).Shape = core.WithLast(s, heads*headDim)
	b.Val(y).Shape = core.WithLast(s, heads*headDim)
	return y
}

// headNorm is QKNorm's norm of q's or k's heads: Cohere's LayerNorm with
// a weight for each head (QKNormCohere), OLMo 2's RMSNorm over each head
// (QKNormOlmo2: olmo2Norm, AFMoE's), else qkHeadNorm's.
func (a *Attention) headNorm(b *core.Builder, name string, x core.Value, s []int64, heads, headDim int64) core.Value {
	switch {
	case a.QKNormLayer:
		return a.qkLayerNorm(b, name, x, s, heads, headDim)
	case a.QKNormCohere:
		return overHeads(b, name, x, s, heads, headDim, func() core.Value {
			defer b.Scope(name)()
			return cohereNorm(b, x, []int64{heads, headDim}, headDim)
		})
	case a.QKNormOlmo2 && a.QKNormWeightFP32:
		return overHeads(b, name, x, s, heads, headDim, func() core.Value {
			return fp32RMSNorm(b, name, x, headDim, normWeightFloat, "Helium's RMSNorm")
		})
	case a.QKNormOlmo2:
		return overHeads(b, name, x, s, heads, headDim, func() core.Value { return olmo2Norm(b, name, x, headDim) })
	}
	return qkHeadNorm(b, name, x, s, heads, headDim, a.QKNormGemma)
}

// qkNormNames are QKNorm's module names (Attention.QKNormNames).
func (a *Attention) qkNormNames() (q, k string) {
	if a.QKNormNames[0] != "" {
		return a.QKNormNames[0], a.QKNormNames[1]
	}
	return "q_norm", "k_norm"
}
