package nn

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// Llama 4's attention (Llama4TextAttention, models/llama4/modeling_llama4.py
// in the transformers 5.17.0 and 5.25.0 wheels), the fields of Attention
// it sets:
//
//   - RopeComplex: apply_rotary_emb rotates q and k as complex numbers:
//     view_as_complex(x.float()...) * freqs_cis, view_as_real, type_as(x).
//     The product saves freqs_cis only (the table needs no gradient, so
//     the fp32 copy of x is not kept); q and k leave it in their own
//     dtype, the fp32 copy and the complex product transient.
//   - QKL2Norm: Llama4TextL2Norm on q and k after the rotation (use_qk_norm,
//     RoPE layers only): x.float(), pow(2).mean(-1), rsqrt, x * rsqrt,
//     type_as(x), with no weight. pow and the product keep the fp32 copy,
//     rsqrt its output.
//   - TempTuning: attention temperature tuning on the NoPE layers
//     (attn_temperature_tuning): q times log1p(floor((pos + 1) /
//     floor_scale)) * attn_scale + 1, an fp32 [1, seq, 1, 1] table, so the
//     product is an fp32 copy of q cast back (.to(query_states.dtype)); the
//     product saves only the table.
//   - Chunk: chunked local attention (attention_chunk_size, on the RoPE
//     layers): each query sees the keys of its own chunk. transformers'
//     create_chunked_causal_mask skips the mask (SDPA's is_causal) while the
//     sequence is shorter than the chunk (_ignore_causal_mask_sdpa:
//     kv_length >= local_attention_size keeps it); from there SDPA gets a
//     [batch, 1, seq, seq] bool mask, which rules out the flash kernel:
//     the memory-efficient kernel runs, convert_boolean_attn_mask makes the
//     mask an additive bias in the query's dtype (a new tensor each layer),
//     the kernel keeps it for its backward and computes every block (no
//     causal skipping), and k and v are expanded to every head (repeat_kv:
//     use_gqa_in_sdpa needs no mask). FlexAttention computes the chunks
//     only. Eager attention builds the whole score matrix either way.

// chunkMasked reports whether the chunked layers get a mask at seq tokens.
func (a *Attention) chunkMasked(seq int64) bool { return a.Chunk > 0 && seq >= a.Chunk }

// rotate applies the layer's rotary embedding to x (q or k).
func (a *Attention) rotate(b *core.Builder, name string, x core.Value, shape []int64) core.Value {
	if !a.RopeComplex {
		if a.RopeTables != "" && !b.MegatronKernels() { // TE's fused rope saves its own freqs
			t := a.ropeTables(b, name, shape)
			if a.RopeToV { // the tables' dtype promotes the products (attention_codegen.go)
				return ropeAs(b, name, x, shape, core.Promote(core.Promote(b.Dtype(x), b.Prec.Params), b.Dtype(t[0])), t...)
			}
			return rope(b, name, x, shape, t...)
		}
		return rope(b, name, x, shape)
	}
	i := b.AddOp("rope", b.Concat("rope_", name), []core.Value{x})
	y := b.Out(i, b.Concat(name, "_rot"), shape, b.Dtype(x), b.Concat("rotary-embedded ", name, " (complex product, type_as)"))
	per := units.FP32.Bytes(core.Numel(shape))
	b.Op(i).WorkF = 2 * per // x.float() and the complex product
	b.Op(i).WorkB = 2 * per
	b.Op(i).Flops = 6 * float64(core.Numel(shape))
	return y
}

// l2HeadNorm is Llama4TextL2Norm over each head of x ([..., heads*hd]),
// the attention's module scope (Llama 4's one qk_norm, called on q and on
// k, name; NanoChat's q_norm and k_norm).
func l2HeadNorm(b *core.Builder, scope, name string, x core.Value) core.Value {
	defer b.Scope(scope)()
	return weightlessRMS(b, name, x)
}

// weightlessRMS is Llama4TextWeightlessRMSNorm's ops over the last
// dimension of x: x.float(), x * rsqrt(x.pow(2).mean(-1) + eps),
// type_as(x); pow and the product keep the fp32 copy (x itself in an fp32
// model), rsqrt its output.
func weightlessRMS(b *core.Builder, name string, x core.Value) core.Value {
	dt := b.Dtype(x)
	s := b.Shape(x)
	x32 := b.Cast(x, units.FP32, "fp32 copy of the L2-normed "+name)
	ip := b.AddOp("pow", "pow", []core.Value{x32})
	sq := b.Out(ip, "x2", s, units.FP32, "x² in the L2 norm")
	b.Save(ip, x32)
	im := b.AddOp("mean", "mean", []core.Value{sq})
	r := core.Rows(s)
	variance := b.Out(im, "variance", []int64{r, 1}, units.FP32, "L2 norm variance (per head)")
	ir := b.AddOp("rsqrt", "rsqrt", []core.Value{variance})
	rs := b.Out(ir, "rsqrt", []int64{r, 1}, units.FP32, "L2 norm rsqrt (saved)")
	b.Save(ir, rs)
	n := b.Mul("normalized", x32, rs)
	for _, i := range []int32{ip, im, ir} {
		b.Op(i).Flops = float64(core.Numel(s))
	}
	return b.Cast(n, dt, "L2-normed "+name+", cast back (type_as)")
}

// qkL2 norms q and k per head (the rows of each are its heads).
func (a *Attention) qkL2(b *core.Builder, q, k core.Value, s []int64, h, kv, d int64) (core.Value, core.Value) {
	norm := func(name string, x core.Value, heads int64) core.Value {
		full := b.Shape(x)
		b.Val(x).Shape = append(append([]int64(nil), s[:len(s)-1]...), heads, d)
		scope := "qk_norm"
		if a.QKL2Split {
			scope = name + "_norm"
		}
		y := l2HeadNorm(b, scope, name, x)
		b.Val(x).Shape = full
		b.Val(y).Shape = core.WithLast(s, heads*d)
		return y
	}
	return norm("q", q, h), norm("k", k, kv)
}

// tempTune is the NoPE layers' temperature tuning of q.
func tempTune(b *core.Builder, q core.Value) core.Value {
	dt := b.Dtype(q)
	p := b.Ew("mul", "q_temperature", []core.Value{q}, b.Shape(q), units.FP32, "q times the fp32 attention scales")
	return b.Cast(p, dt, "temperature-tuned q, cast back")
}

// chunkKeys is the keys a query sees on average in causal chunks of c
// over seq tokens: query i sees i mod c + 1.
func chunkKeys(seq, c float64) float64 {
	n := float64(int64(seq / c))
	r := seq - n*c
	return (n*c*(c+1)/2 + r*(r+1)/2) / seq
}
