package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// DSAIndexer is DeepSeek Sparse Attention's lightning indexer
// (DeepSeek-V3.2-Exp, DeepSeek-V3.2, GLM-5) as transformers 5.17.0's
// DeepseekV32Indexer runs it (modeling_deepseek_v32.py), one per MLA
// layer:
//
//	q = wq_b(q_resid)                        # q_resid: q_a_layernorm(q_a_proj(x)), [S, heads x head_dim]
//	k = k_norm(wk(x))                        # one key per token, [S, head_dim]; LayerNorm with a bias
//	q, k = rope(q), rope(k)                  # the first qk_rope_head_dim of each, then cat
//	scores = relu(q.float() @ k.float()^T * head_dim^-0.5)   # [S, heads, T] fp32
//	w = weights_proj(x.float()) * heads^-0.5 # [S, heads] fp32 (weights_proj kept in fp32)
//	index = (w @ scores + mask).topk(top_k)  # [S, top_k] indices
//
// The whole forward runs under torch.no_grad(): autograd saves nothing
// and no gradient reaches the indexer's weights, so its parameters get
// no .grad and AdamW keeps no state for them (the paper's indexer
// training, a KL loss against the dense attention, is not in
// transformers). The memory that matters is transient and quadratic:
// the scores are an fp32 [S, heads, T] tensor, and scale then relu each
// write another before the first is freed, 8 x heads bytes per query and
// key at the peak (64 heads: 512 bytes, 8 GiB a sequence of 4,096).
//
// On the eager and SDPA paths (transformers has no flash path for these
// models: _supports_flash_attn = False) the indices are scattered into a
// boolean [S, T] mask and folded into the causal mask; SDPA turns it into
// an additive bias of the query's dtype, which its kernel saves for
// backward, and computes every block of the scores: the attention is
// dense, masked, and costs what full (not causal) attention costs.
//
// GLM-5's layers may share (GlmMoeDsaAttention, indexer_types "shared"):
// such a layer has no indexer and reuses the previous full layer's top-k,
// and still builds its own mask and bias from them.
type DSAIndexer struct {
	Heads   int64 // index_n_heads (FieldIndexHeads)
	HeadDim int64 // index_head_dim (FieldIndexHeadDim)
	TopK    int64 // index_topk (FieldIndexTopK)
	Shared  bool  // no indexer here: the previous full layer's top-k
}

// params counts wq_b, wk, k_norm (weight and bias) and weights_proj, none
// in a shared layer.
func (ix *DSAIndexer) params(dim, qLora int64) int64 {
	if ix.Shared {
		return 0
	}
	return qLora*ix.Heads*ix.HeadDim + dim*ix.HeadDim + 2*ix.HeadDim + dim*ix.Heads
}

func (ix *DSAIndexer) validate(path string, a *MLA) error {
	if err := checkPositive(path, sized{FieldIndexHeads, ix.Heads}, sized{FieldIndexHeadDim, ix.HeadDim}, sized{FieldIndexTopK, ix.TopK}); err != nil {
		return err
	}
	if a.QLoraRank <= 0 {
		return fieldErr(path, "the sparse-attention indexer needs ", FieldQLora, " (its wq_b reads the q latent)").
			withHint("set ", FieldQLora, ", as DeepSeek-V3.2 and GLM-5 do")
	}
	if ix.HeadDim < a.RopeDim {
		return fieldErr(path, FieldIndexHeadDim, fmt.Sprintf(" %d is less than ", ix.HeadDim), FieldRopeDim,
			fmt.Sprintf(" %d (the indexer rotates the first ", a.RopeDim), FieldRopeDim, " of each head)")
	}
	if a.Impl != "sdpa" {
		return fieldErr(path, fmt.Sprintf("%s attention is not modelled for DeepSeek Sparse Attention", a.Impl)).
			withHint("use ", FieldImpl, `="sdpa": transformers has no flash path for these models (_supports_flash_attn = False)`)
	}
	return nil
}

