package models

import (
	"fmt"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/sim/nn"
	"go.starlark.net/starlark"
)

// gemma4LayerBuiltins are Gemma 4's layer kinds (hf_config builds the
// same sim layers from a gemma4 config.json; sim/hf/gemma4.go).
func gemma4LayerBuiltins() []host.Builtin {
	return []host.Builtin{
		{
			Name: "gemma4_norm",
			Sig:  "gemma4_norm(dim, scale=True, name=None)",
			Doc: "Gemma 4's RMSNorm (Gemma4RMSNorm): the input cast to fp32, x * (mean(x²) + eps)^-0.5 times the weight " +
				"cast to fp32, then cast back. It keeps the fp32 input, the fp32 normalised rows and an fp32 copy of the " +
				"weight (about 8 bytes an element where rmsnorm() keeps 6). scale=False has no weight (v_norm, the router's norm).",
			Fn: gemma4NormFn,
		},
		{
			Name: "gemma4_attention",
			Sig:  "gemma4_attention(dim, heads, kv_heads, head_dim, impl=\"sdpa\", window=None, k_eq_v=False, rope_tables=None, eager_mask=False, name=None)",
			Doc: "Gemma 4's self-attention (Gemma4TextAttention): q_proj, k_proj and v_proj, q and k normed per head with " +
				"gemma4_norm and v without a weight, rotary embeddings, unscaled scores, o_proj. window=w attends to the last " +
				"w keys (the sliding layers); k_eq_v=True has no v_proj and uses the keys as the values (the full layers of " +
				"the 26B A4B and 31B). rope_tables=\"rotary_emb\" names the rotary module whose cos and sin ([1, seq, head_dim] " +
				"each) transformers makes once a forward for each layer type and every layer's rope saves (one pair for the layers " +
				"of one head_dim); None counts none. eager_mask=True: impl=\"eager\" adds the float mask transformers makes once a forward " +
				"for each layer type, [batch, 1, seq, seq] (as attention(eager_mask=True)). impl is \"sdpa\", \"eager\" or \"flash\" (flash-attn 2: heads of at most 256). " +
				"Its module is named self_attn unless name= says otherwise.",
			Fn: gemma4AttentionFn,
		},
		{
			Name: "gemma4_moe",
			Sig:  "gemma4_moe(dim, hidden, experts, top_k, act=\"geglu\", impl=\"grouped_mm\")",
			Doc: "The expert half of a Gemma 4 MoE layer (the 26B A4B), beside the dense MLP in parallel(): the router " +
				"(router.norm without weight, router.scale, router.proj, a softmax in fp32, top_k renormalised in place, " +
				"times router.per_expert_scale) reads the residual stream, the experts (3-D gate_up_proj and down_proj, " +
				"transformers 5's grouped_mm or impl=\"fused_loop\", the loop over them) read pre_feedforward_layernorm_2 " +
				"of it, and post_feedforward_layernorm_2 norms their sum. Its modules sit in the decoder layer.",
			Fn: gemma4MoEFn,
		},
	}
}

// maxGemma4Size bounds each size of Gemma 4's layers: the products of
// two or three (a 3-D expert weight) stay far from int64 overflow.
const maxGemma4Size = 1 << 20

func gemma4Sizes(fn string, sizes ...intArg) error {
	if err := ints(sizes...); err != nil {
		return err
	}
	for _, s := range sizes {
		if *s.dst > maxGemma4Size {
			return fmt.Errorf("%s: %s=%d is larger than memsh simulates (at most %d)", fn, s.what, *s.dst, maxGemma4Size)
		}
	}
	return nil
}

func gemma4NormFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var dim, name starlark.Value
	scale := true
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "dim", &dim, "scale?", &scale, "name?", &name); err != nil {
		return nil, err
	}
	n := &nn.Gemma4Norm{NoScale: !scale}
	if err := gemma4Sizes(b.Name(), intArg{dim, "dim", &n.Dim}); err != nil {
		return nil, err
	}
	var err error
	if n.Name, err = optName(name); err != nil {
		return nil, err
	}
	return newLayer(thread, n)
}

func gemma4AttentionFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var dim, heads, kv, hd, window, tables, name starlark.Value
	impl, kEqV, eagerMask := "sdpa", false, false
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "dim", &dim, "heads", &heads, "kv_heads", &kv, "head_dim", &hd,
		"impl?", &impl, "window?", &window, "k_eq_v?", &kEqV, "rope_tables?", &tables, "eager_mask?", &eagerMask, "name?", &name); err != nil {
		return nil, err
	}
	a := &nn.Gemma4Attention{Impl: impl, KEqV: kEqV, EnableGQA: true, EagerMask: eagerMask}
	if err := gemma4Sizes(b.Name(), intArg{dim, "dim", &a.Dim}, intArg{heads, "heads", &a.Heads}, intArg{kv, "kv_heads", &a.KVHeads},
		intArg{hd, "head_dim", &a.HD}); err != nil {
		return nil, err
	}
	if window != nil && window != starlark.None {
		if err := gemma4Sizes(b.Name(), intArg{window, "window", &a.Window}); err != nil {
			return nil, err
		}
	}
	var err error
	if a.RopeTables, err = ropeTablesArg("gemma4_attention", tables, true); err != nil {
		return nil, err
	}
	if a.Name, err = optName(name); err != nil {
		return nil, err
	}
	return newNamedLayer(thread, a, gemma4AttentionKeywords)
}

func gemma4MoEFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var dim, hidden, experts, topK starlark.Value
	act, impl := "geglu", nn.MoEGroupedMM
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "dim", &dim, "hidden", &hidden, "experts", &experts, "top_k", &topK,
		"act?", &act, "impl?", &impl); err != nil {
		return nil, err
	}
	g := &nn.Gemma4MoE{Act: act, Impl: impl}
	if err := gemma4Sizes(b.Name(), intArg{dim, "dim", &g.Dim}, intArg{hidden, "hidden", &g.Hidden}, intArg{experts, "experts", &g.Experts},
		intArg{topK, "top_k", &g.TopK}); err != nil {
		return nil, err
	}
	if g.Experts > 1<<14 {
		return nil, fmt.Errorf("%s: experts=%d is more than memsh simulates (at most %d)", b.Name(), g.Experts, 1<<14)
	}
	return newNamedLayer(thread, g, moeKeywords)
}
