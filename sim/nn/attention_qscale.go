package nn

import "github.com/memsh/memsh/sim/core"

// qPosScale is Ministral 3's query scaling (Ministral3Attention.forward,
// models/ministral3/modeling_ministral3.py, 5.25.0): after the rotation q
// is multiplied by get_llama_4_attn_scale(position_ids, beta,
// original_max_position_embeddings), 1 + beta * log(1 + floor(position /
// original_max_position_embeddings)), one value a position ([1, 1, seq,
// 1]: the model's position_ids are one row for the batch) cast to q's
// dtype. Each layer makes its own; the product keeps it for q's gradient,
// and q's scaled copy replaces the rotated q the kernel keeps. Measured on
// the CPU: a tiny Mistral 3 with a ministral3 text model keeps layers x seq
// x the dtype's bytes more than with a mistral one (TestMistral3VisionSavesAsTransformers).
func qPosScale(b *core.Builder, q core.Value, seq int64) core.Value {
	dt := b.Dtype(q)
	i := b.AddOp("scale", "llama_4_attn_scale", nil)
	sc := b.Out(i, "llama_4_attn_scale", []int64{1, 1, seq, 1}, dt, "each position's query scale in q's dtype (get_llama_4_attn_scale), kept by the product")
	b.Val(sc).Grad = false
	b.Op(i).NoGradB = true
	m := b.AddOp("mul", "q_scaled", []core.Value{q, sc})
	y := b.Out(m, "q_scaled", b.Shape(q), dt, "q times its positions' scale")
	if b.Grad(q) {
		b.Save(m, sc)
	}
	n := core.Numel(b.Shape(q))
	b.Op(m).Flops = float64(n)
	b.Op(m).Bytes = float64(2*dt.Bytes(n) + dt.Bytes(seq))
	return y
}
