package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// The attention block's layout checks: what tensor parallelism and
// packed documents need of it, and its widths per rank.

// perRank is the attention each TP rank runs: heads/tp query heads and
// kv/tp key-value heads (one replicated kv head when kv < tp).
func (a *Attention) perRank(tp int64) *Attention {
	if tp <= 1 {
		return a
	}
	la := *a
	la.HeadDim = a.Hd()
	la.Heads = a.Heads / tp
	la.KVHeads = max(a.Kv()/tp, 1)
	return &la
}

// checkTP: Megatron splits attention heads over TP ranks; kv heads too
// (GQA), replicated when there are fewer kv heads than ranks (as vLLM and
// Megatron-Bridge do for tp > num_query_groups).
func (a *Attention) checkTP(path string, tp int64) error {
	if a.Heads%tp != 0 {
		return &units.Error{Path: path, Msg: fmt.Sprintf("tp=%d does not divide %d attention heads", tp, a.Heads), Hint: "tp must divide the number of attention heads"}
	}
	if kv := a.Kv(); kv%tp != 0 && tp%kv != 0 {
		return &units.Error{Path: path, Msg: fmt.Sprintf("tp=%d does not divide %d kv heads (nor is it a multiple of them)", tp, kv)}
	}
	return nil
}

func (a *Attention) InDim() int64 {
	if a.InWidth > 0 {
		return a.InWidth
	}
	return a.Dim
}
func (a *Attention) OutDim() int64 { return a.Dim }

// CheckLayout checks that tensor parallelism divides the heads (checkTP),
// and Ulysses the heads of each tensor-parallel rank (checkUlysses).
func (a *Attention) CheckLayout(path string, par core.Parallelism) error {
	if err := a.checkTP(path, max(par.TP, 1)); err != nil {
		return err
	}
	if (a.InWidth > 0 || a.AdapterRank > 0) && par.TP > 1 {
		return &units.Error{Path: path, Msg: "tensor parallelism is not modelled for an attention with adapters or a wider input (Zamba2's shared attention)",
			Hint: "use tp=1 (FSDP shards it)"}
	}
	if a.SubNorm && par.TP > 1 {
		return &units.Error{Path: path, Msg: "tensor parallelism is not modelled for an attention with a norm over its output before o_proj (BitNet's attn_sub_norm: each rank would norm a shard of the features)",
			Hint: "use tp=1 (FSDP shards it)"}
	}
	if err := a.checkWideQKNorm(path, par.TP); err != nil {
		return err
	}
	if err := a.checkDifferentialLayout(path, par); err != nil {
		return err
	}
	if err := a.checkM3Layout(path, par); err != nil {
		return err
	}
	return a.checkUlysses(path, par)
}

// checkM3Layout refuses tensor and context parallelism on a layer with
// MiniMax M3's indexer (M3Indexer).
func (a *Attention) checkM3Layout(path string, par core.Parallelism) error {
	if n := par.Norm(); a.M3Indexer != nil && (n.CP > 1 || n.TP > 1) {
		return &units.Error{Path: path, Msg: fmt.Sprintf("tp=%d, cp=%d: tensor and context parallelism are not modelled for MiniMax M3's sparse layers (the indexer scores every query against every key, and its mask covers every head)", n.TP, n.CP),
			Hint: "use tp=1 and cp=1 (FSDP or ZeRO shard the model)"}
	}
	return nil
}

// CheckPacking: packed documents need flash attention's varlen kernel
// (core/packing.go) or FlexAttention's document BlockMask (flex_attention.go);
// eager and SDPA attention need a block-diagonal mask, which transformers
// 4.54 and later make for one packed row (PackedMask, NoCacheMask) when
// the forward has no cache (masking_utils skips the check with one).
func (a *Attention) CheckPacking(path string, p core.Packing) error {
	switch {
	case a.kvNative():
		return nil
	case !a.PackedMask && !a.NoCacheMask || !p.Row:
		return fmt.Errorf("%s runs %s attention", path, a.Impl)
	case !a.PackedMask && !p.PackedSequenceMask:
		return fmt.Errorf("%s runs %s attention under transformers 4.54-4.57 on runtime %q, whose create_causal_mask drops the packed-sequence mask before torch 2.6", path, a.Impl, p.Runtime)
	case p.ForwardCache:
		return fmt.Errorf("%s runs %s attention with use_cache=True, under which transformers' masking_utils does not look for packed rows (pass use_cache=False, as the Trainer does)", path, a.Impl)
	}
	return nil
}
