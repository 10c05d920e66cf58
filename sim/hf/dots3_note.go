package hf

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// buildDots3Note builds transformers' Dots3NoteForCausalLM (model_type
// dots3_note_text: rednote's dots3-note-prev, the text model of
// Dots3NoteForConditionalGeneration; models/dots3_note/modular_dots3_note.py
// at 5.25.0). It is DeepSeek-V3.2's decoder (Dots3NoteTextDecoderLayer:
// Llama's RMSNorm before each sublayer) whose attention is
// Dots3NoteTextAttention, DeepSeek-V3's latent attention with
// (nn.DotsMLA) its normed latents scaled, an RMSNorm on the shared rope
// key, the kv latent copied before its norm, a sigmoid gate a head
// (g_proj) before o_proj, and one of three kinds a layer (layer_types):
//
//   - "indexed_attention": DeepSeek Sparse Attention's indexer (GLM-5's,
//     GlmMoeDsaIndexer: index_n_heads, index_head_dim, index_topk) masks
//     the dense attention, whose rope tables are fp32 (the rotary
//     embedding is given inputs_embeds.float() for this type alone);
//   - "full_attention": the same without the indexer (use_dsa false);
//   - "sliding_attention": a window of sliding_window keys (SDPA: a mask)
//     and a geometry of its own: per_layer_config, or in the released
//     checkpoint's form the swa_ keys (swa_num_attention_heads 64,
//     swa_q_lora_rank 1024, swa_kv_lora_rank 1024, swa_head_dim 256,
//     swa_qk_nope_head_dim 192, swa_v_head_dim 128; swa_qk_rope_head_dim
//     the head less the nope part), with its own rope tables.
//
// Without layer_types the layers are indexed where i < 2 or i % 4 == 1,
// sliding elsewhere (use_sliding_window false: all indexed); use_dsa
// false turns indexed layers into full ones (and true full ones into
// indexed: a file without per_layer_config defaults it to true). The MLP
// is Dots3NoteTextMLP of intermediate_size where mlp_layer_types says
// "dense" (default: the first first_k_dense_replace layers, 1, and those
// moe_layer_freq skips), else DeepSeek-V3.2's MoE: a sigmoid router over
// n_routed_experts in n_group groups with the correction bias, 3-D
// experts of moe_intermediate_size, and one shared MLP of
// shared_experts_intermediate_size x n_shared_experts.
//
// transformers runs it with SDPA (no flash path); eager is refused as for
// every latent attention (noEager).
func buildDots3Note(c *hfConfig, attn string, head hfHead) *core.Model {
	hidden := c.size("hidden_size")
	layers := c.size("num_hidden_layers")
	vocab := c.size("vocab_size")
	tie := c.flag("tie_word_embeddings", false)
	act := c.mlpAct("hidden_act", "silu", true)
	c.object("rope_scaling")
	c.object("rope_parameters")
	c.prob("attention_dropout", 0)
	if c.err != nil {
		return nil
	}
	types := c.dotsLayerTypes(layers)
	sparse := c.dotsMLPTypes(layers)
	geo := c.dotsGeometry(layers, types)
	window := c.sizeOr("sliding_window", c.sizeOr("sliding_window_size", 512))
	ix := nn.DSAIndexer{Heads: c.sizeOr("index_n_heads", 64), HeadDim: c.sizeOr("index_head_dim", 128), TopK: c.sizeOr("index_topk", 2048)}
	if c.err != nil {
		return nil
	}
	// one attention per kind and geometry (equal ones make one block)
	type attnKey struct {
		kind string
		g    dotsGeo
	}
	attns := map[attnKey]*nn.MLA{}
	attnAt := make([]core.Layer, layers)
	estimate := 0.0
	for i := range attnAt {
		k := attnKey{types[i], geo[i]}
		at, ok := attns[k]
		if !ok {
			at = c.dotsAttention(hidden, attn, k.kind, k.g, window, ix)
			if c.err != nil {
				return nil
			}
			attns[k] = at
		}
		attnAt[i] = at
		estimate += float64(at.Params())
	}
	var dense, moe core.Layer
	if slices := countTrue(sparse); slices < int(layers) {
		inter := c.size("intermediate_size")
		dense = &nn.MLP{Name: "mlp", Dim: hidden, Hidden: inter, Act: act}
		estimate += float64(int(layers)-slices) * 3 * float64(hidden) * float64(inter)
	}
	if countTrue(sparse) > 0 {
		m := c.dotsMoE(hidden, act)
		if c.err != nil {
			return nil
		}
		moe = m
		estimate += float64(countTrue(sparse)) * float64(m.Params())
	}
	c.checkTotal(estimate + 2*float64(vocab)*float64(hidden))
	if c.err != nil {
		return nil
	}
	norm := func(name string) core.Layer { return &nn.Norm{Name: name, Dim: hidden, RMS: true} }
	type blockKey struct{ at, ff core.Layer }
	made := map[blockKey]core.Layer{}
	blocks := make([]core.Layer, layers)
	for i := range blocks {
		ff := dense
		if sparse[i] {
			ff = moe
		}
		k := blockKey{attnAt[i], ff}
		if made[k] == nil {
			made[k] = seq(res(norm("input_layernorm"), attnAt[i]), res(norm("post_attention_layernorm"), ff))
		}
		blocks[i] = made[k]
	}
	ls := []core.Layer{&nn.Embedding{Name: "embed_tokens", Rows: vocab, Dim: hidden}, stackBlocks("layers", blocks), norm("norm")}
	return c.finish(head, ls, vocab, tie)
}

