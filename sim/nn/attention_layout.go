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
	switch a.tpRefusal(tp) {
	case attnTPHeads:
		return &units.Error{Path: path, Msg: fmt.Sprintf("tp=%d does not divide %d attention heads", tp, a.Heads), Hint: "tp must divide the number of attention heads"}
	case attnTPKVHeads:
		return &units.Error{Path: path, Msg: fmt.Sprintf("tp=%d does not divide %d kv heads (nor is it a multiple of them)", tp, a.Kv())}
	}
	return nil
}

// tpRefusal is checkTP's check: attnFits, or which heads tp does not split.
func (a *Attention) tpRefusal(tp int64) attnRefusal {
	if a.Heads%tp != 0 {
		return attnTPHeads
	}
	if kv := a.Kv(); kv%tp != 0 && tp%kv != 0 {
		return attnTPKVHeads
	}
	return attnFits
}

func (a *Attention) InDim() int64 {
	if a.InWidth > 0 {
		return a.InWidth
	}
	return a.Dim
}
func (a *Attention) OutDim() int64 { return a.Dim }

// attnRefusal names the first of the attention's layout checks that
// refuses a layout (Attention.layoutRefusal): CheckLayout words it,
// FitsLayout asks whether there is one, so that the two cannot disagree.
type attnRefusal uint8

const (
	attnFits         attnRefusal = iota
	attnTPHeads                  // tp does not divide the heads (checkTP)
	attnTPKVHeads                // tp neither divides the kv heads nor is a multiple of them (checkTP)
	attnTPAdapters               // tp > 1 with adapters or a wider input (Zamba2's shared attention)
	attnTPSubNorm                // tp > 1 with a norm before o_proj (BitNet)
	attnTPWideQKNorm             // tp > 1 with q_norm/k_norm over all the heads (OLMo 2)
	attnDifferential             // tp or cp > 1 on DiffLlama's differential attention
	attnM3                       // tp or cp > 1 on MiniMax M3's sparse layers
	attnUlysses                  // Ulysses' cp does not split each rank's heads (checkUlysses)
)

// layoutRefusal is the attention's layout rule, its checks in order:
// tensor parallelism divides the heads (tpRefusal), is not asked of a
// layer it is not modelled for, and Ulysses divides the heads of each
// tensor-parallel rank (ulyssesSplit).
func (a *Attention) layoutRefusal(par core.Parallelism) attnRefusal {
	n := par.Norm()
	if r := a.tpRefusal(n.TP); r != attnFits {
		return r
	}
	switch {
	case (a.InWidth > 0 || a.AdapterRank > 0) && n.TP > 1:
		return attnTPAdapters
	case a.SubNorm && n.TP > 1:
		return attnTPSubNorm
	case a.QKNormWide && n.TP > 1:
		return attnTPWideQKNorm
	case a.Differential && (n.TP > 1 || n.CP > 1):
		return attnDifferential
	case a.M3Indexer != nil && (n.TP > 1 || n.CP > 1):
		return attnM3
	}
	if _, _, _, ok := a.ulyssesSplit(n); !ok {
		return attnUlysses
	}
	return attnFits
}

// CheckLayout words layoutRefusal's refusal.
func (a *Attention) CheckLayout(path string, par core.Parallelism) error {
	n := par.Norm()
	switch a.layoutRefusal(par) {
	case attnFits:
		return nil
	case attnTPHeads, attnTPKVHeads:
		return a.checkTP(path, n.TP)
	case attnTPAdapters:
		return &units.Error{Path: path, Msg: "tensor parallelism is not modelled for an attention with adapters or a wider input (Zamba2's shared attention)",
			Hint: "use tp=1 (FSDP shards it)"}
	case attnTPSubNorm:
		return &units.Error{Path: path, Msg: "tensor parallelism is not modelled for an attention with a norm over its output before o_proj (BitNet's attn_sub_norm: each rank would norm a shard of the features)",
			Hint: "use tp=1 (FSDP shards it)"}
	case attnTPWideQKNorm:
		return wideQKNormError(path, n.TP)
	case attnDifferential:
		return differentialLayoutError(path)
	case attnM3:
		return &units.Error{Path: path, Msg: fmt.Sprintf("tp=%d, cp=%d: tensor and context parallelism are not modelled for MiniMax M3's sparse layers (the indexer scores every query against every key, and its mask covers every head)", n.TP, n.CP),
			Hint: "use tp=1 and cp=1 (FSDP or ZeRO shard the model)"}
	}
	return a.checkUlysses(path, par)
}

// FitsLayout is CheckLayout(path, par) == nil without the refusal
// (core.LayoutFitter): the layout check's path-free pass asks it at
// every layout a search enumerates, and refused tens of thousands of
// them, at their first attention, with an error each it dropped.
func (a *Attention) FitsLayout(par core.Parallelism) bool {
	return a.layoutRefusal(par) == attnFits
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
