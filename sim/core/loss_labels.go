package core

import "github.com/memsh/memsh/sim/units"

// What transformers' causal-LM loss allocates to shift the labels by one
// token, so that position t predicts token t+1 (ForCausalLMLoss in
// loss/loss_utils.py; a model's own loss before it called loss_function):
//
//   - transformers 4.49 and later (Model.PadLabels): labels =
//     nn.functional.pad(labels, (0, 1), value=ignore_index), a new
//     [batch, seq + 1] int64 tensor, then shift_labels = labels[...,
//     1:].contiguous(). At batch 1 the slice is contiguous already: no
//     copy, and cross-entropy saves a view of the padded tensor, which
//     lives until the backward. At a larger batch the slice is copied,
//     [batch, seq] int64, and that copy is what cross-entropy saves; the
//     padded tensor is the function's local, freed when it returns.
//   - before 4.49 (Model.ShiftLogits): shift_labels = labels[...,
//     1:].contiguous() beside the logits' shift copy: a view of the
//     batch's labels at batch 1, a [batch, seq - 1] int64 copy, saved,
//     at a larger batch.
//
// Measured on the CPU (tools/oracle/loss_labels.py, transformers 5.25.0,
// torch 2.15.0: every int64 storage an aten op made in one step of a
// one-layer Llama, with the phase it died in, and which autograd saved):
// at batch 1 and 16 tokens constant_pad_nd's [1, 17] (136 B), saved,
// freed in the backward; at batch 2 constant_pad_nd's [2, 17] (272 B),
// freed in the forward, and clone's [2, 16] (256 B), saved, freed in the
// backward. TestLossLabelsAsTransformers holds memsh to them.

// labelShift is how a loss shifts its targets against the logits.
type labelShift uint8

const (
	noShift     labelShift = iota // the labels come shifted (torchtitan's, Megatron's loaders) or need none
	shiftCopies                   // logits[..., :-1, :] and labels[..., 1:] copied (transformers before 4.49)
	padLabels                     // labels padded by one ignored column, then sliced (transformers 4.49 and later)
)

// lossShift is how the plain cross-entropy of m shifts its targets: a
// vocabulary-parallel loss (Megatron's, torch's loss_parallel) and every
// other loss take the labels as the batch gives them.
func (b *Builder) lossShift(m *Model) labelShift {
	if (m.Loss != "" && m.Loss != "cross_entropy") || b.Par.megatronCE || b.Par.torchCE {
		return noShift
	}
	switch {
	case m.ShiftLogits:
		return shiftCopies
	case m.PadLabels:
		return padLabels
	}
	return noShift
}

// shiftedLabels is the target cross-entropy reads for logits x ([..,
// tokens, vocab], before any shift of theirs) under shift, and the loss
// function's local that dies when it returns (NoValue when none is
// left to free: see the comment above).
func (b *Builder) shiftedLabels(x Value, shift labelShift) (target, local Value) {
	labels := b.Labels(x)
	s := b.Shape(labels)
	batch, seq := Numel(s[:len(s)-1]), s[len(s)-1]
	switch shift {
	case padLabels:
		ip := b.AddOp("pad", "pad_labels", []Value{labels})
		padded := b.Out(ip, "labels_padded", []int64{batch, seq + 1}, units.INT64,
			"the labels padded with one ignored column (nn.functional.pad in ForCausalLMLoss)")
		b.Op(ip).Bytes += float64(b.Val(labels).Bytes)
		if batch == 1 {
			return padded, NoValue // labels[..., 1:] is contiguous: a view of the padded storage
		}
		return b.labelsCopy(padded, []int64{batch, seq}), padded
	case shiftCopies:
		if batch == 1 || seq < 2 {
			return labels, NoValue // a view of the batch's labels
		}
		return b.labelsCopy(labels, []int64{batch, seq - 1}), NoValue
	}
	return labels, NoValue
}

// labelsCopy is labels[..., 1:].contiguous() of src at a batch over 1:
// an int64 copy of shape.
func (b *Builder) labelsCopy(src Value, shape []int64) Value {
	i := b.AddOp("contiguous", "shift_labels", []Value{src})
	v := b.Out(i, "shift_labels", shape, units.INT64, "labels[..., 1:].contiguous(): the labels shifted by one token, copied at a batch over 1")
	b.Op(i).Bytes += float64(b.Val(v).Bytes)
	return v
}