// dotsGeo is one layer's latent attention geometry
// (Dots3NoteTextConfig.per_layer_config[layer]).
type dotsGeo struct{ heads, kv, qLora, kvLora, headDim, nope, rope, vDim int64 }

// dotsGeoKeys are per_layer_config's keys memsh reads, and the swa_
// keys (with their defaults) that make a sliding layer's when the file
// has no per_layer_config.
var dotsGeoKeys = []struct {
	key string
	swa int64
}{
	{"num_attention_heads", 64}, {"num_key_value_heads", 64}, {"q_lora_rank", 1024}, {"kv_lora_rank", 1024},
	{"head_dim", 256}, {"qk_nope_head_dim", 192}, {"v_head_dim", 128}, {"qk_rope_head_dim", 0},
}

// dotsGeometry reads each layer's geometry: the top level's, overridden by
// per_layer_config's object for the layer, or for the sliding layers of a
// file without one by the swa_ keys (Dots3NoteTextConfig.__post_init__).
func (c *hfConfig) dotsGeometry(layers int64, types []string) []dotsGeo {
	read := func(o *hfConfig, base dotsGeo) dotsGeo {
		g := base
		g.heads = o.sizeOr("num_attention_heads", g.heads)
		// Dots3NoteTextConfig's num_key_value_heads defaults to 128, not
		// to the heads: a file without it and other than 128 heads fails
		// validate_architecture
		if g.kv = o.sizeOr("num_key_value_heads", g.kv); o.err == nil && g.kv != g.heads {
			o.fail("num_key_value_heads", "must equal num_attention_heads (%d) for model_type dots3_note_text (got %d; Dots3NoteTextConfig's default is 128): validate_architecture refuses it", g.heads, g.kv)
		}
		if o.null("q_lora_rank") {
			o.fail("q_lora_rank", "must be a positive integer (got null): Dots 3 Note's queries need their latent (validate_architecture)")
		}
		g.qLora = o.sizeOr("q_lora_rank", g.qLora)
		g.kvLora = o.sizeOr("kv_lora_rank", g.kvLora)
		g.headDim = o.sizeOr("head_dim", g.headDim)
		g.nope = o.sizeOr("qk_nope_head_dim", g.nope)
		g.rope = o.sizeOr("qk_rope_head_dim", g.rope)
		g.vDim = o.sizeOr("v_head_dim", g.vDim)
		return g
	}
	top := read(c, dotsGeo{heads: c.size("num_attention_heads"), kv: 128, qLora: 1024, kvLora: 512, headDim: 256, nope: 128, rope: 64, vDim: 128})
	out := make([]dotsGeo, max(layers, 0))
	for i := range out {
		out[i] = top
	}
	if c.err != nil {
		return out
	}
	if !c.has("per_layer_config") {
		swa := dotsGeo{heads: c.sizeOr("swa_num_attention_heads", 64), kv: c.sizeOr("swa_num_key_value_heads", 64), qLora: c.sizeOr("swa_q_lora_rank", 1024),
			kvLora: c.sizeOr("swa_kv_lora_rank", 1024), headDim: c.sizeOr("swa_head_dim", 256),
			nope: c.sizeOr("swa_qk_nope_head_dim", 192), vDim: c.sizeOr("swa_v_head_dim", 128)}
		if c.err == nil && swa.kv != swa.heads {
			c.fail("swa_num_key_value_heads", "must equal swa_num_attention_heads (%d) for model_type dots3_note_text (got %d): Dots3NoteTextConfig.validate_architecture refuses it", swa.heads, swa.kv)
		}
		if c.has("swa_qk_rope_head_dim") {
			swa.rope = c.size("swa_qk_rope_head_dim")
		} else if swa.rope = swa.headDim - swa.nope; c.err == nil && swa.rope <= 0 {
			c.fail("swa_qk_nope_head_dim", "(%d) leaves no rope dims of swa_head_dim (%d): swa_qk_rope_head_dim is their difference", swa.nope, swa.headDim)
		}
		for i, t := range types {
			if t == "sliding_attention" {
				out[i] = swa
			}
		}
		return out
	}
	defer c.dotsHomogeneous(types, out)
	plc := c.sub("per_layer_config")
	idx := make([]string, 0, len(plc.raw))
	for k := range plc.raw {
		idx = append(idx, k)
	}
	sort.Strings(idx)
	for _, k := range idx {
		i, err := strconv.ParseInt(k, 10, 64)
		if err != nil || i < 0 || i >= layers {
			c.fail("per_layer_config", "must be keyed by layer indices in 0..%d (got %q)", layers-1, k)
			return out
		}
		o := plc.sub(k)
		for key := range o.raw {
			if !dotsGeoKey(key) {
				o.fail(key, "is not modelled as a per-layer setting for model_type dots3_note_text (memsh reads %s per layer)", dotsGeoNames())
			}
		}
		out[i] = read(o, top)
		if o.err != nil {
			c.err = o.err
			return out
		}
	}
	return out
}

