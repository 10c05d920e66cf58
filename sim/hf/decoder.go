package hf

import (
	"fmt"
	"math"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/units"
)

// buildDecoder builds a Llama-style decoder:
//
//	embed_tokens, [Gemma: * sqrt(hidden)],
//	layers: x + self_attn(input_layernorm(x)); x + mlp(post_attention_layernorm(x)),
//	norm, lm_head
//
// The eager softmax runs in fp32 (eager_attention_forward:
// softmax(..., dtype=torch.float32)).
//
// Gemma 2 soft-caps the logits (final_logit_softcapping, default 30.0)
// and the eager attention scores (attn_logit_softcapping, default 50.0;
// Gemma2Config in configuration_gemma2.py; null turns either off):
// core/softcap.go. Gemma 3 has neither by default.
//
// Sliding-window layers (every layer in Mistral, Mixtral, Phi-3 and
// Phi-3.5-MoE when sliding_window is set; layer_types in the config, else
// Gemma 2's every other layer, Gemma 3's sliding_window_pattern: five
// local layers to one global) attend to the last sliding_window keys:
// flash attention computes only those, SDPA gets a mask
// (nn.Attention.windowMasked). Phi-3's fused qkv_proj is sliced and its k
// and v go through repeat_kv as separate projections' do (RepeatKV:
// Phi3Attention on the shared attention interface).
//
// Gemma's RMSNorm (and Gemma 3's q_norm and k_norm) runs in fp32 and
// scales by 1 + weight before the cast back (nn.GemmaNorm).
//
// ERNIE 4.5 (model_type ernie4_5: ERNIE-4.5-0.3B-PT/-Base-PT;
// models/ernie4_5/modeling_ernie4_5.py at 5.25.0) is Llama with use_bias
// on q, k, v, o and the MLP's three projections (default false), head_dim
// 128, tied embeddings and no attention dropout (Ernie4_5Attention sets
// attention_dropout = 0.0 whatever the config says). Its rope pairs
// adjacent dimensions and runs in fp32: apply_rotary_pos_emb
// repeat_interleaves the first half of rotary_emb's fp32 cos and sin in
// every layer, a new fp32 [1, 1, seq, head_dim] pair that layer's
// q.float() * cos and rotate_half(q).float() * sin save
// (RopeTablesEachLayer, RopeTablesDType fp32), and casts q and k back.
//
// Seed-OSS (model_type seed_oss: ByteDance-Seed/Seed-OSS-36B-Base and
// -Instruct; models/seed_oss/modeling_seed_oss.py at 5.25.0) is Llama
// with attention_bias on q, k and v (default true), attention_out_bias on
// o (default false), mlp_bias (default false) and head_dim 128; its
// attention probabilities drop with attention_dropout and o_proj's and
// down_proj's outputs with residual_dropout (SeedOssConfig's defaults,
// as the published config.json: 0.1 each).
//
// StarCoder2 (model_type starcoder2: bigcode/starcoder2-3b, -7b, -15b;
// models/starcoder2/modeling_starcoder2.py at 5.25.0) norms with
// nn.LayerNorm, biases q, k, v, o and its ungated MLP (c_fc, the
// gelu_pytorch_tanh activation, c_proj) by use_bias (default true), ties
// its head, slides every layer over sliding_window when it is set, and
// drops the embeddings (embedding_dropout), o_proj's and c_proj's outputs
// (residual_dropout) and the probabilities (attention_dropout).
//
// OLMo (model_type olmo: allenai/OLMo-1B-hf, OLMo-7B-hf; models/olmo at
// 5.25.0) is Llama with attention_bias on q, k, v and o and OlmoLayerNorm
// everywhere, a LayerNorm without weight or bias run in fp32
// (nn.OlmoNorm); its rotary cos and sin stay fp32 (OlmoRotaryEmbedding
// casts them to nothing: RopeTablesDType) and the rotated q and k are
// cast back; clip_qkv's in-place clamps are refused.
//
// Helium (model_type helium: kyutai/helium-1-preview-2b, helium-1-2b;
// models/helium at 5.25.0) is Llama with attention_bias on q, k and v
// only, head_dim 128, its RMSNorm multiplying the fp32 rows by the
// weight's fp32 copy before the cast back (nn.Norm.WeightFP32) and GLM's
// rope on
// adjacent pairs, the first half of rotary_emb's cos and sin
// repeat_interleaved in every layer (RopeTablesEachLayer).
//
// Jais 2 (model_type jais2: inceptionai/Jais-2-8B-Chat; models/jais2 at
// 5.25.0) is Llama with attention_bias on q, k, v and o and mlp_bias
// (Jais2Config's defaults: true, configClasses), Nemotron's ungated MLP
// (up_proj, hidden_act, default "relu2", down_proj) and nn.LayerNorm with
// a bias for its three norms (Jais2DecoderLayer, Jais2Model).
//
// HyperCLOVAX (model_type hyperclovax: naver-hyperclovax/HyperCLOVAX-SEED-
// Think-14B; models/hyperclovax/modular_hyperclovax.py at 5.25.0) is
// Granite (granite.go: the muP multipliers, attention_bias, mlp_bias)
// with head_dim from the config (default hidden_size / heads, hidden_size
// a multiple of the heads whatever it says: validate_architecture),
// Peri-LN (use_post_norm, default true: post_norm1 and post_norm2, Llama's
// RMSNorm on each sub-layer's output before the residual multiplier) and
// the logits multiplied by logits_scaling where Granite divides (the same
// tensors: core.Model.LogitScale); attention_multiplier left null is
// head_dim ** -0.5, which moves no memory.
//
// Hunyuan's dense model (model_type hunyuan_v1_dense: tencent/Hunyuan-7B,
// -4B, -1.8B, -0.5B and their -Instruct; models/hunyuan_v1_dense at 5.25.0)
// is Llama with attention_bias on q, k, v and o (default false), a
// required head_dim and Llama's RMSNorm over each head of q and k after
// the rotary embedding (query_layernorm, key_layernorm). Arcee (model_type
// arcee: arcee-ai/AFM-4.5B and -Base; models/arcee at 5.25.0) is Llama
// with Nemotron's ungated MLP, up_proj, the squared ReLU (hidden_act
// "relu2") and down_proj. Apertus (model_type apertus: swiss-ai/Apertus-8B
// and -70B; models/apertus at 5.25.0) is Llama with Qwen3's per-head q and
// k norms, its norms named attention_layernorm and feedforward_layernorm,
// and the same ungated MLP (never biased) with xIELU (nn/xielu.go);
// Apertus 1.5's text model (apertus1p5_text) is Apertus with its lm_head
// pruned to output_vocab_size rows (apertus1p5.go).
// Hunyuan's MoE model
// (hunyuan_v1_moe) is the same with HunYuanMoEV1Moe in every layer
// (hunyuan.go).
//
// Parameters are exact; some memory details are not modelled yet (none
// holds parameters): Phi-3.5-MoE's sparsemixer routing is lowered as a
// softmax router. gpt-oss's clamped GLU (swiglu_limit) is lowered by
// every experts implementation (nn.MoE.ClampedGLU).
func buildDecoder(c *hfConfig, attn string, head hfHead) *core.Model {
	f := decoderFamilyOf(c.modelType)
	hidden := c.size("hidden_size")
	layers := c.size("num_hidden_layers")
	heads := c.size("num_attention_heads")
	kv := c.kvHeads("num_key_value_heads", heads)
	vocab := c.size("vocab_size")
	if f.cwm { // CwmConfig's strict fields: ints, never None
		for _, k := range []string{"head_dim", "num_key_value_heads"} {
			if c.null(k) {
				c.fail(k, "must be an integer (got null): CwmConfig's %s is an int, which its validation refuses as None", k)
			}
		}
	}
	hd := c.headDim("hidden_size", "num_attention_heads", f.headDimDef)
	if f.qkNormAfterRope && !c.has("head_dim") && c.err == nil {
		// HunYuanDenseV1Attention and HunYuanMoEV1Attention read
		// config.head_dim, whose default is None
		c.fail("head_dim", "must be given: transformers 5.25.0 builds no attention without it (the Hunyuan config classes' default is null; the published configs need \"head_dim\": hidden_size / num_attention_heads added)")
	}
	if class := hiddenHeadsClasses[c.modelType]; class != "" && heads > 0 && hidden%heads != 0 && c.err == nil {
		c.err = &units.Error{Msg: fmt.Sprintf("%q (%d) is not a multiple of num_attention_heads (%d): %s refuses it (validate_architecture)", c.at("hidden_size"), hidden, heads, class),
			Hint: "transformers loads no such config whatever head_dim says: check hidden_size and num_attention_heads against the checkpoint's config.json"}
	}
	if c.modelType == "olmoe" {
		c.olmoeAttention(hidden, heads, hd)
	}
	if v, ok := c.raw["clip_qkv"]; ok && v != nil && f.olmoNorm && c.err == nil {
		c.fail("clip_qkv", "is not modelled (OlmoAttention's in-place clamps of q, k and v; got %s): OLMo-1B-hf and OLMo-7B-hf set null", describeJSON(v))
	}
	if f.diffllama {
		c.diffLlamaChecks(kv)
	}
	if f.helium && heads*hd != hidden && c.err == nil {
		// HeliumAttention's o_proj is nn.Linear(hidden_size, hidden_size)
		c.fail("head_dim", "times num_attention_heads must be hidden_size (%d): Helium's o_proj reads hidden_size inputs (got %d x %d)", hidden, heads, hd)
	}
	c.object("rope_scaling")
	c.number("rope_theta", 10000) // no size depends on it
	tie := c.flag("tie_word_embeddings", f.tie)
	var mup graniteMultipliers
	if f.mup {
		mup = c.graniteMultipliers()
	}
	periNorm := f.periNorm && c.flag("use_post_norm", true)

	var qkvBias, outBias, mlpBias bool
	switch {
	case f.qkvBias:
		qkvBias = true
	case f.biasFlags:
		qkvBias = c.flag("attention_bias", false)
		outBias, mlpBias = qkvBias, c.flag("mlp_bias", false)
	case f.attnBias:
		qkvBias = c.flag("attention_bias", f.biasDef)
		outBias = qkvBias
	case f.ernie:
		qkvBias = c.flag("use_bias", false)
		outBias, mlpBias = qkvBias, qkvBias
	case f.seedOSS:
		qkvBias, outBias, mlpBias = c.flag("attention_bias", true), c.flag("attention_out_bias", false), c.flag("mlp_bias", false)
	case f.starcoder2:
		qkvBias = c.flag("use_bias", true)
		outBias, mlpBias = qkvBias, qkvBias
	case f.helium: // HeliumAttention's o_proj has no bias
		qkvBias, mlpBias = c.flag("attention_bias", false), c.flag("mlp_bias", false)
	case f.cwm: // CwmAttention: no bias anywhere; CwmMLP: mlp_bias
		mlpBias = c.flag("mlp_bias", false)
	}
	actKey, actDef := f.actKey, "silu"
	if f.gemma > 0 {
		actDef = "gelu_pytorch_tanh"
		if !c.has(actKey) {
			actKey = "hidden_act" // GemmaMLP falls back to it (and warns)
		}
	}
	if f.starcoder2 {
		actDef = "gelu_pytorch_tanh"
	}
	if f.actDef != "" {
		actDef = f.actDef
	}
	act := c.mlpAct(actKey, actDef, !f.starcoder2 && !f.upDown && !f.nanochat && !f.bitnet)

	var pa, po, pe float64
	if !f.ernie && !f.seedOSS { // Ernie4_5Attention sets attention_dropout = 0.0 whatever the config says
		pa = c.prob("attention_dropout", 0)
	}
	switch c.modelType {
	case "phi3":
		// embd_pdrop is read by Phi3Config but no release applies it:
		// 4.41.0's Phi3Model builds embed_dropout and never calls it,
		// 4.57.1's and 5.25.0's have no such module (TestPhi3EmbdPdropUnused).
		c.prob("embd_pdrop", 0)
		po = c.prob("resid_pdrop", 0)
	case "seed_oss": // SeedOssConfig's defaults, as the published config.json
		pa, po = c.prob("attention_dropout", 0.1), c.prob("residual_dropout", 0.1)
	case "starcoder2":
		po = c.prob("residual_dropout", 0)
		pe = c.prob("embedding_dropout", 0)
	}
	// attention_dropout alone drops the probabilities only
	// (eager_attention_forward's dropout, SDPA's dropout_p).
	attnDrop, afterAttn, probsOnly := pa, []core.Layer(nil), pa > 0 && po == 0
	if !probsOnly {
		attnDrop, afterAttn = c.attnDropout("attention_dropout", pa, po, "dropout")
	}

	at := &nn.Attention{Name: "self_attn", Dim: hidden, Heads: heads, KVHeads: kv, HeadDim: hd,
		QKVBias: qkvBias, OutBias: outBias, Impl: attn, Causal: true, Dropout: attnDrop,
		Rope: true, FusedQKV: f.fused, RepeatKV: f.fused, SoftmaxFP32: true, QKNorm: f.qkNorm, Sinks: f.sinks}
	if f.fused {
		at.QKVName = "qkv_proj" // Phi3Attention's
	}
	at.SinkScale = f.graniteSWA
	at.QKNormGemma = f.qkNorm && f.gemma > 0
	at.QKNormAfterRope = f.qkNormAfterRope
	at.ProbsDropoutOnly = probsOnly
	at.QKNormWide, at.QKNormWideLlama = f.qkNormWide, f.qkNormWide
	at.EagerMask = true   // masking_utils' one mask a forward (per layer type)
	at.SubNorm = f.bitnet // BitNetAttention's attn_sub_norm
	if f.bitnet {
		c.bitnetChecks(hidden, heads, hd)
	}
	at.QPosScale = c.modelType == "ministral3"
	at.QKL2Norm, at.QKL2Split = f.nanochat, f.nanochat // NanoChatAttention: rope, then q_norm and k_norm
	at.Differential = f.diffllama
	// The rotary cos and sin the model makes once a forward and every
	// layer saves (nn.Attention.ropeTables): gpt-oss's half a head wide,
	// Phi-3's partial_rotary_factor of it (its rope ends in a cat: RopeCat),
	// the vision-language models' one row a sample.
	at.RopeTables = "rotary_emb"
	at.RopeTablesBatch = c.mrope
	switch c.modelType {
	case "gpt_oss":
		at.RopeTablesDim = hd / 2
	case "phi3":
		at.RopeTablesDim, at.RopeCat = ropeWidth(hd, c.rotaryFactor("partial_rotary_factor", 1)), true
	case "ernie4_5", "ernie4_5_moe":
		at.RopeTablesDType, at.RopeTablesEachLayer = units.FP32, true
	case "helium":
		at.RopeTablesEachLayer = true
	case "olmo": // OlmoRotaryEmbedding returns cos and sin in fp32
		at.RopeTablesDType = units.FP32
	case "nemotron": // NemotronRotaryEmbedding: partial_rotary_factor of each head, 0.5 by default; the rest cat back
		at.RopeTablesDim, at.RopeCat = ropeWidth(hd, c.nemotronRotary()), true
	case "minimax_m2":
		at.RopeTablesDim, at.RopeCat = c.minimaxRotary(hd), true
	case "mellum": // MellumRotaryEmbedding: a pair a layer type
		at.RopeTables = "rotary_emb.full_attention"
	}
	norm := func(name string) core.Layer {
		switch {
		case f.layerNorm:
			return &nn.Norm{Name: name, Dim: hidden, Bias: true}
		case f.gemma > 0:
			return &nn.GemmaNorm{Name: name, Dim: hidden}
		case f.olmoNorm:
			return &nn.OlmoNorm{Name: name, Dim: hidden}
		case f.nanochat:
			return &nn.WeightlessRMSNorm{Name: name, Dim: hidden}
		case f.norm1P:
			return &nn.Norm{Name: name, Dim: hidden, Bias: true, OnePlus: true}
		case f.helium:
			// HeliumRMSNorm: (weight.to(float32) * x32_normed).to(dtype),
			// the weight's fp32 copy saved with the rows
			// (models/helium/modular_helium.py:42 at 5.25.0)
			return &nn.Norm{Name: name, Dim: hidden, RMS: true, WeightFP32: true}
		case c.modelType == "gpt_oss":
			// GptOssRMSNorm: (weight * x32_normed).to(dtype), OLMo 2's
			// (models/gpt_oss/modeling_gpt_oss.py:61 at 5.25.0).
			return &nn.Olmo2Norm{Name: name, Dim: hidden}
		}
		return &nn.Norm{Name: name, Dim: hidden, RMS: true}
	}
	var logitCap float64
	switch f.gemma {
	case 2:
		at.Softcap = c.softcap("attn_logit_softcapping", 50)
		logitCap = c.softcap("final_logit_softcapping", 30)
	case 3:
		at.Softcap = c.softcap("attn_logit_softcapping", 0)
		logitCap = c.softcap("final_logit_softcapping", 0)
	}
	if f.nanochat { // NanoChatForCausalLM is Gemma2ForCausalLM's head
		logitCap = c.softcap("final_logit_softcapping", 15)
	}
	local := c.slidingLayers(f, layers)
	if f.mellum {
		c.mellumChecks(layers, local)
	}
	nope, rope := make([]bool, max(layers, 0)), make([]int, max(layers, 0))
	if f.nope {
		nope = c.noRopeLayers(layers)
	}
	if f.graniteSWA {
		nope, rope = c.graniteSWARope(layers)
	}
	var localAt *nn.Attention
	if len(local) > 0 {
		la := *at
		la.Window = c.sizeOr("sliding_window", f.windowDef)
		if f.gemma == 3 {
			la.RopeTables = "rotary_emb_local" // rope_local_base_freq's
		}
		if f.mellum {
			la.RopeTables = "rotary_emb.sliding_attention"
		}
		localAt = &la
	}

	// The feed-forward block of each layer: dense, or sparse (MoE).
	var inter int64
	dense := func() core.Layer {
		if inter == 0 {
			inter = c.size("intermediate_size")
		}
		if f.bitnet {
			return &nn.BitNetMLP{Name: "mlp", Dim: hidden, Hidden: inter, Act: act}
		}
		m := &nn.MLP{Name: "mlp", Dim: hidden, Hidden: inter, Act: act, Bias: mlpBias, Dropout: po}
		if f.starcoder2 {
			m.InName, m.OutName = "c_fc", "c_proj"
		}
		if f.upDown {
			m.InName, m.OutName = "up_proj", "down_proj"
		}
		if f.nanochat { // NanoChatMLP: CLIPMLP's fc1, activation_fn, fc2
			m.InName, m.OutName = "fc1", "fc2"
		}
		if f.fused {
			m.FusedName = "gate_up_proj" // Phi3MLP: gate_up_proj(x).chunk(2, dim=-1)
		}
		return m
	}
	sparse := make([]bool, layers)
	moe, estimateFF := c.decoderMoE(f, hidden, layers, act, sparse)
	if c.err != nil {
		return nil
	}
	type blockKind struct {
		sparse, local, nope bool
		rope                int // GraniteSWA's rotary embedding (rotary_embs)
	}
	built := map[blockKind]core.Layer{}
	block := func(k blockKind) core.Layer {
		if b, ok := built[k]; ok {
			return b
		}
		a := at
		if k.local {
			a = localAt
		}
		if k.nope { // SmolLM3Attention: use_rope off, position_embeddings unused
			na := *a
			na.Rope, na.RopeTables = false, ""
			a = &na
		} else if f.graniteSWA {
			ra := *a
			ra.RopeTables = graniteSWARotary(k.rope)
			a = &ra
		}
		ff := moe
		if !k.sparse {
			ff = dense()
			estimateFF = math.Max(estimateFF, 3*float64(hidden)*float64(inter))
		}
		attnNorm, mlpNorm := "input_layernorm", "post_attention_layernorm"
		if f.apertus {
			attnNorm, mlpNorm = "attention_layernorm", "feedforward_layernorm"
		}
		attnPart := []core.Layer{norm(attnNorm), a}
		attnPart = append(attnPart, afterAttn...)
		if f.gemma >= 2 {
			if !f.noPostNorms {
				attnPart = append(attnPart, norm("post_attention_layernorm"))
			}
			mlpNorm = "pre_feedforward_layernorm"
		}
		mlpPart := []core.Layer{norm(mlpNorm), ff}
		if f.gemma >= 2 && !f.noPostNorms {
			mlpPart = append(mlpPart, norm("post_feedforward_layernorm"))
		}
		if periNorm {
			attnPart = append(attnPart, norm("post_norm1"))
			mlpPart = append(mlpPart, norm("post_norm2"))
		}
		if f.mup {
			attnPart = append(attnPart, mup.residual())
			mlpPart = append(mlpPart, mup.residual())
		}
		b := seq(res(attnPart...), res(mlpPart...))
		built[k] = b
		return b
	}
	blocks := make([]core.Layer, layers)
	for i := range blocks {
		blocks[i] = block(blockKind{sparse[i], local[int64(i)], nope[i], rope[i]})
	}
	c.checkTotal(float64(layers)*(4*float64(hidden)*float64(heads*hd)+estimateFF) + 2*float64(vocab)*float64(hidden))
	if c.err != nil {
		return nil
	}

	ls := []core.Layer{&nn.Embedding{Name: "embed_tokens", Rows: vocab, Dim: hidden}}
	if f.gemma > 0 {
		ls = append(ls, gemmaEmbedScale(hidden))
	}
	if f.mup {
		ls = append(ls, mup.embedding())
	}
	if pe > 0 {
		// nn.functional.dropout in Starcoder2Model.forward: no module
		ls = append(ls, &nn.Dropout{P: pe})
	}
	if f.nanochat { // NanoChatModel: self.norm before the layers too
		ls = append(ls, norm("norm"))
	}
	ls = append(ls, stackBlocks("layers", blocks), norm("norm"))
	headRows := vocab
	if c.modelType == "apertus1p5_text" {
		headRows = c.apertus1p5Head(vocab, tie)
		if c.err != nil {
			return nil
		}
	}
	m := c.finish(head, ls, headRows, tie)
	if m != nil && head == headCausalLM {
		m.LogitSoftcap = logitCap
		m.HeadBias = f.headBias && c.flag("lm_head_bias", false) ||
			c.modelType == "ernie4_5_moe" && c.flag("use_bias", false) // Ernie4_5_MoeForCausalLM's lm_head
		// HyperCLOVAX multiplies the logits by logits_scaling where
		// Granite divides: the same new [tokens, vocab] tensor, nothing saved
		m.LogitScale = mup.logits
	}
	return m
}
