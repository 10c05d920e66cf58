package hf

import (
	"strings"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// NVIDIA's Nemotron-H (NemotronHForCausalLM, models/nemotron_h at
// transformers 5.25.0): pre-norm blocks x + mixer(norm(x)) whose mixer
// hybrid_override_pattern (or transformers 5's layers_block_type) picks
// per layer: "M" Mamba-2, "*" attention (no rotary embeddings), "-" an
// MLP (up_proj, squared ReLU, down_proj) and "E" an MoE block
// (NemotronHMoE, Nemotron 3 Nano 30B-A3B's; from transformers 5.3, the
// first release with models/nemotron_h).

// nemotronLibrarySince is the first transformers release with
// models/nemotron_h (the 5.3.0 wheel; 5.2.0 has none), NemotronHMoE
// included: its NemotronHForCausalLM holds the base model as "model"
// (hfFamily.modelBaseSince). Before it the model runs the hub's
// modeling_nemotron_h.py (trust_remote_code), whose base is "backbone" and
// whose MoE layers memsh does not model.
var nemotronLibrarySince = [2]int{5, 3}

// nemotronNormSince is the first transformers release whose
// NemotronHRMSNorm multiplies the fp32 rows by weight.to(torch.float32)
// (nn.Norm.WeightFP32): the 5.18.0 wheel; 5.17.0 returns
// weight * hidden_states.to(input_dtype), Llama's.
var nemotronNormSince = [2]int{5, 18}

// setNemotronNorms sets nn.Norm.WeightFP32 on every RMSNorm of a
// Nemotron-H (the blocks' norm and norm_f; the Mamba-2 mixers' gated
// norm is their own) to on.
func setNemotronNorms(layers []core.Layer, on bool) {
	var walk func(l core.Layer)
	walk = func(l core.Layer) {
		if n, ok := l.(*nn.Norm); ok && n.RMS {
			n.WeightFP32 = on
		}
		for _, c := range l.Children() {
			walk(c)
		}
	}
	for _, l := range layers {
		walk(l)
	}
}

func buildNemotronH(c *hfConfig, attn string, head hfHead) *core.Model {
	hidden := c.size("hidden_size")
	pattern := c.nemotronPattern()
	layers := c.sizeOr("num_hidden_layers", int64(len(pattern)))
	vocab := c.size("vocab_size")
	tie := c.flag("tie_word_embeddings", false)
	if c.err == nil && int64(len(pattern)) != layers {
		c.fail("hybrid_override_pattern", "must give one of M, *, -, E per layer (%d layers, got %d characters)", layers, len(pattern))
	}
	if c.err != nil {
		return nil
	}
	norm := func() core.Layer { return &nn.Norm{Name: "norm", Dim: hidden, RMS: true} }
	kinds := map[rune]core.Layer{}
	var estimate float64
	for _, k := range pattern {
		if kinds[k] != nil {
			continue
		}
		var mixer core.Layer
		switch k {
		case 'M':
			mixer = c.mamba2Mixer(hidden, true)
		case '*':
			heads := c.size("num_attention_heads")
			hd := c.sizeOr("attention_head_dim", c.sizeOr("head_dim", hidden/max(heads, 1)))
			mixer = &nn.Attention{Name: "mixer", Dim: hidden, Heads: heads, KVHeads: c.kvHeads("num_key_value_heads", heads), HeadDim: hd,
				QKVBias: c.flag("attention_bias", false), OutBias: c.flag("attention_bias", false), Impl: attn, Causal: true,
				SoftmaxFP32: true, EagerMask: true} // NemotronHModel's create_causal_mask, one a forward (TestNemotronHEagerMaskHeld)
		case '-':
			mixer = &nn.MLP{Name: "mixer", Dim: hidden, Hidden: c.size("intermediate_size"), Act: c.nemotronAct(), Bias: c.flag("mlp_bias", false),
				InName: "up_proj", OutName: "down_proj"}
		case 'E':
			mixer = c.nemotronMoE(hidden)
		default:
			c.fail("hybrid_override_pattern", "has %q: memsh reads M (Mamba-2), * (attention), - (MLP) and E (MoE)", string(k))
			return nil
		}
		if c.err != nil {
			return nil
		}
		kinds[k] = res(norm(), mixer)
		estimate += float64(mixer.Params())
	}
	c.checkTotal(float64(layers)*estimate + 2*float64(vocab)*float64(hidden))
	if c.err != nil {
		return nil
	}
	blocks := make([]core.Layer, 0, layers)
	for _, k := range pattern {
		blocks = append(blocks, kinds[k])
	}
	ls := []core.Layer{&nn.Embedding{Name: "embeddings", Rows: vocab, Dim: hidden}, stackBlocks("layers", blocks),
		&nn.Norm{Name: "norm_f", Dim: hidden, RMS: true}}
	return c.finish(head, ls, vocab, tie)
}

// nemotronAct is mlp_hidden_act, the MLP's and the experts' activation:
// squared ReLU (NemotronHConfig's default) is the one memsh models.
func (c *hfConfig) nemotronAct() string {
	if act := c.str("mlp_hidden_act", "relu2"); act != "relu2" {
		c.fail("mlp_hidden_act", "names an activation memsh does not model for nemotron_h (got %q; known: relu2)", act)
	}
	return "relu2"
}

// nemotronMoE is an "E" layer's NemotronHMoE: NemotronHTopkRouter (the
// mixer's gate: an fp32 weight over the fp32 input, sigmoid scores, the
// top num_experts_per_tok of scores + e_score_correction_bias within the
// topk_group best of n_group groups, the chosen scores renormalised when
// norm_topk_prob and scaled by routed_scaling_factor: DeepSeek-V3's
// router, line for line), n_routed_experts experts of
// moe_intermediate_size that are not gated (NemotronHExperts: 3-D up_proj
// and down_proj, squared ReLU), and one shared MLP (shared_experts) of
// moe_shared_expert_intermediate_size added to the routed output
// (n_shared_experts is not read). NemotronHConfig's defaults where a key
// is absent. moe_latent_size's projections around the experts are not
// modelled.
func (c *hfConfig) nemotronMoE(hidden int64) *nn.MoE {
	if c.has("moe_latent_size") && c.raw["moe_latent_size"] != nil {
		c.fail("moe_latent_size", "is not modelled for nemotron_h (got %s): NemotronHMoE's fc1_latent_proj and fc2_latent_proj around the experts", describeJSON(c.raw["moe_latent_size"]))
		return nil
	}
	experts := c.sizeOr("n_routed_experts", 8)
	if g := c.sizeOr("n_group", 1); c.err == nil && (experts%g != 0 || experts/g < 2) {
		c.fail("n_group", "must divide n_routed_experts (%d) into groups of at least 2 (got %d): NemotronHTopkRouter takes the top 2 of each group", experts, g)
	}
	if g, k := c.sizeOr("n_group", 1), c.sizeOr("topk_group", 1); c.err == nil && k > g {
		c.fail("topk_group", "must be at most n_group (%d, got %d)", g, k)
	}
	return &nn.MoE{Name: "mixer", Dim: hidden, Hidden: c.sizeOr("moe_intermediate_size", 7688), Experts: experts,
		TopK: c.sizeOr("num_experts_per_tok", 2), Act: c.nemotronAct(), Router: nn.RouterSigmoid,
		NormTopK: c.flag("norm_topk_prob", true), ScoreBias: true,
		SharedExperts: 1, SharedHidden: c.sizeOr("moe_shared_expert_intermediate_size", 7688), SharedBias: c.flag("mlp_bias", false), SharedUpDown: true}
}

// nemotronBlockTypes maps transformers 5's layers_block_type entries to
// hybrid_override_pattern's characters (NemotronHConfig at 5.17.0:
// "linear_attention" M, "moe" E, "full_attention" *, "mlp" -).
var nemotronBlockTypes = map[string]string{"linear_attention": "M", "moe": "E", "full_attention": "*", "mlp": "-"}

// nemotronPattern reads hybrid_override_pattern, or, when absent, the
// layers_block_type list transformers 5 saves in its place (NemotronHConfig
// at 5.17.0 pops hybrid_override_pattern and derives num_hidden_layers
// from the list, so a config it saves has neither).
func (c *hfConfig) nemotronPattern() string {
	if c.has("hybrid_override_pattern") || !c.has("layers_block_type") {
		return c.str("hybrid_override_pattern", "")
	}
	list, ok := c.raw["layers_block_type"].([]any)
	if !ok {
		c.fail("layers_block_type", "must be a list of \"linear_attention\", \"moe\", \"full_attention\", \"mlp\" (got %s)", describeJSON(c.raw["layers_block_type"]))
		return ""
	}
	var b strings.Builder
	for i, v := range list {
		s, _ := v.(string)
		k, ok := nemotronBlockTypes[s]
		if !ok {
			c.fail("layers_block_type", "entry %d must be \"linear_attention\", \"moe\", \"full_attention\" or \"mlp\" (got %s)", i, describeJSON(v))
			return ""
		}
		b.WriteString(k)
	}
	return b.String()
}
