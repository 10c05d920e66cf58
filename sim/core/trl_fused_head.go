package core

import "github.com/memsh/memsh/sim/units"

// TRLLogProbOp is the op kind of TRL's ChunkedLogProbFunction
// (timing prices it as the logits' GEMM forward and three GEMMs backward).
const TRLLogProbOp = "chunked_logprob"

// TRL's fused LM head (trl 1.15 and later; read at 1.16.0:
// trl/trainer/utils.py add_fused_lm_head's _fused_forward and
// trl/kernels/chunked_logprob.py ChunkedLogProbFunction), what a
// DPOTrainer's forward with fused_lm_head=True runs after the backbone:
//
//   - hidden_states = last_hidden_state[:, :-1] and labels[:, 1:] (views),
//     mask = labels != -100 (bool [rows, seq-1]);
//   - on a Triton device only the valid positions are scored (compact):
//     hidden_states[mask], a copy [n, H] in the hidden states' dtype
//     whose IndexBackward0 saves the bool mask itself (derivatives.yaml's
//     index.Tensor saves the indices as given; the kernel's nonzero,
//     int64 [n, 2], is a transient of the forward), and labels[mask]
//     (int64 [n]); nonzero's count is read on the host. Measured on the
//     CPU (tools/oracle/trl_sft_head.py, TestTRLSFTHeadSavedAsTRL): the
//     mask is the only index tensor saved;
//   - ChunkedLogProbFunction.forward allocates seven fp32 [n] running
//     statistics (running_max, sum_exp, x_sum_exp, sq_sum_exp, z_sum,
//     max_before_target, target_logit: all of them, whatever outputs
//     asks) and one tile buffer mm_buf [min(n, 4096), 32768] in the
//     compute dtype (autocast's, else the hidden states'); each token
//     chunk is cast to the compute dtype (a copy when it differs) and each
//     vocabulary tile of the weight too (weight[start:end].to(...), a
//     copy [32768, H] when the weight is stored in another dtype: under
//     autocast with fp32 weights), then torch.mm(out=tile) and a Triton
//     fold; log_z = running_max + log(sum_exp) and logprobs = target_logit
//     - log_z ([n] fp32 each, log(sum_exp) a temporary). It saves hidden
//     (the [n, H] copy), weight, bias, targets and log_z;
//   - the [n] log-probabilities are scattered back: x.new_zeros(mask.shape)
//     .masked_scatter(mask, x), a zeros tensor and its scattered copy
//     ([rows, seq-1] fp32), MaskedScatterBackward0 saving the mask;
//   - the backward allocates grad_hidden = zeros(hidden.shape, fp32) and,
//     when lm_head trains, grad_weight = zeros(weight.shape, fp32), mm_buf
//     again and the same casts, recomputes each tile, turns it into the
//     logits' gradient in place, accumulates the two gradient GEMMs in
//     fp32 (torch.addmm(out_dtype=fp32) on CUDA from 16-bit inputs: no
//     fp32 copies of the operands) and returns grad_hidden.to(hidden's
//     dtype) and grad_weight.to(weight's dtype): copies when the dtypes
//     differ, the fp32 buffers themselves when they do not;
//   - IndexBackward0 makes zeros_like of the sliced hidden states
//     ([rows, seq-1, H]) and index_put_(accumulate=True) over them with
//     the saved mask, whose CUDA kernel (aten/src/ATen/native/cuda/Indexing.cu,
//     index_put_with_sort_kernel) takes the mask's nonzero again (int64
//     [n, 2], expandTensors) and sorts a linear index: linearIndex,
//     sorted_indices and orig_indices, int64 [n] each; SliceBackward0 then
//     makes the whole hidden states' gradient [rows, seq, H].
//
// n counts every position but each row's last as valid (memsh does not
// know how many tokens of a row are prompt or padding, which DPOTrainer
// masks to -100): an upper bound, as for the other losses.

