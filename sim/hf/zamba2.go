package hf

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// buildZamba2 is transformers' Zamba2ForCausalLM (Zyphra's Zamba2-1.2B,
// -2.7B and -7B; models/zamba2/modeling_zamba2.py and
// configuration_zamba2.py at 5.25.0). Layer i is by layers_block_type[i]
// a Mamba-2 decoder layer ("mamba", x + mamba(input_layernorm(x))) or a
// hybrid layer ("hybrid", nn.Zamba2Hybrid): a shared transformer block
// over the hidden states concatenated with a copy of the embeddings
// (nn.Zamba2Embed), a linear, then the layer's own Mamba-2 decoder layer
// with the block's output added to its input. The num_mem_blocks shared
// blocks take turns over the hybrid layers; each hybrid layer's block is
// tied to the first hybrid layer's of its block, and adds adapters of its
// own: on gate_up_proj always, on q, k and v with
// use_shared_attention_adapter (adapter_rank each). The block's attention
// reads 2 x hidden_size (attention_hidden_size) in heads of
// attention_head_dim = 2 x hidden_size // num_attention_heads, with
// rotary embeddings only with use_mem_rope, and maps back to hidden_size.
// final_layernorm, and lm_head tied to the embeddings by default.
//
// The Mamba-2 layers (Zamba2MambaMixer: in_proj, a conv1d that always has
// a bias whatever use_conv_bias says, the gated norm over
// mamba_ngroups groups, out_proj, add_bias_linear biasing the
// projections; heads of mamba_expand x hidden_size // n_mamba_heads) run
// the mamba_ssm kernel as nn.Mamba2 lowers it: in training with no cache
// the mixer calls mamba2_split_conv1d_scan_combined whatever
// use_mem_eff_path says; where no kernel loads transformers falls back to
// the PyTorch chunked scan, not modelled (as for bamba and
// granitemoehybrid).
func buildZamba2(c *hfConfig, attn string, head hfHead) *core.Model {
	hidden := c.size("hidden_size")
	layers := c.size("num_hidden_layers")
	vocab := c.size("vocab_size")
	heads := c.size("num_attention_heads")
	tie := c.flag("tie_word_embeddings", true) // Zamba2Config's default
	inter := c.sizeOr("intermediate_size", 4*hidden)
	act := c.mlpAct("hidden_act", "gelu", true)
	blocks := c.sizeOr("num_mem_blocks", 1)
	rank := c.sizeOr("adapter_rank", 128)
	attnAdapters := c.flag("use_shared_attention_adapter", false)
	rope := c.flag("use_mem_rope", false)
	bias := c.flag("add_bias_linear", false)
	c.object("rope_scaling")
	hybrid := c.zamba2LayerTypes(layers)
	if c.err == nil && heads > 2*hidden {
		c.fail("num_attention_heads", "(%d) is more than twice hidden_size (%d): a head would be 0 wide (attention_head_dim is 2 x hidden_size // num_attention_heads)", heads, hidden)
	}
	mamba := c.zamba2Mamba(hidden, bias)
	if c.err != nil {
		return nil
	}
	hd := 2 * hidden / heads
	at := &nn.Attention{Name: "self_attn", Dim: hidden, InWidth: 2 * hidden, Heads: heads, KVHeads: c.kvHeads("num_key_value_heads", heads),
		HeadDim: hd, Impl: attn, Causal: true, SoftmaxFP32: true, EagerMask: true, ProbsDropoutOnly: true,
		Dropout: c.prob("attention_dropout", 0), Rope: rope}
	if rope {
		at.RopeTables = "rotary_emb"
	}
	if attnAdapters {
		at.AdapterRank = rank
	}
	c.checkLayer(at, map[nn.Field]string{nn.FieldHeads: "num_attention_heads"})
	if c.err == nil && attnAdapters {
		if err := at.Validate(""); err != nil {
			c.fail("use_shared_attention_adapter", "is true, but %v", err)
		}
	}
	mlp := &nn.Zamba2MLP{Name: "feed_forward", Dim: hidden, Hidden: inter, AdapterRank: rank, Act: act, Bias: bias}
	c.checkLayer(mlp, map[nn.Field]string{nn.FieldHidden: "intermediate_size"})
	n := float64(0)
	for _, h := range hybrid {
		if h {
			n++
		}
	}
	c.checkTotal(float64(layers)*float64(mamba.Params()) + n*float64(at.Params()+mlp.Params()+hidden*hidden) + 2*float64(vocab)*float64(hidden))
	if c.err != nil {
		return nil
	}
	mambaLayer := res(&nn.Norm{Name: "input_layernorm", Dim: hidden, RMS: true}, mamba)
	inner := *mamba
	inner.Name = "mamba_decoder.mamba"
	out := make([]core.Layer, layers)
	var firsts []int64 // the first hybrid layer of each shared block
	k, calls := int64(0), int64(n)
	for i := range out {
		if !hybrid[i] {
			out[i] = mambaLayer
			continue
		}
		b := k % blocks
		if b == int64(len(firsts)) {
			firsts = append(firsts, int64(i))
		}
		a, m := *at, *mlp
		var idle []int64 // the block's other calls: b, b + blocks, ... of calls
		for j := b; j < calls; j += blocks {
			if j != k {
				idle = append(idle, j)
			}
		}
		if attnAdapters {
			a.AdapterIndex, a.AdapterIdle = k, idle
		}
		m.AdapterIndex, m.AdapterIdle = k, idle
		// the hybrid layers block b runs in: b, b + blocks, ... of calls
		own := &nn.Zamba2Hybrid{Dim: hidden, First: firsts[b], Own: firsts[b] == int64(i), Attn: &a, MLP: &m, Mamba: &inner}
		if own.Own {
			own.Calls = (calls - b + blocks - 1) / blocks
		}
		out[i] = own
		k++
	}
	ls := []core.Layer{&nn.Zamba2Embed{Vocab: vocab, Dim: hidden}, stackBlocks("layers", out),
		&nn.Norm{Name: "final_layernorm", Dim: hidden, RMS: true}}
	return c.finish(head, ls, vocab, tie)
}

