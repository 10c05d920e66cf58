package sim

import (
	"fmt"
	"math"

	"github.com/memsh/memsh/sim/units"
)

// Attention is multi-head self-attention with optional GQA/MQA, rotary
// embeddings and a choice of kernel:
//
//   - "flash": flash-attn 2 (HF attn_implementation="flash_attention_2"):
//     saves q, k, v (kv heads not expanded), the output and an fp32
//     logsumexp of heads x tokens.
//   - "sdpa": torch scaled_dot_product_attention as Hugging Face calls it:
//     GQA keys and values are expanded to all heads first (repeat_kv), then
//     the same saves as flash.
//   - "eager": matmul, scale, mask, softmax, dropout, matmul; saves the
//     contiguous Q, K^T and V copies, the softmax output (fp32 when
//     SoftmaxFP32, then a cast copy), the dropout mask and output (oracle
//     REPORT.md sections 3 and 4).
type Attention struct {
	Name        string
	Dim         int64
	Heads       int64
	KVHeads     int64 // 0 = Heads
	HeadDim     int64 // 0 = Dim / Heads
	QKVBias     bool
	OutBias     bool
	Impl        string // flash | sdpa | eager
	Causal      bool
	Dropout     float64
	Rope        bool    // rotary position embeddings on q and k
	FusedQKV    bool    // one qkv projection (GPT-2 c_attn) instead of q, k, v
	SoftmaxFP32 bool    // eager softmax computed in fp32 then cast back (HF Llama)
	Softcap     float64 // Gemma 2's attn_logit_softcapping: eager scores -> cap * tanh(scores / cap) (softcap.go); 0 = none
	QKNorm      bool    // RMS norm over each head of q and k before rope (Qwen3, layers_qknorm.go)
}

func (a *Attention) kv() int64 {
	if a.KVHeads > 0 {
		return a.KVHeads
	}
	return a.Heads
}

func (a *Attention) hd() int64 {
	if a.HeadDim > 0 {
		return a.HeadDim
	}
	if a.Heads == 0 {
		return 0
	}
	return a.Dim / a.Heads
}

func (a *Attention) Kind() string      { return "attention" }
func (a *Attention) Label() string     { return a.Name }
func (a *Attention) Children() []Layer { return nil }
func (a *Attention) Params() int64 {
	d, h, kv := a.hd(), a.Heads, a.kv()
	n := a.Dim*h*d + 2*a.Dim*kv*d + h*d*a.Dim
	if a.QKVBias {
		n += h*d + 2*kv*d
	}
	if a.OutBias {
		n += a.Dim
	}
	if a.QKNorm {
		n += 2 * d // q_norm and k_norm weights, head_dim each
	}
	return n
}
func (a *Attention) Summary() string {
	s := fmt.Sprintf("dim %d, %d heads", a.Dim, a.Heads)
	if a.kv() != a.Heads {
		s += fmt.Sprintf(", %d kv heads", a.kv())
	}
	if a.HeadDim > 0 && a.HeadDim*a.Heads != a.Dim {
		s += fmt.Sprintf(", head_dim %d", a.HeadDim)
	}
	if a.QKNorm {
		s += ", qk-norm"
	}
	return s + ", " + a.Impl
}

func (a *Attention) validate(path string) error {
	if err := positive(path, "dim", a.Dim); err != nil {
		return err
	}
	if err := positive(path, "heads", a.Heads); err != nil {
		return err
	}
	if a.HeadDim == 0 && a.Dim%a.Heads != 0 {
		return &units.Error{Path: path, Msg: fmt.Sprintf("heads must divide dim (dim=%d, heads=%d)", a.Dim, a.Heads), Hint: "pass head_dim= when it is not dim/heads"}
	}
	if a.KVHeads < 0 || a.Heads%a.kv() != 0 {
		return units.Errorf(path, "kv_heads must divide heads (heads=%d, kv_heads=%d)", a.Heads, a.KVHeads)
	}
	if a.QKNorm && a.FusedQKV {
		return units.Errorf(path, "qk-norm needs separate q, k and v projections (fused_qkv=False)")
	}
	switch a.Impl {
	case "flash", "sdpa", "eager":
	default:
		return units.Errorf(path, "unknown attention impl %q (known: flash, sdpa, eager)", a.Impl)
	}
	if a.Dropout < 0 || a.Dropout >= 1 {
		return units.Errorf(path, "dropout must be in [0, 1) (got %g)", a.Dropout)
	}
	if !(a.Softcap >= 0) || math.IsInf(a.Softcap, 0) {
		return units.Errorf(path, "softcap must be a positive number, or 0 for none (got %g)", a.Softcap)
	}
	return nil
}

