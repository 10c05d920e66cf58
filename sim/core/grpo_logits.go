package core

import "github.com/memsh/memsh/sim/units"

// GRPOTrainer's log-probabilities before TRL's fused LM head (Preference
// .Logits: trl="1.8" for TRL 1.8 and 1.9, "1.10" for 1.10 to 1.13; trl/
// trainer/grpo_trainer.py _get_per_token_logps_and_entropies of the
// 1.8.0, 1.10.0 and 1.13.0 wheels and v1.9.0 in TRL's repository, with
// selective_log_softmax and entropy_from_logits of trl/trainer/utils.py,
// the same at all of them). _compute_loss calls it with compute_entropy
// True and every row at once (batch_size None):
//
//   - model(input_ids, attention_mask, logits_to_keep=completion + 1,
//     use_cache=False): transformers' causal-LM forward runs lm_head on
//     hidden_states[:, -logits_to_keep:, :] alone (LlamaForCausalLM
//     .forward's slice_indices), so the logits are [rows, completion + 1,
//     V] in lm_head's output dtype (bf16 under a bf16 model or autocast;
//     transformers 4.46 and later no longer upcast them). The slice is a
//     view; lm_head's matmul folds it into [rows x (completion + 1), H],
//     a copy when there is more than one row (the slice is not contiguous
//     across rows: aten's matmul reshapes), the input MmBackward0 saves;
//     under autocast the cast to the compute dtype is that copy instead;
//   - logits[:, :-1, :] and [:, -logits_to_keep:, :]: views [rows,
//     completion, V];
//   - the temperature: 1.8 and 1.9 divide the view in place
//     (logits.div_(self.temperature): no new tensor; its backward is
//     CopySlices', which makes the base's gradient with new_empty_strided,
//     clones the slice's gradient and divides it: two [rows, completion,
//     V] tensors beside the logits' gradient); 1.10 to 1.13 divide into a
//     new tensor (logits = logits / self.temperature: [rows, completion,
//     V], whose DivBackward0 saves nothing), and outputs keeps the logits
//     until the function returns. Both divide at temperature 1.0 too;
//   - selective_log_softmax(logits, completion_ids) over 16-bit logits: a
//     log_softmax per row, [completion, V] each, saved (trl_logits.go),
//     per-token log-probabilities [rows, completion] in the logits' dtype;
//   - entropy_from_logits(logits) under torch.no_grad() (entropy_coef 0:
//     the entropy feeds the logging and top_entropy_quantile only): its
//     reshape(-1, V) copies the divided-in-place view when there is more
//     than one row and is a view of 1.10's contiguous quotient, then
//     three [128, V] tensors per chunk (entropyFromLogits);
//   - the function returns: outputs, the logits and the quotient go; the
//     rows' saved log_softmax stay for the backward.
//
// Measured on the CPU with tools/oracle/grpo_live.py (sim/grpo_logits_test.go):
// the vocabulary-sized tensors peak in the entropy's multiply at the
// logits, the rows' log_softmax, the flattened copy (1.8) or the quotient
// (1.10) and the chunk's three tensors.

// logitsToKeep is transformers' hidden_states[:, -n:, :] before lm_head
// on x ([rows, seq, H]) as lm_head's matmul reads it: a copy [rows, n, H]
// when there is more than one row and more than one position kept and no
// autocast cast copies it instead, else a view (one position: the fold of
// [rows, 1, H] to [rows, H] is a view, strided rows that mm reads as they
// are) (no new storage; memsh allocates no gradient for a view,
// so the [rows, n, H] gradient the head's backward hands the slice before
// SliceBackward0 is left out there).
func (b *Builder) logitsToKeep(x Value, n int64) Value {
	s := b.Shape(x)
	rows, seq, h := Rows(s)/s[len(s)-2], s[len(s)-2], s[len(s)-1]
	if n >= seq {
		return x
	}
	dx := b.Dtype(x)
	i := b.AddOp("slice", "logits_to_keep", []Value{x})
	if rows == 1 || n == 1 || (b.Prec.Autocast && dx != b.Prec.Compute) {
		v := b.Out(i, "hidden_states_kept", []int64{rows, n, h}, dx, "hidden_states[:, -logits_to_keep:, :]: a view (no new storage)")
		b.Val(v).Bytes = 0
		b.Op(i).Bytes = 0
		return v
	}
	v := b.Out(i, "hidden_states_kept", []int64{rows, n, h}, dx, "hidden_states[:, -logits_to_keep:, :] folded for lm_head's matmul: a copy (the slice is not contiguous across rows), saved by MmBackward0 when lm_head trains")
	b.Op(i).Bytes = 2 * float64(b.Val(v).Bytes)
	return v
}

// grpoLogitsLogProbs lowers _get_per_token_logps_and_entropies after the
// forward on the logits ([rows, completion + 1, V]) and the batch's
// input_ids in, and returns the per-token log-probabilities [rows,
// completion] and the entropies [rows x completion], in the logits'
// dtype.
func (b *Builder) grpoLogitsLogProbs(in, logits Value) (Value, Value) {
	k := b.pref.GRPOConfig.Completion
	s := b.Shape(logits)
	rows, vocab := s[0], s[len(s)-1]
	ld := b.Dtype(logits)
	shape := []int64{rows, k, vocab}
	bytes := ld.Bytes(rows * k * vocab)
	var src Value
	if b.pref.TRL == TRLLogitsDiv {
		src = b.Ew("div", "temperature", []Value{logits}, shape, ld, "logits[:, :-1][:, -logits_to_keep:] / temperature: a new tensor (TRL 1.10 to 1.13)")
	} else {
		i := b.AddOp("div", "temperature_", []Value{logits})
		src = b.Out(i, "logits_divided", shape, ld, "logits[:, :-1][:, -logits_to_keep:].div_(temperature): in place (TRL 1.8 and 1.9), no new storage")
		b.Val(src).Bytes = 0
		op := b.Op(i)
		op.Bytes, op.Flops = 2*float64(bytes), float64(rows*k*vocab)
		// CopySlices' backward beside the logits' gradient: the slice's
		// gradient cloned and DivBackward0's quotient.
		op.WorkB, op.WorkBParts = 2*bytes, 2
	}
	labels := in // completion_ids = input_ids[:, -logits_to_keep:], a view
	if b.Dtype(in) != units.INT64 {
		labels = b.Labels(in)
	}
	done := b.Scope("selective_log_softmax")
	lp := b.trlRowLogSoftmax(src, labels, k)
	done()
	noGrad := b.NoGrad()
	done = b.Scope("entropy")
	ent := b.entropyFromLogits(src, rows, k, vocab, rows > 1 && b.pref.TRL == TRLLogits)
	done()
	noGrad()
	b.KeepAlive("outputs.logits", logits) // outputs, until the function returns
	return lp, ent
}