// dotsHomogeneous refuses layers of one kind with different geometries:
// transformers reads each kind's by its name (per_layer_config[layer_type],
// in the rotary embedding and validate_architecture), which fails unless
// every layer of the kind has the same ("Layer type ... is not
// homogeneous across layers").
func (c *hfConfig) dotsHomogeneous(types []string, geo []dotsGeo) {
	first := map[string]int{}
	for i, t := range types {
		j, ok := first[t]
		if !ok {
			first[t] = i
			continue
		}
		if c.err == nil && geo[i] != geo[j] {
			c.fail("per_layer_config", "gives layer %d (%s) other sizes than layer %d: transformers needs every layer of a kind the same (Dots3NoteTextConfig.validate_architecture: \"Layer type %s is not homogeneous across layers\")", i, t, j, t)
		}
	}
}

func dotsGeoKey(k string) bool {
	for _, g := range dotsGeoKeys {
		if g.key == k {
			return true
		}
	}
	return false
}

func dotsGeoNames() string {
	s := ""
	for i, g := range dotsGeoKeys {
		if i > 0 {
			s += ", "
		}
		s += g.key
	}
	return s
}

// dotsAttention is one kind's latent attention at geometry g.
func (c *hfConfig) dotsAttention(hidden int64, attn, kind string, g dotsGeo, window int64, ix nn.DSAIndexer) *nn.MLA {
	at := &nn.MLA{Name: "self_attn", Dim: hidden, Heads: g.heads, QLoraRank: g.qLora, KVLora: g.kvLora,
		Nope: g.nope, RopeDim: g.rope, VDim: g.vDim, Bias: c.flag("attention_bias", false), Impl: attn, Causal: true,
		RopeTables: "rotary_emb." + kind, HeadGate: true,
		Dots: nn.DotsMLA{LatentScale: true, KRopeNorm: true, GateNative: true}}
	switch kind {
	case "indexed_attention":
		at.Indexer, at.Dots.RopeFP32 = &ix, true
	case "sliding_attention":
		if key := "swa_head_dim"; g.headDim != g.nope+g.rope {
			if c.has("per_layer_config") {
				key = "per_layer_config"
			}
			c.fail(key, "gives the sliding layers a head_dim of %d, not their qk_nope_head_dim + qk_rope_head_dim (%d + %d), as Dots3NoteTextConfig.validate_architecture requires", g.headDim, g.nope, g.rope)
			return at
		}
		at.Dots.Window = window
	}
	c.checkLayer(at, mlaKeys)
	return at
}

