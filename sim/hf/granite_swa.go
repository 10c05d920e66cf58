package hf

import (
	"encoding/json"
	"sort"
	"strconv"
)

// GraniteSWA (model_type granite_swa: IBM's granite-swash-2b;
// models/granite_swa/modular_granite_swa.py at transformers 5.25.0) is
// Granite (granite.go: the muP multipliers, attention_bias on q, k, v and
// o, mlp_bias) with three changes to the attention, all in
// GraniteSWAAttention and GraniteSWAModel:
//
//   - sliding-window layers: layer_types, whose default
//     (GraniteSWAConfig.__post_init__) makes every fourth layer
//     (i % 4 == 0) full_attention and the others sliding_attention over
//     sliding_window keys (default 128); the model makes one mask a layer
//     type a forward (create_causal_mask, create_sliding_window_causal_mask);
//   - a learned sink per head (sinks, [num_attention_heads]) that the
//     fused kernels take as s_aux and eager attention applies after the
//     softmax as sigmoid(logsumexp(scores) - sink) (nn.Attention.SinkScale);
//   - a rope base per layer (layer_rope_theta, default rope_theta in every
//     layer): one GraniteSWARotaryEmbedding a distinct non-zero base, in
//     rotary_embs sorted by base, each making its cos and sin once a
//     forward; a layer whose base is 0 has no rope (NoPE). The parent's
//     rotary_emb is built but unused (buffers only: no parameters).
//
// GraniteMoeSWA (model_type granitemoe_swa: granite-swash-3b-a600m;
// models/granitemoe_swa/modular_granitemoe_swa.py at 5.25.0) is
// GraniteMoeShared's layer (granite.go's graniteMoEShared: the routed
// experts and the shared_mlp) with the same GraniteSWAAttention, masks and
// rotary_embs; its config class is GraniteMoeSharedConfig's (the head
// untied by default) with the three keys above.
//
// GraniteSWAPreTrainedModel (and GraniteMoeSWAPreTrainedModel) sets _supports_sdpa False: transformers'
// default load runs eager (an explicit "sdpa" is refused), which memsh's
// attn="sdpa" follows (hfFamily.noSDPA); flash_attention_2 is
// replaced by the first of _compatible_flash_implementations
// (kernels-community/vllm-flash-attn3), a kernel that takes the sinks,
// which memsh lowers as a flash kernel reading one logit per head.

// graniteSWARope reads layer_rope_theta: which layers have no rope (a base
// of 0) and, for the others, the index in rotary_embs of their base (the
// distinct non-zero bases sorted). Without it every layer has rope_theta's
// base, rotary_embs.0.
func (c *hfConfig) graniteSWARope(layers int64) (nope []bool, rope []int) {
	nope, rope = make([]bool, max(layers, 0)), make([]int, max(layers, 0))
	if !c.has("layer_rope_theta") {
		return nope, rope
	}
	list, ok := c.raw["layer_rope_theta"].([]any)
	if !ok || int64(len(list)) != layers {
		c.fail("layer_rope_theta", "must list one rope base per layer (%d), 0 for a layer without rope (got %s)", layers, describeJSON(c.raw["layer_rope_theta"]))
		return nope, rope
	}
	thetas := make([]float64, len(list))
	distinct := map[float64]bool{}
	for i, v := range list {
		n, isNum := v.(json.Number)
		f, err := n.Float64()
		if !isNum || err != nil || f < 0 {
			c.fail("layer_rope_theta", "must list non-negative rope bases, 0 for a layer without rope (got %s at %d)", describeJSON(v), i)
			return make([]bool, len(nope)), make([]int, len(rope))
		}
		thetas[i] = f
		if f != 0 {
			distinct[f] = true
		}
	}
	sorted := make([]float64, 0, len(distinct))
	for f := range distinct {
		sorted = append(sorted, f)
	}
	sort.Float64s(sorted)
	for i, f := range thetas {
		nope[i] = f == 0
		if !nope[i] {
			rope[i] = sort.SearchFloat64s(sorted, f)
		}
	}
	return nope, rope
}

// graniteSWARotary names rotary_embs' i-th rotary embedding.
func graniteSWARotary(i int) string { return "rotary_embs." + strconv.Itoa(i) }
