package hf

import (
	"strings"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/units"
)

// The Gated DeltaNet hybrids: transformers' Qwen3NextForCausalLM
// (Qwen3-Next-80B-A3B; modeling_qwen3_next.py) and Qwen3.5's
// Qwen3_5ForCausalLM and Qwen3_5MoeForCausalLM (modeling_qwen3_5.py,
// modeling_qwen3_5_moe.py). Each layer is
//
//	x + mixer(input_layernorm(x)); x + mlp(post_attention_layernorm(x))
//
// the mixer a Gated DeltaNet (nn.GatedDeltaNet, named linear_attn) or, at
// the layers layer_types names full_attention (else every
// full_attention_interval-th, 4 by default), gated attention (self_attn:
// q_proj doubled for the output gate, q and k normed per head, rotary on
// partial_rotary_factor of each head, lowered over the whole head as for
// GLM-4.5). The mlp is Qwen2-MoE's block (num_experts routed experts of
// moe_intermediate_size, top num_experts_per_tok, plus one shared expert
// of shared_expert_intermediate_size times the sigmoid of
// shared_expert_gate; Qwen3-Next's decoder_sparse_step and
// mlp_only_layers as Qwen2-MoE's), or a SwiGLU MLP of intermediate_size
// (Qwen3.5's dense models, Qwen3-Next's mlp_only_layers).
//
// Qwen3NextRMSNorm (and Qwen3_5RMSNorm) is Gemma's: norm(x.float()) * (1 +
// weight.float()), then type_as(x) (nn.GemmaNorm; q_norm and k_norm too,
// Attention.QKNormGemma): each keeps its normed rows and 1 + weight in
// fp32 (TestGatedAttentionSaves).
//
// The checkpoints hold one multi-token prediction layer (mtp.*: fc,
// pre_fc_norm_embedding, pre_fc_norm_hidden, a gated-attention MoE layer,
// norm; vLLM's Qwen3NextMultiTokenPredictor reads num_nextn_predict_layers,
// 1 when absent, Qwen3.5's configs say mtp_num_hidden_layers), which
// transformers does not build; mtp=True adds them (nn.MTP, whose norms and
// fc count as these do).

// buildQwen3Next is Qwen3NextForCausalLM.
func buildQwen3Next(c *hfConfig, attn string, head hfHead) *core.Model {
	mtp := int64(0)
	if c.mtp {
		mtp = c.sizeOr("num_nextn_predict_layers", 1)
	}
	return c.gdnHybrid(attn, head, gdnFamily{split: false, moe: c.sizeOr("num_experts", 512) > 0, sparseSteps: true, normTopKDef: true, mtp: mtp})
}

// buildQwen35 is Qwen3.5's text model: model_type qwen3_5_text and
// qwen3_5_moe_text, or the text_config of qwen3_5 and qwen3_5_moe: arch
// Qwen3_5ForCausalLM builds the text model from the same config.json, as
// AutoModelForCausalLM does; their ForConditionalGeneration adds the
// vision tower (buildQwen35VL).
func buildQwen35(c *hfConfig, attn string, head hfHead) *core.Model {
	moe := strings.HasPrefix(c.modelType, "qwen3_5_moe")
	tc := c
	if c.modelType == "qwen3_5" || c.modelType == "qwen3_5_moe" {
		if strings.HasSuffix(c.arch, "ForConditionalGeneration") {
			return buildQwen35VL(c, attn, head) // with the vision tower (qwen3vl.go)
		}
		tc = c.sub("text_config")
		if c.err != nil {
			return nil
		}
		tc.classKeys(c.modelType + "_text") // Qwen3_5TextConfig's or Qwen3_5MoeTextConfig's defaults
		tc.mtp, tc.arch = c.mtp, c.arch
	}
	mtp := int64(0)
	if c.mtp {
		mtp = tc.sizeOr("mtp_num_hidden_layers", 0)
	}
	m := tc.gdnHybrid(attn, head, gdnFamily{split: true, moe: moe, normTopKDef: true, mtp: mtp})
	if tc.err != nil {
		c.err = tc.err
		return nil
	}
	return m
}

// gdnFamily is what differs between the Gated DeltaNet hybrids.
type gdnFamily struct {
	split       bool  // Qwen3.5's in_proj_qkv, in_proj_z, in_proj_b, in_proj_a
	moe         bool  // MoE feed-forward blocks
	sparseSteps bool  // decoder_sparse_step and mlp_only_layers pick the MoE layers (Qwen3-Next)
	normTopKDef bool  // norm_topk_prob's default
	mtp         int64 // multi-token prediction layers to add
}

