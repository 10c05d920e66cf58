package models

import (
	"fmt"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/units"
	"go.starlark.net/starlark"
)

// llama4LayerBuiltins are Llama 4's layer kinds (hf_config builds the
// same sim layers from a llama4 config.json; sim/hf/llama4.go). Its MoE
// block is moe(impl="dense_bmm", router="topk_sigmoid").
func llama4LayerBuiltins() []host.Builtin {
	return []host.Builtin{
		{
			Name: "llama4_attention",
			Sig: "llama4_attention(dim, heads, kv_heads, head_dim=128, rope=True, chunk=None, qk_norm=True, temperature_tuning=True, " +
				"impl=\"sdpa\", bias=False, dropout=0.0, enable_gqa=None, name=None)",
			Doc: "Llama 4's self-attention (Llama4TextAttention), its keywords Llama4TextConfig's: q_proj, k_proj, v_proj " +
				"(bias=True: attention_bias, on o_proj too), then on a RoPE layer (rope=True) q and k rotated as complex " +
				"numbers (apply_rotary_emb: the fp32 copies transient) and, with qk_norm=True (use_qk_norm), L2-normed per " +
				"head without a weight (Llama4TextL2Norm, in fp32: it keeps the fp32 copy and the rsqrt); on a NoPE layer " +
				"(rope=False: no_rope_layers' 0, every fourth layer by default) no rotation and, with temperature_tuning=True " +
				"(attn_temperature_tuning), q scaled by an fp32 table of the positions (an fp32 copy of q, cast back). " +
				"qk_norm applies to RoPE layers only and temperature_tuning to NoPE layers only, as transformers does. " +
				"chunk=c is chunked local attention (attention_chunk_size; the chunked_attention layers, by default the RoPE " +
				"layers): each query sees the keys of its own chunk of c tokens; from a sequence of c tokens on, SDPA gets a " +
				"[batch, 1, seq, seq] mask (the memory-efficient kernel, k and v expanded to every head, the mask kept as an " +
				"additive bias in the compute dtype); None attends to every earlier key. The eager softmax stays in the " +
				"scores' dtype. impl is \"sdpa\", \"eager\" or \"flex\" (torch's FlexAttention, computing the chunks only); " +
				"transformers has no flash-attention 2 path for Llama 4. enable_gqa (None: True with impl=\"sdpa\") hands SDPA the " +
				"kv heads as they are when no mask is needed (transformers 4.54 and later); False expands them (repeat_kv, " +
				"as 4.51 to 4.53 do). Its module is named " +
				"self_attn unless name= says otherwise.",
			Fn: llama4AttentionFn,
		},
	}
}

// maxLlama4Size bounds each size of llama4_attention: the products of
// two (a projection's weight) stay far from int64 overflow.
const maxLlama4Size = 1 << 20

func llama4AttentionFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var dim, heads, kv, hd, chunk, dropout, enableGQA, name starlark.Value
	rope, qkNorm, temp, bias := true, true, true, false
	impl := "sdpa"
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "dim", &dim, "heads", &heads, "kv_heads", &kv, "head_dim?", &hd,
		"rope?", &rope, "chunk?", &chunk, "qk_norm?", &qkNorm, "temperature_tuning?", &temp, "impl?", &impl,
		"bias?", &bias, "dropout?", &dropout, "enable_gqa?", &enableGQA, "name?", &name); err != nil {
		return nil, err
	}
	switch impl {
	case "sdpa", "eager", "flex":
	case "flash":
		return nil, &units.Error{Path: "llama4_attention", Msg: "impl=\"flash\": transformers has no flash-attention 2 path for Llama 4 (Llama4PreTrainedModel._supports_flash_attn is False)",
			Hint: `use impl="sdpa" (transformers' default), "eager", or "flex" (torch's FlexAttention, as torchtitan runs Llama 4)`}
	default:
		return nil, &units.Error{Path: "llama4_attention", Msg: fmt.Sprintf("unknown impl %q", impl), Hint: `impl is "sdpa", "eager" or "flex"`}
	}
	gqa, err := optBool(enableGQA, "enable_gqa", impl == "sdpa")
	if err != nil {
		return nil, err
	}
	if gqa && impl != "sdpa" {
		return nil, &units.Error{Path: "llama4_attention", Msg: fmt.Sprintf("enable_gqa=True is scaled_dot_product_attention's argument, and impl is %q", impl),
			Hint: "leave enable_gqa out with impl=\"" + impl + "\" (its kernel gets the kv heads as the model makes them)"}
	}
	a := &nn.Attention{Name: "self_attn", Impl: impl, Causal: true, QKVBias: bias, OutBias: bias, EnableGQA: gqa,
		Rope: rope, RopeComplex: rope, QKL2Norm: qkNorm && rope, TempTuning: temp && !rope, HeadDim: 128}
	sizes := []intArg{{dim, "dim", &a.Dim}, {heads, "heads", &a.Heads}, {kv, "kv_heads", &a.KVHeads}}
	if hd != nil && hd != starlark.None {
		sizes = append(sizes, intArg{hd, "head_dim", &a.HeadDim})
	}
	if chunk != nil && chunk != starlark.None {
		sizes = append(sizes, intArg{chunk, "chunk", &a.Chunk})
	}
	if err := llama4Sizes(sizes...); err != nil {
		return nil, err
	}
	if a.Dropout, err = OptProb(dropout, "dropout"); err != nil {
		return nil, err
	}
	if name != nil && name != starlark.None {
		if a.Name, err = optName(name); err != nil {
			return nil, err
		}
	}
	return newLayer(thread, a)
}

// llama4Sizes converts llama4_attention's sizes, each positive and at most
// maxLlama4Size, naming the keyword that is not.
func llama4Sizes(sizes ...intArg) error {
	if err := ints(sizes...); err != nil {
		return err
	}
	for _, s := range sizes {
		switch n := *s.dst; {
		case n <= 0:
			hint := "sizes are counts of features, heads or tokens"
			if s.what == "chunk" {
				hint = "chunk is attention_chunk_size, tokens (8192 in Llama 4 Scout and Maverick); None attends to every key"
			}
			return &units.Error{Path: "llama4_attention", Msg: fmt.Sprintf("%s must be positive (got %d)", s.what, n), Hint: hint}
		case n > maxLlama4Size:
			return &units.Error{Path: "llama4_attention", Msg: fmt.Sprintf("%s=%d is larger than memsh simulates (at most %d)", s.what, n, maxLlama4Size),
				Hint: "Llama 4 Scout and Maverick have dim 5120, 40 heads, 8 kv heads of 128 and chunks of 8192"}
		}
	}
	return nil
}
