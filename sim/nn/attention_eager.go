package nn

import (
	"math"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// headLayout is how an attention operand [b, heads, s, d] lies in memory.
// Eager attention's matmul folds (b, heads) into bmm's batch dimension by
// reshape, which is a view when the strides allow it: bmm then saves the
// operand's own storage (a fused qkv projection's whole output), else a
// contiguous copy of every head (aten/src/ATen/native/LinearAlgebra.cpp,
// _matmul_impl: tensor.expand(...).reshape(...); the torch 2.15 wheel's
// torch/_decomp/decompositions.py, matmul, line 5377).
type headLayout uint8

const (
	seqMajor      headLayout = iota // view(b, s, heads, d).transpose(1, 2) of a projection, or an elementwise result of one (which keeps its strides)
	headMajor                       // contiguous [b, heads, s, d]: repeat_kv's copy
	expandedHeads                   // repeat_kv of one kv head: expand, stride 0 over the heads
)

// foldIsView reports whether reshaping (b, heads) into one dimension is a
// view: the two dimensions merge when one has size 1 (reshape skips it) or
// when b's stride is heads times heads' stride, true of a contiguous
// operand only (a transposed projection's b stride is s rows, an expanded
// one's heads stride is 0).
func (l headLayout) foldIsView(batch, heads int64) bool {
	switch l {
	case headMajor:
		return true
	case expandedHeads:
		return batch == 1
	}
	return batch == 1 || heads == 1
}

// castHeads is autocast's cast of k or v for the kernel (all heads shape
// all). It keeps the strides of a dense tensor; a stride-0 expanded one is
// not dense, so its cast allocates every head, contiguous (Tensor.to with
// preserve_format: empty_like falls back to the suggested, contiguous
// layout; torch 2.15's torch/_refs/__init__.py, empty_like).
func castHeads(b *core.Builder, name string, x core.Value, l headLayout, all []int64) (core.Value, headLayout) {
	dt := b.Prec.Compute
	if b.Dtype(x) == dt {
		return x, l
	}
	if l != expandedHeads {
		return b.Cast(x, dt, "autocast copy of "+name+" for the attention kernel"), l
	}
	i := b.AddOp("cast", "to_"+dt.Name(), []core.Value{x})
	y := b.Out(i, name+"_expanded."+dt.Name(), all, dt, "autocast copy of "+name+" expanded to every head")
	b.Op(i).Bytes += float64(b.Val(x).Bytes)
	return y, headMajor
}

// expandKV is repeat_kv: expand + reshape, which copies, except with one
// kv head (multi-query): the size-1 head dimension merges with the
// expanded one, so reshape returns a view of x's storage.
func expandKV(b *core.Builder, name string, x core.Value, shape []int64, kv int64) core.Value {
	if kv == 1 {
		return x
	}
	i := b.AddOp("repeat_kv", "repeat_"+name, []core.Value{x})
	return b.Out(i, name+"_expanded", shape, b.Dtype(x), name+" expanded to all heads (repeat_kv)")
}

func (a *Attention) coreFLOPs(s []int64) float64 {
	seq := float64(s[len(s)-2])
	keys := seq // keys per query, on average
	if a.Causal {
		keys = seq / 2
	}
	if a.chunkMask {
		keys = seq // SDPA's efficient kernel given a mask computes every block
		if a.Impl == "flex" {
			keys = chunkKeys(seq, float64(a.Chunk))
		}
	}
	if w := float64(a.Window); w > 0 && w < seq && a.Impl != "eager" && !(a.chunkMask && a.Impl == "sdpa") {
		keys = w // query i attends to min(i+1, w) keys: w - w(w-1)/2seq on average when causal
		if a.Causal {
			keys = w - w*(w-1)/(2*seq)
		}
		if a.WindowBidir {
			keys = math.Min(2*w+1, seq) // w either side
		}
	}
	return 2 * float64(core.Rows(s)) * keys * float64(a.Heads*(a.Hd()+a.Vd()))
}

// eager lowers the explicit attention of GPT-2 and Llama's eager path.
// kl and vl are how k and v lie in memory (q lies as its projection).
func (a *Attention) eager(b *core.Builder, q, k, v core.Value, s []int64, kl, vl headLayout) core.Value {
	d, h := a.Hd(), a.Heads
	dt := b.Dtype(q)
	bs := core.Rows(s)
	seq := s[len(s)-2]
	batch := bs / seq
	scoreShape := []int64{batch, h, seq, seq}
	headShape := core.WithLast(s, h*d)
	vShape := core.WithLast(s, h*a.Vd()) // v's heads, the context's
	// fold is what bmm reads for x: x itself when the fold is a view, else
	// a contiguous copy of every head.
	fold := func(i int32, x core.Value, l headLayout, name, why string) core.Value {
		if l.foldIsView(batch, h) {
			return x
		}
		shape := headShape
		if name == "v_copy" {
			shape = vShape
		}
		return b.Out(i, name, shape, b.Dtype(x), why)
	}
	sdt := dt // the scores' dtype
	if a.XGLMEager {
		q = xglmScaleQ(b, q)
	}
	if a.QKFP32 && dt != units.FP32 {
		// query.to(torch.float32), key.to(torch.float32): dense copies
		// keep their operand's strides (preserve_format); k's stride-0
		// expansion becomes every head, contiguous (castHeads).
		q = b.Cast(q, units.FP32, "fp32 copy of q for q @ k^T (GPT-J's eager attention)")
		if kl == expandedHeads {
			i := b.AddOp("cast", "to_fp32", []core.Value{k})
			b.Op(i).Bytes += float64(b.Val(k).Bytes)
			k = b.Out(i, "k_expanded.fp32", headShape, units.FP32, "fp32 copy of k expanded to every head")
			kl = headMajor
		} else {
			k = b.Cast(k, units.FP32, "fp32 copy of k for q @ k^T (GPT-J's eager attention)")
		}
		sdt = units.FP32
	}
	// q @ k^T: bmm saves each operand only when the other needs a gradient
	// (derivatives.yaml: bmm's self gradient reads mat2 and mat2's reads
	// self; the generated node saves a tensor only for the gradients it
	// computes).
	i := b.AddOp("matmul", "qk", []core.Value{q, k})
	qc := fold(i, q, seqMajor, "q_copy", "contiguous q copy saved by bmm")
	kc := fold(i, k, kl, "kT_copy", "contiguous k^T copy (all heads) saved by bmm")
	scores := b.Out(i, "scores", scoreShape, sdt, "attention scores")
	if b.Grad(k) {
		b.Save(i, qc)
	}
	if b.Grad(q) {
		b.Save(i, kc)
	}
	full := 2 * float64(bs) * float64(seq) * float64(h*d) // eager computes masked blocks too
	b.Op(i).Flops = full
	scaled := scores // GPT-Neo's _attn does not scale (MaskBuffer), XGLM's scales q
	if a.MaskBuffer == 0 && !a.XGLMEager {
		// / sqrt(d): torch 1.13 saves the scalar as a 0-dim fp64 tensor; 2.x
		// saves nothing (Runtime.ScalarOperandSaved).
		j := b.AddOp("div", "scale", []core.Value{scores})
		scaled = b.Out(j, "scaled", scoreShape, sdt, "scaled attention scores")
		b.Op(j).Bytes += float64(b.Val(scores).Bytes) // a pointwise kernel reads what it writes
		if b.Rt.ScalarOperandSaved {
			scalar := b.Out(j, "inv_sqrt_d", nil, units.FP64, "1/sqrt(head_dim) scalar")
			b.Val(scalar).Grad = false
			b.Save(j, scalar)
		}
	}
	if a.Softcap > 0 && a.Impl == "eager" {
		scaled = b.Softcap("softcap", scaled)
	}
	if a.AlibiMaskedFill {
		scaled = a.alibiMaskedFill(b, scaled, s, scoreShape)
	} else if a.Causal || a.bias != nil || a.bidirMasked(seq) {
		ins, name := []core.Value{scaled}, "causal_mask"
		if a.EagerMask {
			ins = append(ins, a.forwardMask(b, s, b.Prec.Params, false)) // torch.where over the expanded bool mask: whole
		}
		if a.bias != nil { // scores + the tower's mask (PixtralVision's block mask)
			ins, name = append(ins, a.bias(b)), "attention_mask"
		}
		m := b.AddOp("mask", name, ins)
		for _, x := range ins {
			b.Op(m).Bytes += float64(b.Val(x).Bytes)
		}
		scaled = b.Out(m, "masked", scoreShape, sdt, "masked attention scores")
	}
	if a.XGLMEager {
		scaled = xglmFloor(b, scaled, scoreShape)
	}
	if a.MaskAdd {
		m := b.AddOp("add", "attention_mask", []core.Value{scaled})
		b.Op(m).Bytes = float64(b.Val(scaled).Bytes + b.Prec.Params.Bytes(batch*seq))
		scaled = b.Out(m, "masked", scoreShape, core.Promote(b.Dtype(scaled), b.Prec.Params), "scores plus the extended attention mask")
		b.Op(m).Flops = float64(core.Numel(scoreShape))
	}
	smDT := b.Dtype(scaled)
	if a.SoftmaxFP32 || (b.Prec.Autocast && b.Rt.AutocastSoftmaxFP32) || (a.XGLMEager && smDT == units.FP16) {
		smDT = units.FP32
	}
	probShape := scoreShape
	sinkScale := core.NoValue
	if a.SinkScale {
		sinkScale = a.sinkScale(b, scaled, scoreShape)
	}
	if a.MaxShift && !a.Sinks {
		scaled = maxShift(b, scaled, scoreShape, "the scores minus their row max")
	}
	if a.Sinks && !a.SinkScale {
		// GptOss eager_attention_forward (models/gpt_oss/modeling_gpt_oss.py:241-249
		// at 5.25.0): cat([scores, sinks], -1) (cat promotes to the
		// sinks' dtype), minus its row max (max(dim=-1) saves its int64
		// indices), softmax(dtype=combined_logits.dtype): in the logits'
		// own dtype, which autocast keeps (softmax's fp32_set_opt_dtype
		// policy honours an explicit dtype); then probs[..., :-1], a view.
		probShape = []int64{batch, h, seq, seq + 1}
		sink := b.Param("sinks", []int64{h}, core.RoleO)
		b.ShardParam(sink, h*b.Par.Tpn())
		c := b.AddOp("cat", "sinks", []core.Value{scaled}, sink)
		smDT = core.Promote(b.Dtype(scaled), a.sinksDType(b))
		combined := b.Out(c, "combined_logits", probShape, smDT, "scores with the sink column")
		scaled = combined
		if !a.SinksNoShift {
			scaled = maxShift(b, combined, probShape, "scores with the sink column, minus the row max")
		}
	}
	in := b.SoftmaxInput(scaled, smDT, b.Prec.Autocast && b.Rt.AutocastSoftmaxFP32)
	sm := b.AddOp("softmax", "softmax", []core.Value{in})
	p := b.Out(sm, "probs", probShape, smDT, "attention probabilities (softmax output, saved)")
	b.Save(sm, p)
	b.SaveSoftmaxInput(sm, in)
	b.Op(sm).Bytes += float64(b.Val(in).Bytes)
	if !b.Rt.CPU {
		// CUDA's softmax backward multiplies first, into a temporary of
		// the gradient's size and dtype (aten/src/ATen/native/cuda/
		// SoftMax.cu, softmax_backward_cuda_out: "Tensor tmp = grad *
		// output;"), alive beside the gradient it writes. Measured on one
		// H200 (sim/testdata/cuda_h200, tools/oracle/cuda_run.sh): Llama
		// blocks with bf16 eager attention peak one fp32 scores tensor
		// (2 GiB) above a replay without it.
		b.Op(sm).WorkB = b.Val(p).Bytes
	}
	if a.CastAtMatmul {
		p = b.Dropout("attn_dropout", p, a.Dropout)
		p = b.Cast(p, dt, "attention probabilities cast by the P.V matmul's autocast")
	} else {
		if a.SinksNoShift {
			p = sinkSliceCast(b, p, scoreShape, dt)
		} else {
			p = b.Cast(p, dt, "attention probabilities cast back for the P.V matmul")
		}
		p = b.Dropout("attn_dropout", p, a.Dropout)
	}
	pv := b.AddOp("matmul", "pv", []core.Value{p, v})
	vc := fold(pv, v, vl, "v_copy", "contiguous v copy (all heads) saved by bmm")
	o := b.Out(pv, "context", vShape, dt, "attention context")
	if b.Grad(v) {
		b.Save(pv, p)
	}
	if b.Grad(p) {
		b.Save(pv, vc)
	}
	b.Op(pv).Flops = full * float64(a.Vd()) / float64(d)
	if sinkScale != core.NoValue {
		o = applySinkScale(b, o, sinkScale)
	}
	// transpose(1, 2).contiguous(): the merged heads, the o_proj input.
	t := b.AddOp("contiguous", "merge_heads", []core.Value{o})
	return b.Out(t, "merged", vShape, dt, "merged heads (o_proj input)")
}