func (c *hfConfig) gdnHybrid(attn string, head hfHead, f gdnFamily) *core.Model {
	hidden := c.size("hidden_size")
	layers := c.size("num_hidden_layers")
	vocab := c.size("vocab_size")
	heads := c.size("num_attention_heads")
	kv := c.kvHeads("num_key_value_heads", heads)
	hd := c.headDim("hidden_size", "num_attention_heads", 256) // Qwen3NextConfig's and Qwen3_5TextConfig's head_dim
	tie := c.flag("tie_word_embeddings", false)
	act := c.mlpAct("hidden_act", "silu", true)
	from := c
	if rp, ok := c.raw["rope_parameters"].(map[string]any); ok {
		from = &hfConfig{raw: rp, modelType: c.modelType, prefix: c.at("rope_parameters.")}
	}
	rotary := c.partialRotary(from)
	full := c.fullAttentionLayers(layers)
	if c.err != nil {
		return nil
	}
	bias := c.flag("attention_bias", false)
	at := &nn.Attention{Name: "self_attn", Dim: hidden, Heads: heads, KVHeads: kv, HeadDim: hd, QKVBias: bias, OutBias: bias,
		Impl: attn, Causal: true, Rope: true, SoftmaxFP32: true, QKNorm: true, OutputGate: true,
		Dropout: c.prob("attention_dropout", 0), RopeTables: "rotary_emb", RopeTablesBatch: c.mrope, RopeCat: true, QKNormGemma: true, EagerMask: true}
	at.RopeTablesDim = ropeWidth(at.Hd(), rotary)
	gdn := &nn.GatedDeltaNet{Name: "linear_attn", Dim: hidden, KHeads: c.sizeOr("linear_num_key_heads", 16),
		VHeads: c.sizeOr("linear_num_value_heads", 32), KHeadDim: c.sizeOr("linear_key_head_dim", 128),
		VHeadDim: c.sizeOr("linear_value_head_dim", 128), ConvK: c.sizeOr("linear_conv_kernel_dim", 4), Chunk: gdnChunk,
		SplitProj: f.split}
	c.checkLayer(gdn, gatedDeltaNetKeys)
	sparse := make([]bool, layers)
	var moe *nn.MoE
	estimateFF := 0.0
	if f.moe {
		experts := c.size("num_experts")
		inter := c.size("moe_intermediate_size")
		shared := c.size("shared_expert_intermediate_size")
		moe = &nn.MoE{Name: "mlp", Dim: hidden, Hidden: inter, Experts: experts, TopK: c.size("num_experts_per_tok"), Act: act,
			NormTopK: c.flag("norm_topk_prob", f.normTopKDef), SharedExperts: 1, SharedHidden: shared, SharedGate: true}
		c.checkLayer(moe, moeKeys("num_experts", "num_experts_per_tok"))
		estimateFF = 3 * float64(hidden) * (float64(experts)*float64(inter) + float64(shared))
		step, only := int64(1), map[int64]bool{}
		if f.sparseSteps {
			step = max(c.sizeOr("decoder_sparse_step", 1), 1) // below 1: c.err's already, read back as 0
			only = c.intList("mlp_only_layers", layers)
		}
		for i := range sparse {
			sparse[i] = !only[int64(i)] && (int64(i)+1)%step == 0
		}
	}
	var mlp core.Layer
	dense := func() core.Layer {
		if mlp == nil {
			inter := c.size("intermediate_size")
			mlp = &nn.MLP{Name: "mlp", Dim: hidden, Hidden: inter, Act: act}
			estimateFF = max(estimateFF, 3*float64(hidden)*float64(inter))
		}
		return mlp
	}
	if c.err != nil {
		return nil
	}
	norm := func(name string) core.Layer { return &nn.GemmaNorm{Name: name, Dim: hidden} }
	built := map[[2]bool]core.Layer{}
	blocks := make([]core.Layer, layers)
	for i := range blocks {
		k := [2]bool{full[int64(i)], sparse[i]}
		if built[k] == nil {
			var mixer, ff core.Layer = gdn, moe
			if k[0] {
				mixer = at
			}
			if !k[1] {
				ff = dense()
			}
			built[k] = seq(res(norm("input_layernorm"), mixer), res(norm("post_attention_layernorm"), ff))
		}
		blocks[i] = built[k]
	}
	if c.err != nil {
		return nil
	}
	mixers := max(float64(gdn.Params()), float64(at.Params()))
	c.checkTotal(float64(layers+f.mtp)*(mixers+estimateFF) + 2*float64(vocab)*float64(hidden))
	if c.err != nil {
		return nil
	}
	ls := []core.Layer{&nn.Embedding{Name: "embed_tokens", Rows: vocab, Dim: hidden}, stackBlocks("layers", blocks), norm("norm")}
	if f.mtp > 0 && head == headCausalLM {
		// The MTP layer: gated attention and the feed-forward of the
		// model's last layer kind (Qwen3-Next's and Qwen3.5-MoE's MoE).
		var ff core.Layer = moe
		if moe == nil {
			ff = dense()
		}
		block := seq(res(norm("input_layernorm"), at), res(norm("post_attention_layernorm"), ff))
		for k := range f.mtp {
			ls = append(ls, &nn.MTP{Name: "mtp_" + core.Itoa(k), Dim: hidden, Vocab: vocab, Block: block})
		}
	}
	return c.finish(head, ls, vocab, tie)
}

