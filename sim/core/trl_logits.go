package core

import "github.com/memsh/memsh/sim/units"

// TRL 1.8 to 1.13's log-probabilities (1.8.0 read: trl/trainer/
// dpo_trainer.py _compute_loss and trl/trainer/utils.py
// selective_log_softmax), what Axolotl's DPO runs (it pins trl 1.8.0):
//
//   - outputs = model(**model_kwargs): the whole logits [rows, seq, V], in
//     lm_head's output dtype, held by outputs until _compute_loss returns
//     (after the reference forward and the loss);
//   - shift_logits = logits[..., :-1, :] and shift_labels = input_ids[...,
//     1:] (views); selective_log_softmax over 16-bit logits loops over the
//     rows: F.log_softmax(row_logits) ([seq-1, V], saved by
//     LogSoftmaxBackward0, which keeps its result) and .gather(-1,
//     row_labels) ([seq-1, 1]; GatherBackward0 saves the index, a view of
//     input_ids), then torch.stack ([rows, seq-1]);
//   - per_token_logps[shift_completion_mask == 0] = 0.0 (a bool mask;
//     index_put_ in place) and .sum(dim=1) ([rows]);
//   - the backward runs each row's GatherBackward0 (a [seq-1, V] gradient)
//     and LogSoftmaxBackward0 (the row's gradient), then the loop's
//     UnbindBackward0 stacks the rows' gradients and SliceBackward0 makes
//     the logits' gradient [rows, seq, V]. memsh makes that gradient at
//     the first row's backward and adds the rows into it: at that moment
//     it holds the logits' gradient where PyTorch holds one row's, after
//     which PyTorch's rows' gradients and stack catch up (the same bytes
//     once the rows are stacked).
//
// Over fp32 logits selective_log_softmax gathers first and takes a
// logsumexp per row, which keeps the logits for the backward: not
// modelled (validateTRLLogits).

// trlRowLogProbs lowers selective_log_softmax over logits x ([rows, seq,
// V]) and the completion mask, and returns the summed log-probabilities
// of each row ([rows], in the logits' dtype).
func (b *Builder) trlRowLogProbs(x Value) Value {
	s := b.Shape(x)
	rows, seq := Rows(s)/s[len(s)-2], s[len(s)-2]
	ld := b.Dtype(x)
	if !ld.Float() || ld == units.FP32 || ld == units.FP64 {
		panic(LowerError{&units.Error{Path: "dpo", Msg: "trl=\"1.8\": selective_log_softmax over " + ld.Name() + " logits (a gather and a logsumexp per row, the logits kept for the backward) is not modelled",
			Hint: `use precision="bf16", "bf16-mixed" or "fp16", or trl="1.15"`}})
	}
	labels := b.Labels(x) // input_ids: shift_labels is a view of them
	defer b.Scope("selective_log_softmax")()
	lp := b.trlRowLogSoftmax(x, labels, seq-1)
	im := b.AddOp("eq", "completion_mask", []Value{labels})
	b.Op(im).NoGradB = true
	mask := b.Out(im, "completion_mask", []int64{rows, seq - 1}, units.BOOL, "shift_completion_mask == 0, the positions zeroed in place (index_put_)")
	b.Val(mask).Grad = false
	isum := b.AddOp("sum", "logps", []Value{lp, mask})
	return b.Out(isum, "logps", []int64{rows}, ld, "each row's summed log-probability (per_token_logps.sum(dim=1))")
}

// trlRowLogSoftmax lowers selective_log_softmax's loop over 16-bit logits
// x ([rows, ..., V]): each row's log_softmax over its last positions
// ([positions, V], saved by LogSoftmaxBackward0) and the gather of its
// labels, stacked into the per-token log-probabilities [rows, positions]
// in x's dtype, under the caller's scope. labels are input_ids (the
// gather's index is a view).
func (b *Builder) trlRowLogSoftmax(x, labels Value, positions int64) Value {
	s := b.Shape(x)
	rows, vocab := s[0], s[len(s)-1]
	ld := b.Dtype(x)
	rowsOut := make([]Value, 0, rows)
	for r := range rows {
		k := Itoa(r)
		il := b.AddOp("log_softmax", "log_softmax_"+k, []Value{x})
		lsm := b.Out(il, "row_log_softmax."+k, []int64{positions, vocab}, ld, "F.log_softmax of one row's shifted logits (selective_log_softmax's loop), saved for its backward")
		b.Save(il, lsm)
		ig := b.AddOp("gather", "gather_"+k, []Value{lsm, labels})
		rowsOut = append(rowsOut, b.Out(ig, "row_logps."+k, []int64{positions, 1}, ld, "the row's targets' log-probabilities (gather)"))
	}
	is := b.AddOp("stack", "per_token_logps", rowsOut)
	b.Op(is).NoGradB = true // StackBackward0 hands each row a view of the gradient
	return b.Out(is, "per_token_logps", []int64{rows, positions}, ld, "the rows' per-token log-probabilities, stacked")
}