// TRL's tile sizes (trl/kernels/chunked_logprob.py TOKEN_CHUNK_SIZE;
// trl/trainer/utils.py _CHUNKED_LOGPROB_CHUNK_SIZE).
const (
	trlTokenChunk = 4096
	trlVocabChunk = 32768
)

// trlOutputs are the per-token fields a trainer asks the fused head for
// beyond the log-probabilities (add_fused_lm_head(outputs=...)):
// SFTTrainer's entropy and is_top1 (its metrics), DPOTrainer's none,
// KTOTrainer's entropy and mean_logits (kto.go), GRPOTrainer's entropy
// (grpo.go); and scored, how many positions of each row have a label: 0
// for every one but the last, GRPO's completion length (its labels are
// -100 before the last logits_to_keep).
type trlOutputs struct {
	entropy, top1, meanLogits bool
	scored                    int64
}

// trlFusedLogProbs lowers TRL's fused LM head on x, the backbone's last
// hidden states [rows, seq, H], and returns the per-token
// log-probabilities [rows, seq-1] (fp32), the label mask it made and the
// other outputs asked for, scattered as the log-probabilities are.
func (b *Builder) trlFusedLogProbs(m *Model, x Value, want trlOutputs) (Value, Value, []Value) {
	s := b.Shape(x)
	rows, seq, h := Rows(s)/s[len(s)-2], s[len(s)-2], s[len(s)-1]
	n := rows * (seq - 1)
	if want.scored > 0 {
		n = rows * min(want.scored, seq-1)
	}
	vocab := m.Vocab
	done := b.Scope(m.Head())
	w, params := b.LinearParams(RoleLMHead, h, vocab, m.HeadBias)
	if t := b.embedWeight(m); t >= 0 {
		b.P.Params[w].TiedTo = t
	}
	done()
	defer b.Scope("fused_lm_head")()
	labels := b.Labels(x)
	dx := b.Dtype(x)
	compute := dx
	if b.Prec.Autocast {
		compute = b.Prec.Compute
	}
	wd := b.P.Params[w].DType
	if wd == units.InvalidDType {
		wd = b.Prec.Params
	}
	noGrad := func(v Value) Value { b.Val(v).Grad = false; return v }

	im := b.AddOp("ne", "label_mask", []Value{labels})
	b.Op(im).NoGradB = true
	mask := noGrad(b.Out(im, "label_mask", []int64{rows, seq - 1}, units.BOOL, "labels[:, 1:] != -100 (add_fused_lm_head)"))

	// hidden_states[mask]: the valid positions' hidden states, copied.
	ih := b.AddOp("index", "hidden_states_masked", []Value{x, mask})
	b.Op(ih).Syncs = 1 // nonzero's count, read on the host
	hs := b.Out(ih, "hidden_states_masked", []int64{n, h}, dx, "hidden_states[mask]: the valid positions' hidden states, copied (add_fused_lm_head, compact)")
	b.Op(ih).WorkF = units.INT64.Bytes(2 * n) // mask.nonzero() inside the index kernel
	gdt, _ := b.Val(x).GradBytes()
	b.Op(ih).Work = &WorkTensors{B: []int64{gdt.Bytes(rows * (seq - 1) * h), units.INT64.Bytes(2 * n), units.INT64.Bytes(n), units.INT64.Bytes(n), units.INT64.Bytes(n)}}
	b.Op(ih).WorkB = gdt.Bytes(rows*(seq-1)*h) + 5*units.INT64.Bytes(n)
	b.Save(ih, mask)

	it := b.AddOp("index", "labels_masked", []Value{labels, mask})
	b.Op(it).NoGradB = true
	targets := noGrad(b.Out(it, "labels_masked", []int64{n}, units.INT64, "labels[mask]: the valid positions' targets"))

	ic := b.AddOp(TRLLogProbOp, "chunked_logprob", []Value{hs, targets}, params...)
	logZ := noGrad(b.Out(ic, "log_z", []int64{n}, units.FP32, "each token's log-sum-exp over the vocabulary (saved)"))
	lp := b.Out(ic, "log_probs", []int64{n}, units.FP32, "the valid positions' log-probabilities (target_logit - log_z)")
	ent, top1 := NoValue, NoValue
	if want.entropy {
		// differentiable, but read for metrics only: no gradient reaches it
		// (the Function's backward gets None for it)
		ent = noGrad(b.Out(ic, "entropy", []int64{n}, units.FP32, "each token's entropy over the vocabulary (log_z - x_sum_exp / sum_exp), saved"))
	}
	if want.top1 {
		top1 = noGrad(b.Out(ic, "is_top1", []int64{n}, units.BOOL, "whether the target is the argmax (SFTTrainer's token accuracy)"))
	}
	mean := NoValue
	if want.meanLogits { // z_sum / vocab, marked non-differentiable
		mean = noGrad(b.Out(ic, "mean_logits", []int64{n}, units.FP32, "each token's mean logit over the vocabulary (z_sum / vocab: KTOTrainer's logits/chosen and logits/rejected metrics)"))
	}
	tile := compute.Bytes(min(n, trlTokenChunk) * min(vocab, trlVocabChunk))
	casts := func() []int64 {
		var c []int64
		if dx != compute {
			c = append(c, compute.Bytes(min(n, trlTokenChunk)*h)) // hidden[token chunk].to(compute)
		}
		if wd != compute {
			c = append(c, compute.Bytes(min(vocab, trlVocabChunk)*h)) // weight[tile].to(compute)
		}
		return c
	}
	work := &WorkTensors{}
	for range 8 { // seven running statistics, then log(sum_exp)
		work.F = append(work.F, units.FP32.Bytes(n))
	}
	if want.entropy {
		work.F = append(work.F, units.FP32.Bytes(n)) // x_sum_exp / sum_exp
	}
	if want.top1 {
		work.F = append(work.F, units.BOOL.Bytes(n), units.BOOL.Bytes(n)) // the two comparisons before their &
	}
	work.F = append(append(work.F, tile), casts()...)
	needs := !b.Eval && (b.Grad(hs) || b.Trainable(w))
	if needs {
		if b.Grad(hs) && dx != units.FP32 {
			work.B = append(work.B, units.FP32.Bytes(n*h)) // grad_hidden, fp32 before its .to(dx)
		}
		if b.Trainable(w) && wd != units.FP32 {
			work.B = append(work.B, units.FP32.Bytes(vocab*h)) // grad_weight, fp32 before its .to(wd)
		}
		work.B = append(append(work.B, tile), casts()...)
	}
	op := b.Op(ic)
	op.Work = work
	for _, t := range work.F {
		op.WorkF += t
	}
	for _, t := range work.B {
		op.WorkB += t
	}
	op.Flops = 2 * float64(n) * float64(h) * float64(vocab)
	if ent != NoValue {
		b.Save(ic, hs, targets, logZ, ent) // the entropy in log_z's second slot
	} else {
		b.Save(ic, hs, targets, logZ)
	}
	scatter := func(v Value, name, why string) Value {
		is := b.AddOp("masked_scatter", name, []Value{v, mask})
		b.Op(is).WorkF = b.Dtype(v).Bytes(rows * (seq - 1)) // x.new_zeros(mask.shape)
		out := b.Out(is, name, []int64{rows, seq - 1}, b.Dtype(v), why+", zero where the label is ignored (new_zeros(mask.shape).masked_scatter(mask, x))")
		b.Save(is, mask)
		return out
	}
	out := scatter(lp, "log_probs", "per-token log-probabilities")
	var more []Value
	if ent != NoValue {
		more = append(more, scatter(ent, "entropy_scattered", "per-token entropy"))
	}
	if top1 != NoValue {
		more = append(more, scatter(top1, "is_top1_scattered", "per-token argmax hits"))
	}
	if mean != NoValue {
		more = append(more, scatter(mean, "mean_logits_scattered", "per-token mean logits"))
	}
	return out, mask, more
}
