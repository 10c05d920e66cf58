package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// M3Indexer is MiniMax M3's lightning indexer (MiniMaxM3VLIndexer,
// models/minimax_m3_vl/modeling_minimax_m3_vl.py at transformers 5.25.0),
// in the attention of the layers layer_types calls "minimax_m3_sparse":
//
//	q = q_norm(q_proj(x).view(B, S, heads, head_dim))  # Gemma's RMSNorm per head
//	k = k_norm(k_proj(x).view(B, S, 1, head_dim))      # one key per token
//	q, k = rope(q, k, cos[..., :head_dim], sin[..., :head_dim])
//	scores = q.float() @ k.float()^T                   # [B, heads, S, S] fp32
//	scores = scores.masked_fill(future, -inf), F.pad to whole blocks
//	blocks = scores.view(..., blocks, block).amax(-1)  # [B, heads, S, blocks]
//	blocks.scatter_(local blocks, inf); topk(top_k) -> block indices
//
// It runs with autograd on, but its result is integer indices: no
// gradient reaches it, its weights get no .grad (no optimizer state), and
// what its ops save dies with the forward (core.Builder.DeadGraph;
// hf_block_saved.py's grad_bytes: the indexer's weights are the gap).
//
// Under eager and SDPA (transformers has no flash path: the class sets
// _supports_flash_attn = False) build_block_mask makes the indices a mask
// of every attention head: a bool [B, heads, S, blocks] verdict repeated
// over each block's keys and over the query heads of each indexer head,
// and with the causal mask (token_future) an additive [B, heads, S, S]
// mask in the query's dtype (torch.zeros(...).masked_fill(~keep, min)),
// which SDPA's kernel keeps for backward (measured: a [2, 4, 32, 32]
// float32 tensor saved by ScaledDotProductFlashAttentionForCpuBackward0)
// and eager attention adds to its scores.
type M3Indexer struct {
	Heads   int64 // index_n_heads
	HeadDim int64 // index_head_dim
	Block   int64 // index_block_size
	TopK    int64 // index_topk_blocks
	Local   int64 // index_local_blocks
}

// params counts q_proj, k_proj, q_norm and k_norm.
func (ix *M3Indexer) params(dim int64) int64 {
	return dim*ix.Heads*ix.HeadDim + dim*ix.HeadDim + 2*ix.HeadDim
}

func (ix *M3Indexer) validate(path string, a *Attention) error {
	for _, f := range []struct {
		name string
		v    int64
	}{{"index_n_heads", ix.Heads}, {"index_head_dim", ix.HeadDim}, {"index_block_size", ix.Block}, {"index_topk_blocks", ix.TopK}} {
		if f.v <= 0 {
			return &units.Error{Path: path, Msg: fmt.Sprintf("the lightning indexer's %s must be positive (got %d)", f.name, f.v)}
		}
	}
	if ix.Local < 0 {
		return &units.Error{Path: path, Msg: fmt.Sprintf("the lightning indexer's index_local_blocks must not be negative (got %d)", ix.Local)}
	}
	if a.Heads%ix.Heads != 0 {
		return &units.Error{Path: path, Msg: fmt.Sprintf("index_n_heads (%d) must divide the %d attention heads (build_block_mask repeats each indexer head's blocks over heads / index_n_heads query heads)", ix.Heads, a.Heads)}
	}
	if a.Impl != "sdpa" && a.Impl != "eager" {
		return &units.Error{Path: path, Msg: fmt.Sprintf("%s attention is not modelled for MiniMax M3's sparse layers", a.Impl),
			Hint: `use attn="sdpa" or "eager": transformers has no flash path for this model (_supports_flash_attn = False)`}
	}
	return nil
}

