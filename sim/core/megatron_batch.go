package core

import (
	"fmt"

	"github.com/memsh/memsh/sim/units"
)

// The values of Plan.DataloaderMask.
const (
	DataloaderMaskOn  = "on"
	DataloaderMaskOff = "off"
)

// megatronBatch is what Megatron-LM's get_batch (pretrain_gpt.py and
// megatron/core/utils.py's get_batch_on_this_tp_rank, at
// NVIDIA/Megatron-LM d98e8a64) loads for one micro-batch onto a first or
// last pipeline stage besides the tokens and the labels memsh's batch
// ops hold, on every tensor-parallel rank (rank 0 copies the dataset's,
// the others receive its broadcast): position_ids, [batch, seq] int64
// (first stage), loss_mask, [batch, seq] fp32 (last stage), and while
// create_attention_mask_in_dataloader holds (Megatron's default; off
// with --no-create-attention-mask-in-dataloader or packed rows) the
// dataset's causal attention_mask, [batch, 1, seq, seq] bool (GPTDataset,
// _get_ltor_masks_and_position_ids), of which a context-parallel rank
// keeps its own query rows (get_batch_on_this_cp_rank). forward_step
// drops the mask and the position ids when it returns (Transformer
// Engine's causal attention never reads the mask; rotary positions come
// from the sequence length), so they are freed after the stage's
// forward; loss_func's product keeps the loss mask for its backward.
type megatronBatch struct {
	dropped  []Value // freed when the forward step returns
	lossMask Value   // NoValue off the last stage
}

// loadMegatronBatch loads the micro-batch's tensors of a first and/or
// last stage under precision "megatron"; nothing elsewhere.
func (b *Builder) loadMegatronBatch(first, last bool) megatronBatch {
	mb := megatronBatch{lossMask: NoValue}
	if !b.MegatronKernels() || !first && !last {
		return mb
	}
	i := b.AddOp("batch", "megatron_batch", nil)
	out := func(name string, shape []int64, dt units.DType, why string) Value {
		v := b.Out(i, name, shape, dt, why)
		b.Val(v).Grad = false
		return v
	}
	if first {
		mb.dropped = append(mb.dropped, out("position_ids", []int64{b.Batch, b.Seq}, units.INT64, "get_batch's position_ids (dropped when forward_step returns)"))
	}
	if b.Ft != nil && b.Ft.megatronMask {
		full := b.Seq * max(b.Par.cp, 1)
		mb.dropped = append(mb.dropped, out("attention_mask", []int64{b.Batch, 1, b.Seq, full}, units.BOOL,
			fmt.Sprintf("the dataloader's causal attention_mask, [batch, 1, %d, %d] bool (create_attention_mask_in_dataloader)", b.Seq, full)))
	}
	if last {
		mb.lossMask = out("loss_mask", []int64{b.Batch, b.Seq}, units.FP32, "get_batch's loss_mask (loss_func's product keeps it)")
	}
	return mb
}

// megatronLossFunc is loss_func's torch.sum(losses * loss_mask) over the
// model's loss, keeping the loss mask for its backward, and drops what
// forward_step does not return; loss itself where the stage loaded no
// loss mask.
func (b *Builder) megatronLossFunc(loss Value, mb megatronBatch) Value {
	if mb.lossMask == NoValue {
		return loss
	}
	i := b.AddOp("mul", "loss_func", []Value{loss, mb.lossMask})
	out := b.Out(i, "loss", nil, units.FP32, "loss_func's masked sum of the losses")
	b.Save(i, mb.lossMask)
	return out
}

// dropMegatronBatch frees what forward_step drops when it returns.
func (b *Builder) dropMegatronBatch(mb megatronBatch) {
	if len(mb.dropped) > 0 {
		b.Release("megatron_batch", mb.dropped)
	}
}

// validateDataloaderMask checks Plan.DataloaderMask: Megatron-LM's
// dataloader makes it, so it is set only under precision "megatron".
func (p *Plan) validateDataloaderMask() error {
	switch {
	case p.DataloaderMask != "" && p.DataloaderMask != DataloaderMaskOn && p.DataloaderMask != DataloaderMaskOff:
		return &units.Error{Path: "train", Msg: fmt.Sprintf("dataloader_mask must be True, False or None (got %q)", p.DataloaderMask)}
	case p.DataloaderMask != "" && !p.Precision.Megatron:
		return &units.Error{Path: "train", Msg: fmt.Sprintf("dataloader_mask is Megatron-LM's dataloader's [batch, 1, seq, seq] attention mask; it applies under precision=\"megatron\" (got %q)", p.Precision.Name),
			Hint: "drop dataloader_mask; a Hugging Face collator's attention_mask is attention_mask="}
	case p.DataloaderMask == DataloaderMaskOn && p.TokensPerBatch > 0:
		return &units.Error{Path: "train", Msg: "dataloader_mask: packed rows (tokens_per_batch) come with cu_seqlens and no attention mask (Megatron turns create_attention_mask_in_dataloader off)",
			Hint: "drop dataloader_mask or tokens_per_batch"}
	}
	return nil
}

// megatronMask is whether the micro-batch carries the dataloader's
// attention mask: Megatron's default under precision "megatron" without
// packed rows, unless the plan says.
func (p *Plan) megatronMask() bool {
	if !p.Precision.Megatron || p.TokensPerBatch > 0 {
		return false
	}
	return p.DataloaderMask != DataloaderMaskOff
}
