package nn

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// Attention is multi-head self-attention with optional GQA/MQA, rotary
// embeddings and a choice of kernel:
//
//   - "flash": flash-attn 2 (HF attn_implementation="flash_attention_2"):
//     saves q, k, v (kv heads not expanded), the output and an fp32
//     logsumexp of heads x tokens.
//   - "sdpa": torch scaled_dot_product_attention as Hugging Face calls it:
//     GQA keys and values are expanded to all heads first (repeat_kv), then
//     the same saves as flash; with EnableGQA, when the kernel can take
//     them as they are (sdpaGQA), not expanded.
//   - "flex": torch's FlexAttention, compiled, as torchtitan runs it
//     (flex_attention.go): flash's saved set, GQA native, no fp32 dq
//     accumulator in its backward.
//   - "eager": matmul, scale, mask, softmax, dropout, matmul; saves Q,
//     K^T and V as bmm reads them (contiguous copies, or the operands
//     themselves when folding the heads is a view: headLayout), the
//     softmax output (fp32 when SoftmaxFP32, then a cast copy), the
//     dropout mask and output (oracle REPORT.md sections 3 and 4).
type Attention struct {
	Name     string
	Dim      int64
	Heads    int64
	KVHeads  int64 // 0 = Heads
	HeadDim  int64 // 0 = Dim / Heads
	QKVBias  bool
	OutBias  bool
	Impl     string // flash | sdpa | flex | eager
	Causal   bool
	Dropout  float64
	Rope     bool // rotary position embeddings on q and k
	FusedQKV bool // one qkv projection (GPT-2 c_attn) instead of q, k, v
	// ProbsDropoutOnly: Dropout drops the attention probabilities only,
	// not o_proj's output (Llama's attention_dropout:
	// eager_attention_forward's dropout and SDPA's dropout_p, no dropout
	// after o_proj; modeling_llama.py at 5.25.0).
	ProbsDropoutOnly bool
	// RepeatKV: a fused qkv projection's k and v reach the kernel as
	// separate projections' do: repeat_kv's copies for eager attention and
	// for SDPA given a mask, enable_gqa without one (transformers 5.25's
	// Falcon, on the shared attention interface). Without it a fused
	// projection's k and v reach the kernel as views of its output with
	// their own heads (GPT-2, GPT-NeoX, BLOOM, 4.x's Falcon).
	RepeatKV bool
	// ClampQKV: the fused qkv projection's output is clamped to
	// [-clip_qkv, clip_qkv] out of place before the split (DbrxAttention:
	// qkv_states.clamp(min=-clip_qkv, max=clip_qkv), modeling_dbrx.py at
	// 5.25.0): the clamp keeps its input, one more [tokens, (heads + 2 kv
	// heads) x head_dim] tensor, and q, k and v are views of its output.
	ClampQKV    bool
	SoftmaxFP32 bool    // eager softmax computed in fp32 then cast back (HF Llama)
	Softcap     float64 // Gemma 2's attn_logit_softcapping: eager scores -> cap * tanh(scores / cap); 0 = none
	QKNorm      bool    // RMS norm over each head of q and k before rope (Qwen3, qknorm.go)
	QKNormGemma bool    // QKNorm's norms are Gemma's RMSNorm (Gemma 3; gemma_norm.go)
	// QKNormCohere: QKNorm's norms are Cohere's LayerNorm with a weight
	// for each head, [heads, head_dim] (Command R+'s use_qk_norm;
	// cohere_norm.go)
	QKNormCohere bool
	QKNormWide   bool // RMS norm over all of q's heads and all of k's at once before rope (OLMo 2, olmo2.go)
	// QKNormLayer: QKNorm's norms are one nn.LayerNorm(head_dim) with a
	// weight and a bias for all of q's heads and one for k's, and may
	// read FusedQKV's views (Persimmon's q_layernorm and k_layernorm;
	// qk_layernorm.go)
	QKNormLayer bool
	// QKNormAfterRope: Llama's RMS norm over each head of q and k after
	// the rotary embedding, named query_layernorm and key_layernorm
	// (Hunyuan's HunYuanDenseV1Attention); QKNorm's norms come before it.
	QKNormAfterRope bool
	// QKNormWideLlama: QKNormWide's norms are Llama's RMSNorm (the weight
	// times the rows cast back: InternVLVisionRMSNorm, InternViT-6B's
	// q_norm and k_norm) instead of OLMo 2's (the weight times the fp32
	// rows, then cast back).
	QKNormWideLlama bool
	// Window is a sliding window: each query attends to the last Window
	// keys (Gemma 2/3's local layers, gpt-oss's sliding layers); 0 = all.
	// Flash attention computes only the window; eager attention still
	// builds the whole score matrix and masks it.
	Window int64
	// WindowBidir: Window is a bidirectional window, each query attending
	// to the keys at most Window positions away on either side
	// (ModernBERT's sliding layers: masking_utils'
	// sliding_window_bidirectional_overlay, config.sliding_window =
	// local_attention / 2). Under SDPA and eager the layer gets a mask once
	// the sequence reaches Window (_ignore_bidirectional_mask_sdpa skips it
	// below), as a causal window does; flash computes the window alone.
	WindowBidir bool
	// QKVName is the fused qkv projection's module name; "" = "qkv".
	QKVName string
	// QKVNames name the separate q, k and v projections; "" = q_proj,
	// k_proj and v_proj (BERT's query, key and value; DeBERTa's
	// query_proj, key_proj and value_proj).
	QKVNames [3]string
	// SelfName is a module inside the attention that holds the q, k and v
	// projections and runs the kernel, o_proj (OutName) beside it
	// (BertAttention's self, BertSelfAttention: attention.self.query and
	// attention.output.dense); "" = none.
	SelfName string
	// Sinks is a learned logit per head that joins each row's softmax and
	// is dropped after it (gpt-oss's attention sinks): Heads parameters;
	// eager attention concatenates it to the scores (one more column).
	Sinks bool
	// SinkScale: Sinks as GraniteSWA's eager attention applies them, the
	// context scaled by sigmoid(logsumexp(scores) - sink) after the
	// softmax (attention_sink_scale.go); the fused kernels as Sinks.
	SinkScale bool
	// ChunkCat: the kernel runs once per chunk of keys (an image, a
	// window) and the outputs are concatenated, a copy that o_proj saves
	// beside the kernel's own outputs (Qwen2.5-VL's vision attention
	// without flash-attn's varlen; VisionTower).
	ChunkCat bool
	// MaskAdd: the scaled scores get an additive mask of shape [batch, 1,
	// 1, seq] in the parameters' dtype (transformers' BertSelfAttention
	// adds get_extended_attention_mask's (1 - mask) * -10000, which
	// BertModel builds even when no attention_mask is passed); under
	// autocast the fp32 mask promotes the sum, so the scores are fp32 from
	// there on.
	MaskAdd bool
	// CastAtMatmul: the probabilities reach dropout in the softmax's dtype
	// and the P.V matmul's autocast casts them (BERT has no explicit cast;
	// GPT-2 and Llama cast back before dropout).
	CastAtMatmul bool
	// EnableGQA: the library passes enable_gqa=True to SDPA when it can
	// instead of expanding k and v (transformers >= 4.54; sdpaGQA).
	EnableGQA bool
	// NoCacheMask: a forward with neither a cache nor an attention_mask
	// hands each causal SDPA layer a 4-D mask (transformers 4.54 to 4.57;
	// noCacheMasked in attention_mask.go).
	NoCacheMask bool
	// PackedMask: a packed row (core.Builder.Packed: position_ids
	// restarting per document, no attention_mask) gets its block-diagonal
	// mask from the library (transformers 5.x's masking_utils; 4.54 to
	// 4.57 through NoCacheMask), under SDPA and eager attention alike
	// (core/packing.go; noCacheMasked in attention_mask.go).
	PackedMask bool
	// RopeCache is the positions of the cos and sin tables the rotary
	// embedding registers as buffers, each [RopeCache, head_dim]
	// (rope_cache.go); 0 for none.
	RopeCache int64
	// RopeTables names the rotary embedding whose cos and sin, made once a
	// forward, every layer's rope saves (rope_cache.go, ropeTables): the
	// decoders of hf_config and the zoo's name "rotary_emb" (Gemma 3's
	// local layers "rotary_emb_local"); "" for none modelled. Under
	// Megatron's kernels the pair is not counted (Transformer Engine's
	// fused rope saves one fp32 freqs table instead, not modelled).
	RopeTables string
	// RopeTablesDType is their dtype; unset, the parameters' (OLMo 2's
	// rotary_emb returns them in fp32: Olmo2RotaryEmbedding.forward, no
	// cast to x's dtype, transformers 5.25.0).
	RopeTablesDType units.DType
	// RopeTablesDim is their width; 0, the head. Partial rotary makes
	// them int(head_dim x partial_rotary_factor) wide (Phi-3, GPT-NeoX's
	// rotary_pct, GLM-4.5, Qwen3-Next), gpt-oss half the head
	// (GptOssRotaryEmbedding does not repeat its frequencies: its
	// _apply_rotary_emb multiplies each half of the head by them).
	RopeTablesDim int64
	// RopeTablesBatch: the tables are [batch, seq, width], one row a
	// sample: the vision-language models' multimodal positions (Qwen2.5-VL,
	// Qwen3-VL, Qwen3.5: position_ids [3, batch, seq] from get_rope_index,
	// the mrope sections recombined once a forward in rotary_emb).
	RopeTablesBatch bool
	// RopeTablesEachLayer: every layer makes its own pair from the
	// forward's (Qwen2.5-VL before transformers 5.17:
	// apply_multimodal_rotary_pos_emb cats the mrope sections of
	// rotary_emb's [3, batch, seq, head_dim] cos and sin in each layer, a
	// new [batch, seq, head_dim] pair that layer's rope saves).
	RopeTablesEachLayer bool
	// RopeTablesOwn: RopeTables is this layer's own rotary embedding,
	// which makes the pair inside the layer from the positions
	// (RecurrentGemma's temporal_block.rotary_emb): recomputed under the
	// layer's checkpoint, held by nothing outside it.
	RopeTablesOwn bool
	// RopeTablesEachCall: GPT-J's rotary (GPTJRotaryEmbedding and
	// apply_rotary_pos_emb, models/gptj/modeling_gptj.py at transformers
	// 5.25.0): the forward's sin and cos are the two halves of one
	// [1, seq, RopeTablesDim] table (embed_positions[position_ids], cast to
	// the embeddings' dtype, split), and each apply_rotary_pos_emb call,
	// q's and k's apart, repeat_interleaves them into a full-width pair of
	// its own, [1, seq, 1, RopeTablesDim] each, which its products save:
	// four tables a layer, made inside it (recomputed under its
	// checkpoint).
	RopeTablesEachCall bool
	// RopeCat: the rotary embedding ends in torch.cat of the rotated dims
	// and the passed ones (Phi-3's, GPT-NeoX's, GLM-4.5's and
	// Qwen3-Next's apply_rotary_pos_emb), which leaves q contiguous head
	// major, [b, heads, s, d]. The flash kernels allocate their output
	// like q (empty_like: torch's CPU flash kernel, and on CUDA
	// flash_api.cpp's mha_fwd, SDPA's and flash-attn's alike), so the
	// attn_output.transpose(1, 2).contiguous() before o_proj copies it
	// and o_proj saves the copy: one [tokens, heads x head_dim] tensor a
	// layer (measured on the CPU, hf_block_saved.py; ropeCatCopy). CUDA's
	// memory-efficient kernel, which SDPA runs when given a mask,
	// allocates its output [b, s, heads, d]: no copy.
	RopeCat bool
	// RopeCacheDType is their dtype; unset, the parameters'.
	RopeCacheDType units.DType
	// OutputGate: q_proj also yields a per-channel gate and the attention
	// output is multiplied by its sigmoid before o_proj (Qwen3-Next's and
	// Qwen3.5's gated attention, with QKNorm; MiniCPM5's q_gate_proj,
	// QKVNames[0], without; attention_gate.go).
	OutputGate bool
	// GateProj: the gate is a projection of its own, gate_proj
	// (Linear(dim, heads x head_dim), no bias), whose sigmoid multiplies
	// the attention output before o_proj (AFMoE's AfmoeAttention;
	// attention_gate.go). It and OutputGate exclude each other.
	GateProj bool
	// Differential: DiffLlama's differential attention, two kernel calls
	// over the halves of v's heads combined by a learned λ and a group
	// norm (attention_diff.go); kv heads even.
	Differential bool
	// GateBias: GateProj's gate_proj has a bias (HrmTextAttention's,
	// bias=attention_bias, modular_hrm_text.py at transformers 5.25.0).
	GateBias bool
	// GateSoftplus: Laguna's gate, a projection of its own, g_proj
	// (Linear(dim, heads), or heads x head_dim without GatePerHead; no
	// bias), whose softplus over its fp32 copy, cast back to the
	// attention output's dtype, multiplies the attention output before
	// o_proj, one gate a head broadcast over head_dim with GatePerHead
	// (LagunaAttention.forward, modular_laguna.py at 5.25.0;
	// attention_gate.go). It excludes OutputGate and GateProj.
	GateSoftplus, GatePerHead bool
	// GateSigmoid: LFM3's gate, the same g_proj (one value a head with
	// GatePerHead), whose sigmoid in the activations' dtype multiplies
	// the attention output before o_proj (Lfm3Attention.forward,
	// modeling_lfm3.py at 5.25.0; attention_gate.go). It excludes the
	// other gates.
	GateSigmoid bool
	// QKNormOlmo2: QKNorm's norms are OLMo 2's RMSNorm over each head, the
	// weight times the fp32 rows before the cast back (AFMoE's q_norm and
	// k_norm, Olmo2RMSNorm(head_dim); qknorm.go).
	QKNormOlmo2 bool
	// QKNormWeightFP32: with QKNormOlmo2, the weight multiplies the fp32
	// rows as weight.to(torch.float32), an fp32 copy in a 16-bit model
	// (Helium's RMSNorm over each head: LaraMiniAttention's q_norm and
	// k_norm, modular_lara_mini.py at transformers 5.25.0).
	QKNormWeightFP32 bool
	// SubNorm: Llama's RMSNorm (attn_sub_norm, a weight of Heads x Vd)
	// over the attention output before o_proj (BitNetAttention,
	// models/bitnet/modular_bitnet.py at transformers 5.25.0): it keeps
	// the output and its rstd, o_proj the normed rows. Tensor parallelism
	// is refused (the norm would run over a shard of the features).
	SubNorm bool
	// OutName is the output projection's module name; "" = "o_proj"
	// (Qwen3-VL's vision blocks call it proj, LFM2 out_proj).
	OutName string
	// QKNormNames name QKNorm's two norms; "" = q_norm and k_norm (LFM2:
	// q_layernorm and k_layernorm).
	QKNormNames [2]string
	// RopeComplex, QKL2Norm, TempTuning and Chunk are Llama 4's
	// (attention_llama4.go): the complex rotation, the weightless L2 norm
	// of q and k after it, the NoPE layers' temperature tuning of q, and
	// chunked local attention of Chunk tokens (0 = none).
	RopeComplex bool
	QKL2Norm    bool
	// QKL2Split: QKL2Norm's norm is two modules, q_norm and k_norm
	// (NanoChat's NanoChatRMSNorm, Llama4TextWeightlessRMSNorm's ops),
	// where Llama 4 calls one qk_norm on both.
	QKL2Split  bool
	TempTuning bool
	Chunk      int64
	// QPosScale: q times a scale of each position after the rotation
	// (Ministral 3's llama_4_scaling_beta; attention_qscale.go).
	QPosScale bool
	// ImageMask: with images, the text attention gets a mask in every
	// layer under SDPA: each image's tokens see one another (Gemma 3's
	// token_type_ids; image_mask.go).
	ImageMask bool
	// SharedMask: one additive mask a forward, handed to every layer
	// (transformers before 4.53; sdpaBias in attention_mask.go).
	SharedMask bool
	// EagerMask: eager attention adds the one float mask the model made
	// for the forward, [batch, 1, seq, seq] in the embeddings' dtype
	// (forwardMask; transformers' masking_utils eager_mask, 5.25.0: a
	// (2, 1, 64, 64) bf16 tensor of 16,384 bytes handed to every layer at
	// batch 2 x 64). The add saves nothing, but the mask lives from the
	// first layer to the last, and into the backward under checkpointing
	// (the layers' argument). hf_config's Llama-style decoders set it.
	EagerMask bool
	// InWidth is q, k and v's input width where it is not Dim, o_proj
	// still mapping back to Dim (Zamba2's shared attention reads the
	// hidden states concatenated with the embeddings: attention_hidden_size,
	// 2 x hidden_size); 0 = Dim. AdapterRank adds to each of q, k and v
	// the output of an adapter of its own (Zamba2's linear_q_adapter_list,
	// ...: zamba2_adapter.go) numbered AdapterIndex; 0 = none.
	InWidth, AdapterRank, AdapterIndex int64
	// AdapterIdle are the other adapter slots of the block this layer's
	// copy holds, which it does not run (idleRankAdapters).
	AdapterIdle []int64

	// AlibiMaskedFill: MPT's attention (MptAttention, models/mpt/
	// modeling_mpt.py at transformers 5.25.0), eager only: the scaled
	// scores plus the model's fp32 ALiBi bias (16-bit scores promote to
	// fp32), then masked_fill by the bool causal mask the model makes once
	// a forward (create_causal_mask(...).to(torch.bool)), which masked_fill
	// saves: one [batch, 1, seq, seq] bool storage for every layer
	// (attention_alibi.go). AlibiLen is the bias's length, the config's
	// max_seq_len.
	AlibiMaskedFill bool
	AlibiLen        int64
	// QKFP32: eager attention multiplies q and k cast to fp32
	// (GPT-J's eager_attention_forward, models/gptj/modeling_gptj.py at
	// transformers 5.25.0: matmul(query.to(torch.float32),
	// key.to(torch.float32).transpose(2, 3))): in 16-bit the fp32 copies
	// are what the product saves, the scores, the mask's sum and the
	// softmax are fp32, and the probabilities are cast to v's dtype.
	QKFP32 bool
	// MaskBuffer: GPT-Neo's attention (GPTNeoSelfAttention,
	// models/gpt_neo/modeling_gpt_neo.py at transformers 5.25.0; its
	// flash class inherits it): every layer holds its own bool causal
	// mask, the non-persistent buffer bias of [1, 1, MaskBuffer,
	// MaskBuffer] (max_position_embeddings; banded for local layers),
	// under every attn. Its eager _attn does not scale the scores and
	// keeps them by torch.where over a slice of that buffer (which where
	// saves: a view, no new storage) before adding the model's float
	// mask (gpt_neo_attention.go).
	MaskBuffer int64
	// XGLMEager: XGLM's own eager attention (XGLMAttention.forward,
	// models/xglm/modeling_xglm.py at transformers 5.25.0): q_proj's output
	// times the scaling (a new tensor; the scores are not scaled after),
	// the scores plus the model's float mask floored by torch.max against
	// a 0-dim finfo.min, which saves both (the masked scores and the 0-dim
	// tensor), the softmax in the scores' dtype but for fp16 (fp32, cast
	// back) (xglm_attention.go).
	XGLMEager bool
	// QKVShards and RopeToV are CodeGen's (attention_codegen.go):
	// FusedQKV's output as QKVShards model-parallel shards, each q's, v's
	// and k's part of it, and q and k cast to v's dtype after a rotary
	// whose tables stay fp32 (RopeTablesDType); 0 and false for others.
	QKVShards int64
	RopeToV   bool

	// VHeadDim, VScale and MaxShift are MiMo-V2-Flash's
	// (attention_value_head.go): v heads VHeadDim wide where q's and k's
	// are HeadDim (0 = HeadDim), v multiplied by a constant out of place
	// before the kernel, and eager scores minus their row max before the
	// softmax in the layers without sinks too.
	VHeadDim int64
	VScale   bool
	MaxShift bool

	// SinksNoShift and KeepSinksFP32 are Flint's (attention_sinks_flint.go):
	// the eager softmax over the scores and the sink column as they are,
	// no row max subtracted, the sink column sliced off before the cast to
	// v's dtype; the sinks kept fp32 under 16-bit parameters.
	SinksNoShift  bool
	KeepSinksFP32 bool

	// M3Indexer is MiniMax M3's lightning indexer on a sparse layer
	// (m3_indexer.go): its block picks become an additive mask of every
	// head that the kernel reads; nil on the others.
	M3Indexer *M3Indexer

	chunkMask bool // the kernel gets a mask: the sequence reaches Chunk, or Window under SDPA (Lower sets it on its copy)
	// bias, when set, is the additive mask made by the attention's tower
	// (PixtralVision's block mask): what an SDPA kernel given a mask
	// (chunkMask) gets, what eager attention adds to its scores.
	bias func(b *core.Builder) core.Value
}