// sparseBias lowers the indexer and the mask it makes: x is the layer's
// input (gathered under sequence parallelism), qa the q latent, s x's
// shape [batch, seq, dim], dt the attention's dtype. It returns the bias
// SDPA reads, [batch, 1, seq, seq] in dt.
func (a *MLA) sparseBias(b *core.Builder, x, qa core.Value, s []int64, dt units.DType) core.Value {
	ix := a.Indexer
	seq := s[len(s)-2]
	batch := core.Rows(s) / seq
	topk := min(ix.TopK, seq)
	var ins []core.Value // a shared layer's top-k come from an earlier layer
	if !ix.Shared {
		ins = append(ins, a.indexerTopK(b, x, qa, s, batch, seq, topk))
	}
	// index_mask = ones(bool).scatter(-1, topk, False): the ones and the
	// scattered copy; attention_mask & ~index_mask: the negation and
	// the combined mask. attention_mask is the causal mask the model's
	// forward makes once for its indexed layers, always
	// (create_causal_mask(..., allow_is_causal_skip=False) in
	// DeepseekV32Model, GlmMoeDsaModel, AXK2Model and Dots3NoteTextModel at
	// 5.25.0), and hands to each: alive until the layers are done, and
	// held by every checkpointed layer (TestCheckpointHoldsForwardOnceValues).
	fm := &Attention{Causal: true, Impl: a.Impl}
	causal := fm.forwardMask(b, s, units.BOOL, fm.maskExpanded(b))
	plane := []int64{batch, 1, seq, seq}
	mb := units.BOOL.Bytes(batch * seq * seq)
	sc := b.AddOp("scatter", "index_mask", ins)
	mask := b.Out(sc, "index_mask", plane, units.BOOL, "keys the indexer did not select (True: masked)")
	b.Op(sc).WorkF = mb // new_ones before the out-of-place scatter
	b.Op(sc).Bytes += float64(2 * mb)
	and := b.AddOp("and", "sparse_mask", []core.Value{mask, causal})
	comb := b.Out(and, "sparse_mask", plane, units.BOOL, "the causal mask & ~index_mask")
	b.Op(and).WorkF = mb // ~index_mask
	b.Op(and).Bytes += float64(3 * mb)
	// SDPA: convert_boolean_attn_mask's where(mask, 0, -inf) in the
	// query's dtype, the bias its efficient kernel keeps for backward.
	bias := b.Ew("where", "attn_bias", []core.Value{comb}, plane, dt, "the sparse mask as SDPA's additive bias (saved by the kernel)")
	b.Val(bias).Grad = false
	return bias
}