// gdnChunk is the delta rule's chunk: chunk_size=64 in fla's
// chunk_gated_delta_rule and in transformers' torch_chunk_gated_delta_rule.
const gdnChunk = 64

// partialRotary reads partial_rotary_factor (in rope_parameters from
// transformers 5, at the top level before; 0.25 by default): the rotation
// is lowered over the whole head, the tables every layer saves as wide as
// the rotated part (ropeWidth).
func (c *hfConfig) partialRotary(from *hfConfig) float64 {
	f := from.rotaryFactor("partial_rotary_factor", 0.25)
	if from.err != nil && c.err == nil {
		c.err = from.err
	}
	return f
}

// fullAttentionLayers reads layer_types ("linear_attention" or
// "full_attention"; transformers' legacy "mamba" and "attention" too),
// else full_attention_interval (default 4): layer i is full attention when
// (i + 1) % interval == 0 (Qwen3NextConfig.__post_init__).
func (c *hfConfig) fullAttentionLayers(layers int64) map[int64]bool {
	out := map[int64]bool{}
	if c.has("layer_types") {
		list, ok := c.raw["layer_types"].([]any)
		if !ok || int64(len(list)) != layers {
			c.fail("layer_types", "must list one layer type per layer (%d)", layers)
			return out
		}
		for i, v := range list {
			switch v {
			case "full_attention", "attention":
				out[int64(i)] = true
			case "linear_attention", "mamba":
			default:
				c.fail("layer_types", "names a layer type memsh does not know (got %s; known: linear_attention, full_attention)", describeJSON(v))
				return out
			}
		}
		return out
	}
	interval := c.sizeOr("full_attention_interval", 4)
	for i := range layers {
		if (i+1)%max(interval, 1) == 0 {
			out[i] = true
		}
	}
	return out
}

// gdnFusedNormUntil is the first transformers release whose
// Qwen3NextGatedDeltaNet no longer builds fla's FusedRMSNormGated when
// flash-linear-attention is installed (present in the 4.57.1, 5.2.0 and
// 5.14.0 wheels; 5.15.0 has Qwen3NextRMSNormGated in torch ops, which
// only a hub kernel replaces).
var gdnFusedNormUntil = [2]int{5, 15}

// setGDN sets, for transformers v, whether the Gated DeltaNet layers'
// gated norm is fla's fused one (with the fla kernel only: without fla
// installed transformers builds the torch norm in every release).
func setGDN(layers []core.Layer, v [2]int) {
	walkGDN(layers, func(g *nn.GatedDeltaNet) {
		// OLMo Hybrid's gated norm is its own torch module (OlmoHybridRMSNormGated).
		g.FusedNorm = g.Kernel != nn.GDNTorch && !g.SeparateProj && !atLeast(v, gdnFusedNormUntil)
	})
}

func walkGDN(layers []core.Layer, f func(*nn.GatedDeltaNet)) int {
	n := 0
	var walk func(l core.Layer)
	walk = func(l core.Layer) {
		if g, ok := l.(*nn.GatedDeltaNet); ok {
			f(g)
			n++
		}
		for _, ch := range l.Children() {
			walk(ch)
		}
	}
	for _, l := range layers {
		walk(l)
	}
	return n
}

// useLinearAttn sets the Gated DeltaNet layers' kernel (Options.LinearAttn).
func useLinearAttn(m *core.Model, modelType, kernel string) error {
	if kernel == "" {
		return nil
	}
	known := false
	for _, k := range nn.GDNKernels() {
		known = known || k == kernel
	}
	if !known {
		return &units.Error{Msg: `linear_attn must be "fla" or "torch" (got "` + kernel + `")`,
			Hint: `"fla": flash-linear-attention's chunk_gated_delta_rule with causal-conv1d (what transformers runs when both are installed); "torch": transformers' fallback without them`}
	}
	kda := 0
	walkLayers(m.Layers, func(l core.Layer) {
		if _, ok := l.(*nn.KimiDeltaAttention); ok {
			kda++
		}
	})
	if kda > 0 {
		if kernel == nn.GDNFla {
			return &units.Error{Msg: `linear_attn="fla": model_type "` + modelType + `"'s Kimi Delta Attention layers are modelled as transformers runs them without flash-linear-attention (its torch chunk kernel), not fla's chunk_kda`,
				Hint: `leave linear_attn out or pass "torch"`}
		}
		return nil
	}
	fused := false
	if walkGDN(m.Layers, func(g *nn.GatedDeltaNet) { fused = fused || g.FusedNorm }) == 0 {
		return &units.Error{Msg: "linear_attn=\"" + kernel + "\": model_type \"" + modelType + "\" has no Gated DeltaNet layers",
			Hint: "linear_attn= applies to qwen3_next, Qwen3.5 (qwen3_5, qwen3_5_moe), olmo_hybrid and kimi_linear; leave it out for this model"}
	}
	walkGDN(m.Layers, func(g *nn.GatedDeltaNet) {
		g.Kernel = kernel
		g.FusedNorm = fused && kernel == nn.GDNFla
	})
	return nil
}