func (a *Attention) Lower(b *core.Builder, x core.Value) core.Value {
	if b.Last(x) != a.InDim() {
		panic(core.ShapeMismatch(b, "attention", a.InDim(), b.Last(x)))
	}
	name := b.ModuleName(a)
	defer b.Scope(name)()
	if a.MaskBuffer > 0 {
		a.maskBuffer(b)
	}
	closeSelf := b.Scope(a.SelfName)
	la := a.perRank(b.Par.Tpn()) // this rank's heads
	d, h, kv := la.Hd(), la.Heads, la.Kv()
	xg := b.TpGatherFP8(x) // all-gathered along the sequence with SP (in fp8 for TE fp8 linears)
	s := b.Shape(xg)
	var q, k, v, qGate core.Value
	switch {
	case a.OutputGate:
		q, qGate = a.gatedQ(b, x, xg, s, h, d)
		k = b.ColLinear("k_proj", core.RoleK, x, xg, a.Dim, a.Kv()*d, kv*d, a.QKVBias)
		v = b.ColLinear("v_proj", core.RoleV, x, xg, a.Dim, a.Kv()*d, kv*d, a.QKVBias)
	case a.FusedQKV:
		qkv := b.ColLinear(nameOr(a.QKVName, "qkv"), core.RoleQKV, x, xg, a.Dim, (a.Heads+2*a.Kv())*d, (h+2*kv)*d, a.QKVBias)
		if a.ClampQKV {
			qkv = b.Unary("clamp", qkv, true, false)
		}
		q, k, v = qkv, qkv, qkv // views of one storage
		if a.QKVShards > 0 {
			q, k, v = a.shardedQKV(b, qkv, s, h, d)
		}
	default:
		in := a.InDim()
		q = b.ColLinear(nameOr(a.QKVNames[0], "q_proj"), core.RoleQ, x, xg, in, a.Heads*d, h*d, a.QKVBias)
		k = b.ColLinear(nameOr(a.QKVNames[1], "k_proj"), core.RoleK, x, xg, in, a.Kv()*d, kv*d, a.QKVBias)
		v = b.ColLinear(nameOr(a.QKVNames[2], "v_proj"), core.RoleV, x, xg, in, a.Kv()*a.Vd(), kv*la.Vd(), a.QKVBias)
		if a.VScale {
			v = valueScale(b, v)
		}
		if a.AdapterRank > 0 {
			q, k, v = a.qkvAdapters(b, x, q, k, v)
		}
	}
	if a.GateProj {
		qGate = b.ColLinear("gate_proj", core.RoleGate, x, xg, a.Dim, a.Heads*d, h*d, a.GateBias)
	}
	if a.GateSoftplus || a.GateSigmoid {
		qGate = b.ColLinear("g_proj", core.RoleGate, x, xg, a.Dim, a.gateWidth(a.Heads, d), a.gateWidth(h, d), false)
	}
	qn, kn := a.qkNormNames()
	if a.QKNorm && !a.OutputGate { // gatedQ norms its half of q_proj's output
		q = a.headNorm(b, qn, q, s, h, d)
	}
	if a.QKNorm {
		k = a.headNorm(b, kn, k, s, kv, d)
	}
	if a.QKNormWide {
		q, k = a.wideQKNorm(b, q, k, h, kv, d)
	}
	if a.Rope && a.RopeCache > 0 {
		a.ropeCacheBuffers(b, d)
	}
	if a.Rope {
		q = a.rotate(b, "q", q, core.WithLast(s, h*d))
		k = a.rotate(b, "k", k, core.WithLast(s, kv*d))
		if a.RopeToV {
			q, k = a.castToV(b, q, k, v)
		}
	}
	if a.QKNormAfterRope {
		q = qkHeadNorm(b, "query_layernorm", q, s, h, d, false)
		k = qkHeadNorm(b, "key_layernorm", k, s, kv, d, false)
	}
	if a.QKL2Norm {
		q, k = a.qkL2(b, q, k, s, h, kv, d)
	}
	if a.TempTuning {
		q = tempTune(b, q)
	}
	if a.QPosScale {
		q = qPosScale(b, q, s[len(s)-2])
	}
	if a.chunkMasked(s[len(s)-2]) || a.windowMasked(s[len(s)-2]) || a.imageMasked(b) || a.noCacheMasked(b) {
		c := *la
		c.chunkMask = true
		la = &c
	}
	if a.M3Indexer != nil { // the indexer runs after the rope, on the layer's input
		c := *la
		c.chunkMask = a.Impl == "sdpa"
		heads, dt := la.Heads, b.Dtype(q)
		c.bias = func(b *core.Builder) core.Value {
			m := a.m3BlockMask(b, xg, s, heads, dt)
			if a.Impl == "sdpa" {
				return kernelBias(b, m)
			}
			return m
		}
		la = &c
	}
	kl, vl := seqMajor, seqMajor  // how k and v lie in memory (eager's folds)
	if b.UseCache() && a.Causal { // the DynamicCache's copies, which the kernel reads (kv_cache.go)
		k, v = kvCache(b, k, v, s, kv, d)
		kl, vl = headMajor, headMajor
	}
	if !a.Differential && !a.kvNative() && kv != h && (!a.FusedQKV || a.RepeatKV) && !la.sdpaGQA(b) {
		// Hugging Face repeat_kv (expand + reshape, a copy) before the kernel.
		k = expandKV(b, "k", k, core.WithLast(s, h*d), kv)
		v = expandKV(b, "v", v, core.WithLast(s, h*la.Vd()), kv)
		kl, vl = headMajor, headMajor
		if kv == 1 {
			kl, vl = expandedHeads, expandedHeads
		}
	}
	var o core.Value
	closeRegion := func() {}
	if b.Ckpt.Selective {
		closeRegion = b.PolicyRegion("core")
	}
	if b.Prec.Autocast { // the kernel (matmul, SDPA) runs in the compute dtype: q and k leave RoPE in fp32
		q = b.Cast(q, b.Prec.Compute, "autocast copy of q for the attention kernel")
		k, kl = castHeads(b, "k", k, kl, core.WithLast(s, h*d))
		v, vl = castHeads(b, "v", v, vl, core.WithLast(s, h*la.Vd()))
	}
	att, sa := la, s
	if b.Par.Ulysses() { // all-to-all to the whole sequence and a cp-th of the heads (ulysses.go)
		q, k, v, att, sa = ulyssesHeads(b, la, q, k, v, s)
		kl, vl = seqMajor, seqMajor // the exchanged tensors are fresh [b, s, heads*d] outputs
	}
	switch {
	case a.Differential: // its own two calls, repeat_kv and combination (attention_diff.go)
		o = att.differential(b, q, k, v, sa, kl)
	case a.Impl == "eager":
		o = att.eager(b, q, k, v, sa, kl, vl)
	default:
		o = att.Fused(b, q, k, v, sa)
	}
	if b.Par.Ulysses() {
		o = ulyssesBack(b, o, s)
	}
	if a.ropeCatCopy(b, la, b.Dtype(q)) {
		o = b.Ew("contiguous", "attn_output", []core.Value{o}, b.Shape(o), b.Dtype(o), "the kernel's head-major output made seq-major (RopeCat): o_proj's input")
	}
	if a.ChunkCat && !a.kvNative() {
		o = b.Ew("cat", "cat_chunks", []core.Value{o}, b.Shape(o), b.Dtype(o), "the chunks' attention outputs concatenated (o_proj's input)")
	}
	closeRegion()
	if a.OutputGate || a.GateProj || a.GateSigmoid {
		o = outputGate(b, o, qGate)
	}
	if a.GateSoftplus {
		o = softplusGate(b, o, qGate)
	}
	if a.SubNorm {
		o = b.LowerChild(&Norm{Name: "attn_sub_norm", Dim: a.Heads * a.Vd(), RMS: true}, o)
	}
	closeSelf()
	out := a.OutName
	if out == "" {
		out = "o_proj"
	}
	y := b.RowLinear(out, core.RoleO, o, a.Heads*a.Vd(), h*la.Vd(), a.Dim, a.OutBias)
	if a.ProbsDropoutOnly {
		return y
	}
	return b.Dropout("resid_dropout", y, a.Dropout)
}

// packedFlashSyncs are the host syncs transformers' flash path makes in
// each layer's forward over a packed row it finds from the position_ids
// alone (modeling_flash_attention_utils.py, 5.25.0): the truth value of
// _is_packed_sequence's sum in the if of l. 853 ("forces a device sync in
// every layer", its docstring), nonzero's count in
// prepare_fa_kwargs_from_position_ids (l. 505) and max_length_q, a 0-dim
// tensor flash_attn_varlen_func reads as an int (l. 518). Its q, k and v .contiguous() copies (l. 553-555) are not
// priced: they replace the views the kernel would keep, same bytes.
const packedFlashSyncs = 3
