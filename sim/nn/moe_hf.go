package nn

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// lowerGroupedMM is transformers 5's grouped_mm experts, the default
// experts_implementation of its MoE blocks from 5.0 on
// (PreTrainedModel.get_correct_experts_implementation in
// modeling_utils.py), as integrations/moe.py grouped_mm_experts_forward
// runs it at 5.17.0, on one rank (S = tokens * top_k routed copies):
//
//	expert_ids_g, perm = torch.sort(expert_ids)                 # int64 [S] each
//	x_g = hidden_states[perm // top_k]                           # [S, d], saves the index
//	w_g = sample_weights[perm]                                   # [S], saves perm
//	offsets = cumsum(histc(expert_ids_g.int(), E))               # int32 [E]
//	sentinel_mask = (expert_ids_g >= E).unsqueeze(-1)            # bool [S, 1]  (*)
//	x_g.masked_fill_(sentinel_mask, 0)                           # in place, saves the mask  (*)
//	y = grouped_mm(x_g, gate_up_proj^T, offs)                    # [S, 2h], saves x_g
//	y = y.masked_fill(sentinel_mask, 0)                          # a copy: the GEMM's output is dropped  (*)
//	gate, up = y.chunk(2); h = act(gate) * up                    # act saves gate, the product act(gate) and up
//	y = grouped_mm(h, down_proj^T, offs)                         # [S, d], saves h
//	y = y.masked_fill(sentinel_mask, 0)                          # a copy again  (*)
//	y = y * w_g.unsqueeze(-1)                                    # saves both; promoted to w's dtype
//	y = y[inv_perm]                                              # saves inv_perm
//	out = y.view(T, k, d).sum(1).to(hidden_states.dtype)
//
// (*) From 5.18.0 the lines marked run only when the experts are sharded
// (if self._is_expert_parallel), so memsh leaves them out under
// MoE.SentinelsEP (with ep > 1 memsh lowers every impl as dispatched
// grouped GEMMs, lowerDispatched, never here): one training step of a tiny Qwen3-MoE on
// the CPU dispatched 5 masked_fill and 1 masked_fill_ under 5.17.0, none
// under 5.25.0, and saved S bytes fewer (the mask;
// tools/oracle/moe_sentinel.py, TestHFTransformers518Sentinels).
//
// grouped_mm is not autocast-enabled: transformers casts the input to the
// weight's dtype (_grouped_mm's input.to(weight.dtype)). Expert biases
// (gpt-oss) are gathered per row (bias[expert_ids_g], [S, out]) and added
// in place. Unlike the per-expert loop, nothing is index_add_-ed: the
// source of each expert's index_add_, which the loop keeps (moe_loop.go),
// is not there, and the routed rows are copied once, not per expert.
func (m *MoE) lowerGroupedMM(b *core.Builder, x core.Value, r routing) core.Value {
	T, k, d := r.tokens, m.TopK, m.Dim
	S := T * k
	done := b.Scope("experts")
	b.ReserveParams(m.Experts)
	fw := new(fusedWeights)
	*fw = m.registerFused(b)
	done()
	defer b.Scope("experts")()
	srt := b.AddOp("sort", "sort", []core.Value{r.idx})
	ids := b.Out(srt, "expert_ids_g", []int64{S}, units.INT64, "routed copies' experts, sorted")
	perm := b.Out(srt, "perm", []int64{S}, units.INT64, "the sort's permutation")
	b.Op(srt).NoGradB = true
	// perm // top_k: the token of each sorted copy, the index the gather saves.
	dv := b.AddOp("floor_divide", "token_idx", []core.Value{perm})
	tok := b.Out(dv, "token_idx", []int64{S}, units.INT64, "token of each sorted routed copy (perm // top_k)")
	b.Op(dv).NoGradB = true
	g := b.AddOp("index", "selected_hidden_states_g", []core.Value{x, tok})
	xg := b.Out(g, "selected_hidden_states_g", []int64{S, d}, b.Dtype(x), "routed copies of the tokens, sorted by expert (hidden_states[perm // top_k])")
	b.Save(g, tok)
	b.Op(g).WorkB = b.Val(x).Bytes // IndexBackward0: zeros of the input's shape, index_put_ with accumulate
	gw := b.AddOp("index", "sample_weights_g", []core.Value{r.weights, perm})
	wg := b.Out(gw, "sample_weights_g", []int64{S, 1}, b.Dtype(r.weights), "routing weights of the sorted copies")
	b.Save(gw, perm)
	b.Op(gw).WorkB = b.Val(r.weights).Bytes
	// offsets = cumsum(histc(expert_ids_g.int(), E)).int(): the int32 [E]
	// ends of each expert's rows, the offs both grouped GEMMs take and
	// autograd saves with them (derivatives.yaml, _grouped_mm: its backward
	// runs grouped GEMMs over the same groups); one storage for the two.
	cs := b.AddOp("cumsum", "offsets", []core.Value{ids})
	offs := b.Out(cs, "offsets", []int64{m.Experts}, units.INT32, "each expert's last row + 1 (cumsum of tokens per expert), grouped_mm's offs")
	b.Op(cs).NoGradB = true
	masked := !m.SentinelsEP // lowerGroupedMM runs without ep: lowerDispatched lowers any impl under it
	var mask core.Value
	if masked {
		mk := b.AddOp("ge", "sentinel_mask", []core.Value{ids})
		mask = b.Out(mk, "sentinel_mask", []int64{S, 1}, units.BOOL, "rows past the last expert (expert parallelism's sentinels)")
		b.Op(mk).NoGradB = true
		// x_g.masked_fill_(sentinel_mask, 0) (moe.py:437 at 5.17.0) is in
		// place: one pass of ATen's masked_fill kernel over x_g (reading and
		// writing its rows; an [S, 1] mask broadcast over them, so the generic
		// elementwise kernel, as the copies below), and MaskedFillBackward0's
		// grad.masked_fill(mask, 0) in the backward. Its backward keeps the
		// mask, which the copies below keep too. The output stands for x_g
		// after the fill: x_g itself is read by nothing else and dies here.
		fm := b.AddOp("masked_fill", "selected_hidden_states_g_masked", []core.Value{xg, mask})
		xg = b.Out(fm, "selected_hidden_states_g_masked", []int64{S, d}, b.Dtype(xg), "routed copies with the sentinel rows zeroed (x_g.masked_fill_, in place)")
		b.Save(fm, mask)
		b.Op(fm).Bytes += float64(b.Val(xg).Bytes) // read and written in place
	}

	hidden := m.Hidden / b.Par.Etpn() // expert tensor parallelism splits each expert (registerFused)
	dt := b.Prec.Params               // grouped_mm runs in the weight's dtype
	// proj is one grouped GEMM over the rows xin, the rows outDim wide
	// from row offset off of the 3-D weight p: gate and up are the two
	// halves of gate_up_proj's output, [S, 2h] as two [S, h] (the same
	// bytes; the activation keeps gate, the product up).
	proj := func(name string, in core.Value, p, bias int32, inDim, outDim int64) core.Value {
		xin := b.Cast(in, dt, "expert input in the weight's dtype (grouped_mm is not autocast-enabled)")
		var i int32
		if q := fw.dequantized(p); q != core.NoValue && fw.merged(p) == core.NoValue { // the parametrization's dequantized weight, no grad
			xin = b.Cast(in, b.Dtype(q), "expert input in the dequantized weight's dtype (grouped_mm is not autocast-enabled)")
			i = b.AddOp("grouped_matmul", name, []core.Value{xin, q})
			b.Out(i, name, []int64{S, outDim}, b.Dtype(q), "grouped GEMM output ("+name+")")
			if b.Grad(xin) {
				b.Save(i, q) // the weight, for the input's gradient
			}
		} else if w := fw.merged(p); w != core.NoValue { // PEFT's merged weight, which requires grad
			i = b.AddOp("grouped_matmul", name, []core.Value{xin, w})
			b.Out(i, name, []int64{S, outDim}, dt, "grouped GEMM output ("+name+")")
			b.Save(i, xin)
			if b.Grad(xin) {
				b.Save(i, w)
			}
		} else {
			i = b.AddOp("grouped_matmul", name, []core.Value{xin}, p)
			b.Out(i, name, []int64{S, outDim}, dt, "grouped GEMM output ("+name+")")
			if b.Trainable(p) {
				b.Save(i, xin)
			}
		}
		y := b.Op(i).Out[0]
		b.Save(i, offs)
		b.Op(i).Flops = 2 * float64(S) * float64(inDim) * float64(outDim)
		b.Op(i).Bytes += float64(b.Val(xin).Bytes) + float64(dt.Bytes(m.Experts*inDim*outDim))
		if bias >= 0 {
			bg := b.AddOp("index", name+"_bias_g", []core.Value{ids}, bias)
			bv := b.Out(bg, name+"_bias_g", []int64{S, outDim}, b.Prec.Params, "expert biases gathered per row (bias[expert_ids_g])")
			b.Save(bg, ids)
			y = b.Add(name+"_bias", y, bv) // out.add_(bias)
		}
		if !masked {
			return y
		}
		// proj_out.masked_fill(sentinel_mask, 0): a new tensor; the GEMM's
		// output is dropped.
		mo := b.AddOp("masked_fill", name+"_masked", []core.Value{y, mask})
		out := b.Out(mo, name+"_masked", []int64{S, outDim}, b.Dtype(y), "grouped GEMM output with the sentinel rows zeroed (a copy)")
		b.Save(mo, mask)
		b.Op(mo).Bytes += float64(b.Val(y).Bytes)
		return out
	}
	var h core.Value
	if m.expertMLP().gated() {
		fn := "silu"
		if m.Act == "geglu" {
			fn = "gelu"
		}
		gate := proj("gate_up_proj.gate", xg, fw.gateUp, fw.gateUpBias, d, hidden)
		up := proj("gate_up_proj.up", xg, fw.gateUp, fw.gateUpBias, d, hidden)
		// gate, up = gate_up_out.chunk(2, dim=-1) (_default_apply_gate,
		// moe.py:522): views of one [S, 2h] tensor, their rows 2h apart;
		// act_fn(gate) and the product with up read them strided
		// (core.OpInfo.Strided; timing/strided.go).
		if m.ClampedGLU {
			h = clampedGLU(b, gate, up)
		} else if m.SwiGLULimit > 0 {
			h = clampedSwiGLU(b, gate, up, true, m.LimitAfterAct)
		} else {
			act := Activation(b, fn, gate)
			if a := b.Op(b.Val(act).Producer); len(a.In) == 1 && a.In[0] == gate {
				a.Strided = true
			}
			h = b.Mul("act_mul", act, up)
			b.Op(b.Val(h).Producer).Strided = true
		}
	} else {
		h = Activation(b, m.Act, proj("up_proj", xg, fw.gateUp, fw.gateUpBias, d, hidden))
	}
	y := proj("down_proj", h, fw.down, fw.downBias, hidden, d)
	wy := b.Mul("weighted_out", y, wg) // [S, d] times [S, 1]: promoted to the weights' dtype
	ip := b.AddOp("index", "restore_order", []core.Value{wy})
	inv := b.Out(ip, "inv_perm", []int64{S}, units.INT64, "inverse permutation (inv_perm[perm] = arange)")
	b.Val(inv).Grad = false
	ro := b.Out(ip, "weighted_out", []int64{S, d}, b.Dtype(wy), "weighted expert outputs in token order (weighted_out[inv_perm])")
	b.Save(ip, inv)
	b.Op(ip).WorkB = b.Val(wy).Bytes
	sm := b.AddOp("sum", "final_hidden_states", []core.Value{ro})
	out := b.Out(sm, "final_hidden_states", []int64{T, d}, b.Dtype(ro), "per-token sum over the top-k copies")
	b.Op(sm).Flops = float64(S * d)
	// The sum reads every routed row (moe.py:479,
	// weighted_out.view(num_tokens, num_top_k, hidden_dim).sum(dim=1)); its
	// backward expands the [T, d] gradient over top_k, which view's
	// backward (grad.reshape) copies into [S, d]: about twice these bytes,
	// stream's backward.
	b.Op(sm).Bytes += float64(b.Val(ro).Bytes)
	if fw.gateUpQ != core.NoValue { // the experts' forward hook clears the parametrization cache
		b.HoldDequantized(fw.read(fw.gateUp), fw.read(fw.down))
	}
	return b.Cast(out, b.Dtype(x), "the block's output in the hidden states' dtype")
}