// dotsMoE is Dots3NoteTextMoE.
func (c *hfConfig) dotsMoE(hidden int64, act string) *nn.MoE {
	experts := c.size("n_routed_experts")
	shared := c.sizeOr("n_shared_experts", 1)
	if c.null("n_shared_experts") {
		c.fail("n_shared_experts", "must be at least 1 (got null): Dots 3 Note Preview requires a shared expert (validate_architecture)")
	}
	groups, topkGroups := c.sizeOr("n_group", 1), c.sizeOr("topk_group", 1)
	switch {
	case c.err != nil:
	case experts%groups != 0:
		c.fail("n_group", "(%d) must divide n_routed_experts (%d), as Dots3NoteTextConfig.validate_architecture requires", groups, experts)
	case experts/groups < 2:
		c.fail("n_group", "(%d) leaves fewer than two experts a group (grouped routing takes each group's top two)", groups)
	case topkGroups > groups:
		c.fail("topk_group", "(%d) must be in 1..n_group (%d)", topkGroups, groups)
	}
	m := c.routedMoE(hidden, c.size("moe_intermediate_size"), experts, shared, act)
	m.SharedHidden = c.sizeOr("shared_experts_intermediate_size", c.sizeOr("moe_shared_expert_intermediate_size", 1536))
	c.checkLayer(m, moeKeys("n_routed_experts", "num_experts_per_tok"))
	return m
}

// dotsLayerTypes reads layer_types as Dots3NoteTextConfig.__post_init__
// makes and rewrites them.
func (c *hfConfig) dotsLayerTypes(layers int64) []string {
	out := make([]string, max(layers, 0))
	useDSA := !c.has("per_layer_config") // __post_init__: None with per_layer_config, else True
	set := !c.has("per_layer_config")
	if c.has("use_dsa") {
		useDSA, set = c.flag("use_dsa", true), true
	}
	if c.has("layer_types") {
		list, ok := c.raw["layer_types"].([]any)
		if !ok || int64(len(list)) != layers {
			c.fail("layer_types", "must list one attention type per layer (%d)", layers)
			return out
		}
		for i, v := range list {
			s, _ := v.(string)
			switch s {
			case "full_attention", "sliding_attention", "indexed_attention":
			default:
				c.fail("layer_types", "%s", fmt.Sprintf("layer %d is %s: each must be \"full_attention\", \"sliding_attention\" or \"indexed_attention\"", i, describeJSON(v)))
				return out
			}
			out[i] = s
		}
	} else {
		full := "indexed_attention"
		if set && !useDSA {
			full = "full_attention"
		}
		sliding := c.flag("use_sliding_window", true)
		for i := range out {
			out[i] = "sliding_attention"
			if !sliding || i < 2 || i%4 == 1 {
				out[i] = full
			}
		}
	}
	if set {
		from, to := "full_attention", "indexed_attention"
		if !useDSA {
			from, to = to, from
		}
		for i := range out {
			if out[i] == from {
				out[i] = to
			}
		}
	}
	return out
}

// dotsMLPTypes lists the MoE layers: mlp_layer_types, else those from
// first_k_dense_replace (default 1) on that moe_layer_freq keeps (an
// integer: every freq-th; a list: its true entries).
func (c *hfConfig) dotsMLPTypes(layers int64) []bool {
	if c.has("mlp_layer_types") {
		return c.sparseLayers(layers, 0)
	}
	out := make([]bool, max(layers, 0))
	first := c.intOr("first_k_dense_replace", 1)
	freqList, isList := c.raw["moe_layer_freq"].([]any)
	freq := int64(1)
	if !isList {
		freq = c.sizeOr("moe_layer_freq", 1)
	} else if int64(len(freqList)) < layers {
		c.fail("moe_layer_freq", "must be an integer or a list of one entry per layer (%d)", layers)
		return out
	}
	for i := range out {
		keep := int64(i)%freq == 0
		if isList {
			keep = jsonTruthy(freqList[i])
		}
		out[i] = int64(i) >= first && keep
	}
	return out
}

// jsonTruthy is Python's bool() of a JSON value (moe_layer_freq's entries).
func jsonTruthy(v any) bool {
	switch x := v.(type) {
	case bool:
		return x
	case nil:
		return false
	case string:
		return x != ""
	case json.Number:
		f, err := x.Float64()
		return err != nil || f != 0
	default:
		return true
	}
}

func countTrue(b []bool) int {
	n := 0
	for _, v := range b {
		if v {
			n++
		}
	}
	return n
}
