package hf

import (
	"math"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// buildAfmoe builds transformers' AfmoeForCausalLM (model_type afmoe:
// arcee-ai's Trinity-Mini and Trinity-Nano; models/afmoe/modular_afmoe.py
// at 5.25.0). Its decoder layer norms each sublayer's input and output,
// all four norms Olmo2RMSNorm (nn.Olmo2Norm):
//
//	h = x + post_attention_layernorm(self_attn(input_layernorm(x)))
//	y = h + post_mlp_layernorm(mlp(pre_mlp_layernorm(h)))
//
// AfmoeAttention is Llama's with
//
//   - q_norm and k_norm, Olmo2RMSNorm over each head of head_dim
//     (nn.Attention.QKNormOlmo2), before the rotary embedding;
//   - gate_proj, Linear(hidden_size, heads x head_dim, no bias), whose
//     sigmoid multiplies the attention output before o_proj
//     (nn.Attention.GateProj);
//   - the layers layer_types names "sliding_attention" attend to the last
//     sliding_window keys and alone rotate q and k; the "full_attention"
//     ones neither slide nor rotate. Without layer_types, AfmoeConfig's
//     pattern: every global_attn_every_n_layers-th layer (default 4) is
//     full. The model's one rotary pair (LlamaRotaryEmbedding, in the
//     activations' dtype) reaches the sliding layers.
//
// The first num_dense_layers layers (default 1) run a SwiGLU mlp of
// intermediate_size; the others AfmoeSparseMoeBlock: AfmoeTokenChoiceRouter
// (router.gate, an nn.Linear in the model's dtype, the logits cast to fp32
// for the sigmoid, the top num_experts_per_tok of the scores plus the
// block's expert_bias, renormalised, times route_scale: fp32 weights; a
// product with a Python float saves nothing), the routed experts (3-D
// gate_up_proj and down_proj, Qwen2MoeExperts, moe_intermediate_size) and
// shared_experts, one MLP of moe_intermediate_size x num_shared_experts
// added without a gate. expert_bias is an nn.Parameter of num_experts
// created fp32 with requires_grad=False (nn.MoE.ScoreBiasParam), which
// from_pretrained keeps fp32 (_keep_in_fp32_modules_strict); the norms
// its _keep_in_fp32_modules lists stay fp32 in fp16 loads only, not
// modelled (their weights counted in fp16; what they keep is the same:
// the weight's product is fp32 either way). With mup_enabled the embeddings are multiplied by
// sqrt(hidden_size), a Python float (nothing saved). The head is untied
// by default.
//
// The published configs carry keys AfmoeConfig does not read (n_group,
// topk_group, score_func, route_norm, use_grouped_mm, num_expert_groups,
// num_limited_groups): transformers builds the model above whatever they
// say, and so does memsh.
func buildAfmoe(c *hfConfig, attn string, head hfHead) *core.Model {
	hidden, layers, heads, kv, vocab, inter := c.decoderSizes()
	hd := c.headDim("hidden_size", "num_attention_heads", 128) // AfmoeConfig's head_dim default
	c.object("rope_scaling")
	c.object("rope_parameters")
	c.number("rope_theta", 10000) // no size depends on it
	c.number("route_scale", 1)    // a product with a Python float: nothing saved
	tie := c.flag("tie_word_embeddings", false)
	act := c.mlpAct("hidden_act", "silu", true)
	drop := c.prob("attention_dropout", 0)
	mup := c.flag("mup_enabled", false)
	dense := c.intOr("num_dense_layers", 1)
	window := c.afmoeWindow()
	sliding := c.afmoeSliding(layers)
	if c.err != nil {
		return nil
	}
	full := &nn.Attention{Name: "self_attn", Dim: hidden, Heads: heads, KVHeads: kv, HeadDim: hd, Impl: attn, Causal: true,
		Dropout: drop, ProbsDropoutOnly: true, SoftmaxFP32: true, QKNorm: true, QKNormOlmo2: true, GateProj: true, EagerMask: true}
	local := *full
	local.Window, local.Rope, local.RopeTables = window, true, "rotary_emb"
	moe := c.afmoeMoE(hidden, act)
	c.checkLayer(&local, nil)
	mlp := &nn.MLP{Name: "mlp", Dim: hidden, Hidden: inter, Act: act}
	attnParams := 5 * float64(hidden) * float64(heads*hd)
	c.checkTotal(float64(layers)*(attnParams+3*float64(hidden)*float64(inter)+float64(moe.Params())) + 2*float64(vocab)*float64(hidden))
	if c.err != nil {
		return nil
	}
	norm := func(name string) core.Layer { return &nn.Olmo2Norm{Name: name, Dim: hidden} }
	type kind struct{ slides, routed bool }
	made := map[kind]core.Layer{}
	blocks := make([]core.Layer, len(sliding))
	for i, slides := range sliding {
		k := kind{slides, int64(i) >= dense}
		if made[k] == nil {
			at, ff := full, core.Layer(mlp)
			if k.slides {
				at = &local
			}
			if k.routed {
				ff = moe
			}
			made[k] = seq(res(norm("input_layernorm"), at, norm("post_attention_layernorm")),
				res(norm("pre_mlp_layernorm"), ff, norm("post_mlp_layernorm")))
		}
		blocks[i] = made[k]
	}
	ls := []core.Layer{&nn.Embedding{Name: "embed_tokens", Rows: vocab, Dim: hidden}}
	if mup {
		ls = append(ls, &nn.Scale{Name: "mup_scale", Factor: math.Sqrt(float64(hidden))})
	}
	ls = append(ls, stackBlocks("layers", blocks), norm("norm"))
	return c.finish(head, ls, vocab, tie)
}

// afmoeMoE is AfmoeSparseMoeBlock (buildAfmoe's doc).
func (c *hfConfig) afmoeMoE(hidden int64, act string) *nn.MoE {
	moeInter := c.sizeOr("moe_intermediate_size", 1408)
	m := &nn.MoE{Name: "mlp", Dim: hidden, Hidden: moeInter, Experts: c.sizeOr("num_experts", 64), TopK: c.sizeOr("num_experts_per_tok", 6), Act: act,
		SharedExperts: c.intOr("num_shared_experts", 2), SharedHidden: moeInter,
		Router: nn.RouterSigmoid, SigmoidLogitsFP32: true, LinearRouter: true, RouterName: "router.gate", NormTopK: true,
		ScoreBias: true, ScoreBiasParam: true, ScoreBiasName: "expert_bias"}
	c.checkLayer(m, moeKeys("num_experts", "num_experts_per_tok"))
	return m
}

// afmoeWindow is sliding_window (AfmoeConfig's default 1024). A null one
// leaves transformers' sliding layers unwindowed but their mask function
// without a window, on which 5.25.0's create_sliding_window_causal_mask
// fails: refused.
func (c *hfConfig) afmoeWindow() int64 {
	if v, set := c.raw["sliding_window"]; set && v == nil {
		c.fail("sliding_window", "must be a window size for the sliding_attention layers (got null)")
	}
	return c.sizeOr("sliding_window", 1024)
}

// afmoeSliding lists the sliding layers: layer_types, else AfmoeConfig's
// pattern, sliding unless (i + 1) % global_attn_every_n_layers == 0.
func (c *hfConfig) afmoeSliding(layers int64) []bool {
	if c.has("layer_types") {
		return c.layerTypes(layers, "sliding_attention", "full_attention")
	}
	every := c.sizeOr("global_attn_every_n_layers", 4)
	sliding := make([]bool, max(layers, 0))
	for i := range sliding {
		sliding[i] = every > 0 && (int64(i)+1)%every != 0
	}
	return sliding
}