// clampedGLU is gpt-oss's GptOssExperts._apply_gate
// (models/gpt_oss/modeling_gpt_oss.py:80-86 at 5.25.0) on the strided
// halves of gate_up:
//
//	gate = gate.clamp(max=limit)          # saves gate
//	up = up.clamp(-limit, limit)          # saves up
//	glu = gate * sigmoid(gate * alpha)    # sigmoid saves its output, the product both
//	return (up + 1) * glu                 # saves up + 1 and glu
//
// Autograd keeps gate_up and four [rows, hidden] tensors (the clamped
// gate, the sigmoid, glu, up + 1): measured with
// tools/oracle/hf_block_saved.py (TestGptOssSavesAsTransformers).
func clampedGLU(b *core.Builder, gate, up core.Value) core.Value {
	g := b.Unary("clamp", gate, true, false)
	b.Op(b.Val(g).Producer).Strided = true
	u := b.Unary("clamp", up, true, false)
	b.Op(b.Val(u).Producer).Strided = true
	s := b.Unary("sigmoid", b.Unary("mul", g, false, false), false, true) // gate * alpha saves nothing (a scalar)
	glu := b.Mul("glu", g, s)
	return b.Mul("gated_output", b.Unary("add", u, false, false), glu) // up + 1 saves nothing
}