func (a *Attention) lower(b *builder, x Value) Value {
	if b.last(x) != a.Dim {
		panic(shapeMismatch(b, "attention", a.Dim, b.last(x)))
	}
	name := a.Name
	if name == "" {
		name = "attn"
	}
	defer b.scope(name)()
	la := a.perRank(b.par.tpn()) // tp.go: this rank's heads
	d, h, kv := la.hd(), la.Heads, la.kv()
	xg := b.tpGather(x) // tp.go: all-gathered along the sequence with SP
	s := b.shape(xg)
	var q, k, v Value
	if a.FusedQKV {
		qkv := b.colLinear("qkv", "qkv", x, xg, a.Dim, (a.Heads+2*a.kv())*d, (h+2*kv)*d, a.QKVBias)
		q, k, v = qkv, qkv, qkv // views of one storage
	} else {
		q = b.colLinear("q_proj", "q", x, xg, a.Dim, a.Heads*d, h*d, a.QKVBias)
		k = b.colLinear("k_proj", "k", x, xg, a.Dim, a.kv()*d, kv*d, a.QKVBias)
		v = b.colLinear("v_proj", "v", x, xg, a.Dim, a.kv()*d, kv*d, a.QKVBias)
	}
	if a.QKNorm {
		q = qkHeadNorm(b, "q_norm", q, s, h, d)
		k = qkHeadNorm(b, "k_norm", k, s, kv, d)
	}
	if a.Rope {
		q = rope(b, "q", q, withLast(s, h*d))
		k = rope(b, "k", k, withLast(s, kv*d))
	}
	if a.Impl != "flash" && kv != h && !a.FusedQKV {
		// Hugging Face repeat_kv (expand + reshape, a copy) before the kernel.
		k = expandKV(b, "k", k, withLast(s, h*d), kv)
		v = expandKV(b, "v", v, withLast(s, h*d), kv)
	}
	var o Value
	closeRegion := func() {}
	if b.ckpt.Selective {
		closeRegion = b.policyRegion("core")
	}
	if b.prec.Autocast { // the kernel (matmul, SDPA) runs in the compute dtype: q and k leave RoPE in fp32
		q = b.cast(q, b.prec.Compute, "autocast copy of q for the attention kernel")
		k = b.cast(k, b.prec.Compute, "autocast copy of k for the attention kernel")
		v = b.cast(v, b.prec.Compute, "autocast copy of v for the attention kernel")
	}
	switch a.Impl {
	case "eager":
		o = la.eager(b, q, k, v, s)
	default:
		o = la.fused(b, q, k, v, s)
	}
	closeRegion()
	y := b.rowLinear("o_proj", "o", o, a.Heads*d, h*d, a.Dim, a.OutBias)
	return b.dropout("resid_dropout", y, a.Dropout)
}

// rope applies rotary embeddings: q*cos + rotate_half(q)*sin. The products
// and the rotated copy are transient; cos and sin are buffers in the
// parameters' dtype (module.to() casts float buffers), so under autocast
// the bf16 projection times the fp32 buffers promotes: q and k leave RoPE
// in fp32 (Hugging Face Llama; tools/oracle vectors).
func rope(b *builder, name string, x Value, shape []int64) Value {
	i := b.addOp("rope", "rope_"+name, []Value{x})
	dt := promote(b.dtype(x), b.prec.Params)
	y := b.out(i, name+"_rot", shape, dt, "rotary-embedded "+name)
	per := dt.Bytes(numel(shape))
	b.op(i).workF = 2 * per // rotate_half cat and one product live at once
	b.op(i).workB = 2 * per
	b.op(i).Flops = 6 * float64(numel(shape))
	return y
}

// fused lowers flash-attn and SDPA.
func (a *Attention) fused(b *builder, q, k, v Value, s []int64) Value {
	d, h, kv := a.hd(), a.Heads, a.kv()
	dt := b.dtype(q)
	i := b.addOp("attention", a.Impl+"_attention", []Value{q, k, v})
	o := b.out(i, "attn_out", withLast(s, h*d), dt, "attention output")
	lse := b.out(i, "logsumexp", []int64{rows(s), h}, units.FP32, "attention logsumexp (fp32, saved)")
	b.val(lse).grad = false
	b.save(i, q, k, v, o, lse)
	tokens := rows(s)
	// Backward: fp32 dq accumulator and softmax_d (flash-attn mha_bwd); with
	// GQA, dk and dv are computed expanded to all heads, then summed.
	work := units.FP32.Bytes(tokens*h*d) + units.FP32.Bytes(tokens*h)
	if kv != h && a.Impl == "flash" {
		work += 2 * dt.Bytes(tokens*h*d)
	}
	b.op(i).workB = work
	b.op(i).Flops = a.coreFLOPs(s)
	ringAttention(b, i, k, v) // context.go: ring buffers with context parallelism
	return o
}

// expandKV is repeat_kv: expand + reshape, which copies, except with one
// kv head (multi-query): the size-1 head dimension merges with the
// expanded one, so reshape returns a view of x's storage.
func expandKV(b *builder, name string, x Value, shape []int64, kv int64) Value {
	if kv == 1 {
		return x
	}
	i := b.addOp("repeat_kv", "repeat_"+name, []Value{x})
	return b.out(i, name+"_expanded", shape, b.dtype(x), name+" expanded to all heads (repeat_kv)")
}

