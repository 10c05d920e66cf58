package core

import "github.com/memsh/memsh/sim/units"

// megatronLabels is what Megatron-Core's vocabulary-parallel losses read
// as their targets: the batch's labels, [batch, seq] int64 as get_batch
// loads them (already shifted by the dataset: GPTDataset's labels are
// the tokens one position on), transposed to the [seq, batch] layout of
// the logits by labels.transpose(0, 1).contiguous()
// (LanguageModule.compute_language_model_loss,
// megatron/core/models/common/language_module/language_module.py): a copy
// at a batch over 1, a view of [1, seq] at batch 1. The copy is the
// function's local: freed when it returns, after the loss's forward
// (vocab_parallel_cross_entropy saves its own masked copy of the targets,
// masked_target_1d; Transformer Engine's parallel_cross_entropy saves
// none). local is the copy to release after the loss op, or NoValue.
func (b *Builder) megatronLabels(x Value) (target, local Value) {
	labels := b.Labels(x)
	s := b.Shape(labels)
	batch, seq := Numel(s[:len(s)-1]), s[len(s)-1]
	if batch == 1 {
		return labels, NoValue
	}
	i := b.AddOp("contiguous", "labels_transposed", []Value{labels})
	v := b.Out(i, "labels_transposed", []int64{seq, batch}, units.INT64, "labels.transpose(0, 1).contiguous(): the targets in the logits' [seq, batch] layout (compute_language_model_loss)")
	b.Op(i).Bytes += float64(b.Val(v).Bytes)
	return v, v
}