// indexerTopK lowers DeepseekV32Indexer.forward, under no_grad: nothing
// it makes requires grad or is saved, and its weights get no gradient.
func (a *MLA) indexerTopK(b *core.Builder, x, qa core.Value, s []int64, batch, seq, topk int64) core.Value {
	ix := a.Indexer
	h, d := ix.Heads, ix.HeadDim
	defer b.NoGrad()() // @torch.no_grad()
	defer b.Scope("indexer")()
	q0 := b.Linear("wq_b", core.RoleLinear, qa, a.QLoraRank, h*d, false)
	k0 := b.LayerNorm("k_norm", b.Linear("wk", core.RoleLinear, x, a.Dim, d, false), d, true)
	qr := rope(b, "q", q0, core.WithLast(s, h*a.RopeDim))
	kr := rope(b, "k", k0, core.WithLast(s, a.RopeDim))
	q := b.Ew("cat", "q", []core.Value{q0, qr}, core.WithLast(s, h*d), b.Dtype(q0), "indexer q: roped and plain parts concatenated")
	k := b.Ew("cat", "k", []core.Value{k0, kr}, core.WithLast(s, d), b.Dtype(k0), "indexer k: roped and plain parts concatenated")
	qf := b.Cast(q, units.FP32, "q.float()")
	kf := b.Cast(k, units.FP32, "k.float()")
	// [batch, seq, heads, d] @ [batch, 1, d, keys]: a GEMM per query row.
	plane := []int64{batch, seq, h, seq}
	mm := b.AddOp("matmul", "scores", []core.Value{qf, kf})
	scores := b.Out(mm, "scores", plane, units.FP32, "indexer scores, every query x key x index head (fp32)")
	b.Op(mm).Flops = 2 * float64(batch*seq) * float64(h) * float64(seq) * float64(d)
	if batch > 1 {
		// torch.matmul broadcasts k^T [batch, 1, d, keys] to every query
		// row and folds the batch dims for bmm: a reshape that cannot be a
		// view when batch > 1, so it copies (batch x seq) copies of k^T
		// (the "clone" tools/oracle/dsa_indexer.py finds at its peak with
		// batch 2); with batch 1 the reshape is a view.
		b.Op(mm).WorkF = units.FP32.Bytes(batch * seq * d * seq)
	}
	scaled := b.Ew("mul", "scaled_scores", []core.Value{scores}, plane, units.FP32, "scores * softmax_scale, a new tensor")
	relu := b.Ew("relu", "relu_scores", []core.Value{scaled}, plane, units.FP32, "F.relu(scores), a new tensor")
	// weights_proj: _keep_in_fp32_modules keeps its weight in fp32 and the
	// forward casts x to it.
	wts := a.indexerWeights(b, x, s)
	ws := b.AddOp("matmul", "index_scores", []core.Value{wts, relu})
	scored := b.Out(ws, "index_scores", []int64{batch, seq, 1, seq}, units.FP32, "head-weighted sum of the scores")
	b.Op(ws).Flops = 2 * float64(batch*seq) * float64(h) * float64(seq)
	// masked_fill(~mask, -inf): the negated mask, then a new tensor.
	masked := b.Ew("masked_fill", "masked_index_scores", []core.Value{scored}, []int64{batch, seq, seq}, units.FP32, "index scores with the causal mask")
	b.Op(b.Val(masked).Producer).WorkF = units.BOOL.Bytes(batch * seq * seq)
	tk := b.AddOp("topk", "topk", []core.Value{masked})
	b.Out(tk, "topk_values", []int64{batch, seq, topk}, units.FP32, "top-k index scores (dropped)")
	idx := b.Out(tk, "topk_indices", []int64{batch, seq, topk}, units.INT64, "top-k key indices")
	idx = b.Cast(idx, units.INT32, "indices.to(torch.int32)")
	// The forward's locals live until it returns: wq_b's and k_norm's
	// outputs (under the q_pass and k_pass views), the roped parts, q and
	// k, the relu'd scores and the head weights (tools/oracle/dsa_indexer.py
	// finds them live at its peak).
	b.KeepAlive("indexer_locals", q0, k0, qr, kr, q, k, relu, wts)
	return idx
}

// indexerWeights is weights_proj(x.to(weight.dtype)).float() * heads^-0.5,
// [.., heads] fp32. The weight is fp32 in an fp16 model:
// DeepseekV32PreTrainedModel._keep_in_fp32_modules ["indexer.weights_proj"],
// which from_pretrained applies to fp16 loads only (modeling_utils.py
// _get_dtype_plan l.3860-3861 at 5.25.0); in a bf16 model it is bf16.
func (a *MLA) indexerWeights(b *core.Builder, x core.Value, s []int64) core.Value {
	h := a.Indexer.Heads
	done := b.Scope("weights_proj")
	w := b.Param("weight", []int64{h, a.Dim}, core.RoleLinear)
	if b.Prec.Params == units.FP16 {
		b.P.Params[w].DType = units.FP32
	}
	dt := b.P.Params[w].Stored(b.Prec)
	xw := b.Cast(x, dt, "hidden_states.to(weights_proj.weight.dtype)")
	i := b.AddOp("matmul", "", []core.Value{xw}, w)
	y := b.Out(i, "out", core.WithLast(s, h), dt, "indexer head weights")
	b.Op(i).Flops = 2 * float64(core.Rows(s)) * float64(a.Dim) * float64(h)
	b.Op(i).Bytes += float64(b.Val(xw).Bytes) + float64(dt.Bytes(a.Dim*h))
	// PEFT's lora.Linear on weights_proj (all-linear): its branch runs
	// under the indexer's no_grad, so its adapters get no gradient.
	y = b.LoRAOutput(core.RoleLinear, xw, y, a.Dim, h)
	done()
	y = b.Cast(y, units.FP32, ".float()")
	return b.Ew("mul", "weights", []core.Value{y}, core.WithLast(s, h), units.FP32, "weights * heads^-0.5")
}