func (a *Attention) coreFLOPs(s []int64) float64 {
	seq := s[len(s)-2]
	f := 4 * float64(rows(s)) * float64(seq) * float64(a.Heads*a.hd())
	if a.Causal {
		f /= 2
	}
	return f
}

// eager lowers the explicit attention of GPT-2 and Llama's eager path.
func (a *Attention) eager(b *builder, q, k, v Value, s []int64) Value {
	d, h := a.hd(), a.Heads
	dt := b.dtype(q)
	bs := rows(s)
	seq := s[len(s)-2]
	batch := bs / seq
	scoreShape := []int64{batch, h, seq, seq}
	headShape := withLast(s, h*d)
	// q @ k^T: matmul reshapes the transposed head views into contiguous
	// copies (k expanded to all heads) and saves both.
	i := b.addOp("matmul", "qk", []Value{q, k})
	qc := b.out(i, "q_copy", headShape, dt, "contiguous q copy saved by bmm")
	kc := b.out(i, "kT_copy", headShape, dt, "contiguous k^T copy (all heads) saved by bmm")
	scores := b.out(i, "scores", scoreShape, dt, "attention scores")
	b.save(i, qc, kc)
	full := 2 * float64(bs) * float64(seq) * float64(h*d) // eager computes masked blocks too
	b.op(i).Flops = full
	// / sqrt(d): torch 1.13 saves the scalar as a 0-dim fp64 tensor; 2.x
	// saves nothing (Runtime.ScalarOperandSaved).
	j := b.addOp("div", "scale", []Value{scores})
	scaled := b.out(j, "scaled", scoreShape, dt, "scaled attention scores")
	if b.rt.ScalarOperandSaved {
		scalar := b.out(j, "inv_sqrt_d", nil, units.FP64, "1/sqrt(head_dim) scalar")
		b.val(scalar).grad = false
		b.save(j, scalar)
	}
	if a.Softcap > 0 && a.Impl == "eager" {
		scaled = b.softcap("softcap", scaled) // softcap.go
	}
	if a.Causal {
		m := b.addOp("mask", "causal_mask", []Value{scaled})
		scaled = b.out(m, "masked", scoreShape, dt, "masked attention scores")
	}
	smDT := dt
	if a.SoftmaxFP32 || (b.prec.Autocast && b.rt.AutocastSoftmaxFP32) {
		smDT = units.FP32
	}
	sm := b.addOp("softmax", "softmax", []Value{scaled})
	p := b.out(sm, "probs", scoreShape, smDT, "attention probabilities (softmax output, saved)")
	b.save(sm, p)
	p = b.cast(p, dt, "attention probabilities cast back for the P.V matmul")
	p = b.dropout("attn_dropout", p, a.Dropout)
	pv := b.addOp("matmul", "pv", []Value{p, v})
	vc := b.out(pv, "v_copy", headShape, dt, "contiguous v copy (all heads) saved by bmm")
	o := b.out(pv, "context", headShape, dt, "attention context")
	b.save(pv, p, vc)
	b.op(pv).Flops = full
	// transpose(1, 2).contiguous(): the merged heads, the o_proj input.
	t := b.addOp("contiguous", "merge_heads", []Value{o})
	return b.out(t, "merged", headShape, dt, "merged heads (o_proj input)")
}

// perRank is the attention each TP rank runs: heads/tp query heads and
// kv/tp key-value heads (one replicated kv head when kv < tp).
func (a *Attention) perRank(tp int64) *Attention {
	if tp <= 1 {
		return a
	}
	la := *a
	la.HeadDim = a.hd()
	la.Heads = a.Heads / tp
	la.KVHeads = max(a.kv()/tp, 1)
	return &la
}

// checkTP: Megatron splits attention heads over TP ranks; kv heads too
// (GQA), replicated when there are fewer kv heads than ranks (as vLLM and
// Megatron-Bridge do for tp > num_query_groups).
func (a *Attention) checkTP(path string, tp int64) error {
	if a.Heads%tp != 0 {
		return &units.Error{Path: path, Msg: fmt.Sprintf("tp=%d does not divide %d attention heads", tp, a.Heads), Hint: "tp must divide the number of attention heads"}
	}
	if kv := a.kv(); kv%tp != 0 && tp%kv != 0 {
		return &units.Error{Path: path, Msg: fmt.Sprintf("tp=%d does not divide %d kv heads (nor is it a multiple of them)", tp, kv)}
	}
	return nil
}

func (a *Attention) InDim() int64  { return a.Dim }
func (a *Attention) OutDim() int64 { return a.Dim }

// CheckLayout checks that tensor parallelism divides the heads (checkTP).
func (a *Attention) CheckLayout(path string, par Parallelism) error { return a.checkTP(path, par.TP) }

// CheckPacking: packed documents need flash attention's varlen kernel
// (packing.go); eager and SDPA attention would need a block-diagonal mask.
func (a *Attention) CheckPacking(path string) error {
	if a.Impl != "flash" {
		return fmt.Errorf("%s runs %s attention", path, a.Impl)
	}
	return nil
}