// zamba2Mamba is Zamba2MambaMixer's sizes: mamba_expand x hidden_size
// wide in n_mamba_heads heads (Zamba2Config's mamba_headdim, the width
// over the heads, rounded down: a width the heads do not divide is
// refused, as the kernel's views would fail).
func (c *hfConfig) zamba2Mamba(hidden int64, bias bool) *nn.Mamba2 {
	inner := c.sizeOr("mamba_expand", 2) * hidden
	m := &nn.Mamba2{Name: "mamba", Dim: hidden, Inner: inner, Heads: c.sizeOr("n_mamba_heads", 8),
		Groups: c.sizeOr("mamba_ngroups", 1), State: c.sizeOr("mamba_d_state", 64), ConvK: c.sizeOr("mamba_d_conv", 4),
		Chunk: c.sizeOr("chunk_size", 256), Bias: bias, ConvBias: true, GatedNorm: true}
	if c.err == nil && inner%m.Heads != 0 {
		c.fail("n_mamba_heads", "(%d) must divide mamba_expand x hidden_size (%d): each head is mamba_headdim = that // n_mamba_heads wide", m.Heads, inner)
	}
	if c.err == nil && inner%m.Groups != 0 {
		c.fail("mamba_ngroups", "(%d) must divide mamba_expand x hidden_size (%d): the gated norm's groups", m.Groups, inner)
	}
	if c.err != nil {
		return m
	}
	m.HeadDim = inner / m.Heads
	c.checkLayer(m, map[nn.Field]string{nn.FieldHeads: "n_mamba_heads", nn.FieldHeadDim: "n_mamba_heads", nn.FieldGroups: "mamba_ngroups",
		nn.FieldState: "mamba_d_state", nn.FieldConvKernel: "mamba_d_conv", nn.FieldChunk: "chunk_size"})
	return m
}

// zamba2LayerTypes reads layers_block_type (or layer_types, its
// attribute_map name): true for "hybrid", false for "mamba" (transformers
// 5 reads it as "linear_attention"). Absent, Zamba2Config's default, its
// 54 layers of Zamba2-2.7B.
func (c *hfConfig) zamba2LayerTypes(layers int64) []bool {
	key := "layers_block_type"
	if !c.has(key) && c.has("layer_types") {
		key = "layer_types"
	}
	var list []any
	if c.has(key) {
		l, ok := c.raw[key].([]any)
		if !ok {
			c.fail(key, "must be a list of layer types, \"mamba\" or \"hybrid\" (got %s)", describeJSON(c.raw[key]))
			return nil
		}
		list = l
	} else {
		list = zamba2DefaultTypes()
	}
	if int64(len(list)) != layers {
		c.fail(key, "must list one layer type per layer (%d: \"mamba\" or \"hybrid\"; got %d)", layers, len(list))
		return nil
	}
	out := make([]bool, layers)
	for i, v := range list {
		switch v {
		case "mamba", "linear_attention":
		case "hybrid":
			out[i] = true
		default:
			c.fail(key, "entry %d must be \"mamba\" or \"hybrid\" (got %s)", i, describeJSON(v))
			return nil
		}
	}
	return out
}

// zamba2DefaultTypes is Zamba2Config.__post_init__'s layers_block_type
// when the config has none: ["mamba"] + (["mamba"] x 5 + ["hybrid"]) x 7
// + ["mamba"] x 4 + ["hybrid"] + ["mamba"] x 3 + ["hybrid"] + ["mamba"] x 2.
func zamba2DefaultTypes() []any {
	var l []any
	add := func(n int, t string) {
		for range n {
			l = append(l, t)
		}
	}
	add(1, "mamba")
	for range 7 {
		add(5, "mamba")
		add(1, "hybrid")
	}
	add(4, "mamba")
	add(1, "hybrid")
	add(3, "mamba")
	add(1, "hybrid")
	add(2, "mamba")
	return l
}
