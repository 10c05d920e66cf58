package hf

import (
	"slices"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// buildGraniteMoeHybrid is transformers' GraniteMoeHybridForCausalLM (IBM's
// Granite 4.0-H: micro, tiny, small; models/granitemoehybrid/
// modeling_granitemoehybrid.py at 5.25.0). Granite's multipliers
// (granite.go) over a stack whose layer i mixes its tokens by
// layer_types[i], "mamba" (transformers 5 reads it as "linear_attention":
// a Mamba-2 layer, GraniteMoeHybridMambaLayer) or "attention"
// ("full_attention"), then runs the routed experts (graniteMoE, none when
// num_local_experts is 0) and the shared expert (shared_mlp, nn.FusedGLU)
// on the same input, summed:
//
//	x = x + mixer(input_layernorm(x)) * residual_multiplier
//	h = post_attention_layernorm(x)
//	x = x + (block_sparse_moe(h) + shared_mlp(h)) * residual_multiplier
//
// The attention has rotary embeddings only when position_embedding_type
// is "rope" (Granite 4.0-H's configs say "nope"; the default, null, is
// none either).
//
// The Mamba-2 layer runs as nn.Mamba2 lowers it: in training, with no
// cache, GraniteMoeHybridMambaLayer.forward calls
// mamba2_split_conv1d_scan_combined, the mamba_ssm kernel (a CUDA build of
// mamba_ssm and causal_conv1d, or the hub's kernels), which keeps in_proj's
// output, the scan output and the norm's rstd. Where no kernel loads (the
// CPU, or CUDA without them) the layer falls back to the PyTorch chunked
// scan (mamba2_scan_forward), which keeps per chunk [chunk, chunk]
// decay matrices and the states: not modelled, as for mamba2 and
// nemotron_h.
func buildGraniteMoeHybrid(c *hfConfig, attn string, head hfHead) *core.Model {
	hidden := c.size("hidden_size")
	layers := c.size("num_hidden_layers")
	vocab := c.size("vocab_size")
	heads := c.size("num_attention_heads")
	tie := c.flag("tie_word_embeddings", false)
	mup := c.graniteMultipliers()
	act := c.mlpAct("hidden_act", "silu", true)
	isMamba := c.graniteLayerTypes(layers)
	rope := c.granitePositions()
	if c.err != nil {
		return nil
	}
	at := &nn.Attention{Name: "self_attn", Dim: hidden, Heads: heads, KVHeads: c.kvHeads("num_key_value_heads", heads),
		HeadDim: c.headDim("hidden_size", "num_attention_heads", 0), QKVBias: c.flag("attention_bias", false),
		OutBias: c.flag("attention_bias", false), Impl: attn, Causal: true, SoftmaxFP32: true, Rope: rope, EagerMask: true}
	if rope {
		c.object("rope_scaling")
		at.RopeTables = "rotary_emb"
	}
	at.Dropout = c.prob("attention_dropout", 0)
	// GraniteMoeHybridConfig.validate_architecture checks the Mamba
	// sizes whatever the layer types are
	mamba := c.graniteMamba(hidden)
	if !slices.Contains(isMamba, true) {
		mamba = nil
	}
	shared := &nn.FusedGLU{Name: "shared_mlp", Dim: hidden, Hidden: c.size("shared_intermediate_size"), Act: act}
	c.checkLayer(shared, map[nn.Field]string{nn.FieldHidden: "shared_intermediate_size"})
	var ff core.Layer = shared
	estimate := float64(shared.Params()) + 4*float64(hidden)*float64(heads*at.Hd())
	if c.sizeOr("num_local_experts", 8) > 0 { // GraniteMoeHybridDecoderLayer: no block_sparse_moe at 0
		moe, e := c.graniteMoE(hidden, act)
		ff, estimate = &nn.Parallel{Branches: []core.Layer{moe, shared}}, estimate+e
	}
	if mamba != nil {
		estimate += float64(mamba.Params())
	}
	c.checkTotal(float64(layers)*estimate + 2*float64(vocab)*float64(hidden))
	if c.err != nil {
		return nil
	}
	norm := func(name string) core.Layer { return &nn.Norm{Name: name, Dim: hidden, RMS: true} }
	kinds := map[bool]core.Layer{}
	blocks := make([]core.Layer, layers)
	for i, m := range isMamba {
		if kinds[m] == nil {
			var mixer core.Layer = at
			if m {
				mixer = mamba
			}
			kinds[m] = seq(res(norm("input_layernorm"), mixer, mup.residual()),
				res(norm("post_attention_layernorm"), ff, mup.residual()))
		}
		blocks[i] = kinds[m]
	}
	ls := []core.Layer{&nn.Embedding{Name: "embed_tokens", Rows: vocab, Dim: hidden}, mup.embedding(),
		stackBlocks("layers", blocks), norm("norm")}
	m := c.finish(head, ls, vocab, tie)
	if m != nil && head == headCausalLM {
		m.LogitScale = mup.logits
	}
	return m
}

// graniteLayerTypes reads layer_types (or transformers 5's
// layers_block_type, the same list: GraniteMoeHybridConfig.attribute_map):
// which layers are Mamba-2 layers. Absent, every layer is
// (GraniteMoeHybridConfig.__post_init__). "mamba" and "attention" are the
// hub's names, "linear_attention" and "full_attention" transformers 5's
// (_LEGACY_LAYER_TYPE_REMAP in configuration_utils.py at 5.25.0).
func (c *hfConfig) graniteLayerTypes(layers int64) []bool {
	out := make([]bool, max(layers, 0))
	key := "layer_types"
	if !c.has(key) && c.has("layers_block_type") {
		key = "layers_block_type"
	}
	if !c.has(key) {
		for i := range out {
			out[i] = true
		}
		return out
	}
	list, ok := c.raw[key].([]any)
	if !ok || int64(len(list)) != layers {
		c.fail(key, "must list one layer type per layer (%d: \"mamba\" or \"attention\"; got %s)", layers, describeJSON(c.raw[key]))
		return out
	}
	for i, v := range list {
		switch v {
		case "mamba", "linear_attention":
			out[i] = true
		case "attention", "full_attention":
		default:
			c.fail(key, "entry %d must be \"mamba\" or \"attention\" (got %s)", i, describeJSON(v))
			return out
		}
	}
	return out
}

// granitePositions reads position_embedding_type: "rope" gives the
// attention rotary embeddings; "nope" and null (the default) none.
func (c *hfConfig) granitePositions() bool {
	v, ok := c.raw["position_embedding_type"]
	if !ok || v == nil {
		return false
	}
	switch v {
	case "rope":
		return true
	case "nope":
		return false
	}
	c.fail("position_embedding_type", "must be \"rope\", \"nope\" or null (got %s)", describeJSON(v))
	return false
}

// graniteMamba is GraniteMoeHybridMambaLayer's sizes: mamba_n_heads heads
// of mamba_d_head ("auto": mamba_expand x hidden_size / mamba_n_heads),
// mamba_n_groups groups, mamba_d_state, mamba_d_conv, mamba_chunk_size,
// biases by mamba_proj_bias and mamba_conv_bias; the gated norm always.
func (c *hfConfig) graniteMamba(hidden int64) *nn.Mamba2 {
	inner := c.sizeOr("mamba_expand", 2) * hidden
	m := &nn.Mamba2{Name: "mamba", Dim: hidden, Inner: inner, Heads: c.sizeOr("mamba_n_heads", 128),
		Groups: c.sizeOr("mamba_n_groups", 1), State: c.sizeOr("mamba_d_state", 256), ConvK: c.sizeOr("mamba_d_conv", 4),
		Chunk: c.sizeOr("mamba_chunk_size", 256), Bias: c.flag("mamba_proj_bias", false), ConvBias: c.flag("mamba_conv_bias", true),
		GatedNorm: true}
	c.mambaHeads(m, "mamba_expand x hidden_size")
	return m
}

// mambaHeads sets m's head width from mamba_d_head ("auto": m.Inner /
// mamba_n_heads, GraniteMoeHybridConfig's and FalconH1Config's
// __post_init__) and checks m against the mamba_-prefixed keys; inner
// says what m.Inner is.
func (c *hfConfig) mambaHeads(m *nn.Mamba2, inner string) {
	if d, ok := c.raw["mamba_d_head"]; ok && d != "auto" {
		m.HeadDim = c.size("mamba_d_head")
	} else if m.Heads > 0 {
		m.HeadDim = m.Inner / m.Heads
	}
	if c.err == nil && m.Heads*m.HeadDim != m.Inner {
		c.fail("mamba_d_head", "times mamba_n_heads (%d x %d) must be %s (%d)", m.HeadDim, m.Heads, inner, m.Inner)
	}
	c.checkLayer(m, map[nn.Field]string{nn.FieldHeads: "mamba_n_heads", nn.FieldHeadDim: "mamba_d_head", nn.FieldGroups: "mamba_n_groups",
		nn.FieldState: "mamba_d_state", nn.FieldConvKernel: "mamba_d_conv", nn.FieldChunk: "mamba_chunk_size"})
}