// blockMask lowers the indexer on x (the layer's input, [B, S, dim]) and
// build_block_mask: the additive [B, heads, S, S] mask in dt the kernel
// reads (heads: this rank's).
func (a *Attention) m3BlockMask(b *core.Builder, x core.Value, s []int64, heads int64, dt units.DType) core.Value {
	ix := a.M3Indexer
	seq := s[len(s)-2]
	batch := core.Rows(s) / seq
	h, d := ix.Heads, ix.HeadDim
	blocks := (seq + ix.Block - 1) / ix.Block
	topk := min(ix.TopK, blocks)
	var idx core.Value
	func() {
		defer b.DeadGraph("indexer_graph")() // recorded, but no gradient reaches it
		defer b.Scope("indexer")()
		q := b.Linear("q_proj", core.RoleLinear, x, a.Dim, h*d, false)
		q = qkHeadNorm(b, "q_norm", q, s, h, d, true)
		k := b.Linear("k_proj", core.RoleLinear, x, a.Dim, d, false)
		k = qkHeadNorm(b, "k_norm", k, s, 1, d, true)
		if a.Rope {
			q = a.rotate(b, "q", q, core.WithLast(s, h*d))
			k = a.rotate(b, "k", k, core.WithLast(s, d))
		}
		qf := b.Cast(q, units.FP32, "idx_q.float()")
		kf := b.Cast(k, units.FP32, "idx_k.float()")
		plane := []int64{batch, h, seq, seq}
		mm := b.AddOp("matmul", "scores", []core.Value{qf, kf})
		scores := b.Out(mm, "scores", plane, units.FP32, "indexer scores, every index head x query x key (fp32)")
		b.Save(mm, qf, kf)
		b.Op(mm).Flops = 2 * float64(core.Numel(plane)) * float64(d)
		mf := b.AddOp("masked_fill", "masked_scores", []core.Value{scores})
		masked := b.Out(mf, "masked_scores", plane, units.FP32, "scores with future keys at -inf (a new tensor)")
		b.Op(mf).WorkF = units.BOOL.Bytes(batch * seq * seq) // token_future
		if pad := blocks*ix.Block - seq; pad > 0 {
			masked = b.Ew("pad", "padded_scores", []core.Value{masked}, []int64{batch, h, seq, blocks * ix.Block}, units.FP32, "scores padded with -inf to whole key blocks (F.pad)")
		}
		am := b.AddOp("amax", "block_scores", []core.Value{masked})
		bs := b.Out(am, "block_scores", []int64{batch, h, seq, blocks}, units.FP32, "each key block's best score (amax over the block)")
		b.Save(am, masked, bs)
		tk := b.AddOp("topk", "topk", []core.Value{bs}) // after the local blocks' in-place scatter_
		b.Out(tk, "topk_scores", []int64{batch, h, seq, topk}, units.FP32, "the top blocks' scores (compared with -inf, then dropped)")
		ti := b.Out(tk, "topk_indices", []int64{batch, h, seq, topk}, units.INT64, "the top key blocks of each query and index head")
		b.Save(tk, ti)
		idx = b.Ew("masked_fill", "block_indices", []core.Value{ti}, []int64{batch, h, seq, topk}, units.INT64, "empty picks tagged -1")
	}()
	// build_block_mask, no grad anywhere: the picks scattered into a
	// [B, h, S, blocks + 1] verdict in dt, == 0, repeated over each
	// block's keys and over the query heads, and'ed with ~token_future,
	// then zeros(...).masked_fill(~keep, min) in dt.
	verdict := b.Ew("scatter", "block_bias", []core.Value{idx}, []int64{batch, h, seq, blocks + 1}, dt, "new_full(-inf) with the picked blocks scattered to 0")
	keepBlocks := b.Ew("eq", "block_keep", []core.Value{verdict}, []int64{batch, h, seq, blocks}, units.BOOL, "bias == 0 over the real blocks")
	perKey := b.Ew("repeat_interleave", "key_keep", []core.Value{keepBlocks}, []int64{batch, h, seq, blocks * ix.Block}, units.BOOL, "the verdict repeated over each block's keys")
	full := []int64{batch, heads, seq, seq}
	perHead := b.Ew("repeat_interleave", "head_keep", []core.Value{perKey}, full, units.BOOL, "the verdict repeated over each index head's query heads")
	keep := b.Ew("and", "keep", []core.Value{perHead}, full, units.BOOL, "block_keep & ~token_future")
	b.Op(b.Val(keep).Producer).WorkF = 2 * units.BOOL.Bytes(batch*seq*seq) // token_future and its negation
	zeros := b.Ew("zeros", "zeros", nil, full, dt, "torch.zeros(keep.shape, dtype)")
	fill := b.AddOp("masked_fill", "attn_bias", []core.Value{zeros, keep})
	mask := b.Out(fill, "attn_bias", full, dt, "the block-sparse additive mask of every head (saved by SDPA's kernel)")
	b.Op(fill).WorkF = units.BOOL.Bytes(core.Numel(full)) // ~keep
	b.Op(fill).Bytes += float64(b.Val(zeros).Bytes + b.Val(keep).Bytes)
	b.Val(mask).Grad = false
	b.Op(fill).NoGradB = true
	for _, v := range []core.Value{verdict, keepBlocks, perKey, perHead, keep, zeros} {
		b.Val(v).Grad = false
		b.Op(b.Val(v).Producer).NoGradB = true
	}
	return mask
}
