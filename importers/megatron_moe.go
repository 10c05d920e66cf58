package importers

import (
	"fmt"
	"strconv"
	"strings"
)

// Megatron-LM's mixture-of-experts flags (megatron/training/arguments.py
// and megatron/core/transformer/transformer_config.py at d98e8a64dd; the
// MoE layer, router, dispatcher and experts in megatron/core/transformer/
// moe/), written as memsh's Megatron-Core experts: moe(impl="grouped"),
// TEGroupedMLP (--moe-grouped-gemm), or "sequential", SequentialMLP,
// under precision="megatron" (sim/nn/moe_megatron.go), the same lowering
// the Megatron-SWIFT reader writes through hf_config(experts="megatron"),
// with the expert layout as parallel() keywords.

// megatronExperts is what the MoE flags make: the MoE block, which layers
// run it (Megatron's moe_layer_freq pattern) and the layout's keywords.
type megatronExperts struct {
	block    string   // the moe(...) call
	pattern  []bool   // true: layer i is an MoE layer
	parallel []string // parallel() keywords
}

// megatronMoE reads --num-experts and the flags of the MoE layer; nil
// without experts (None or 0: arguments.py l.1648). act is the dense
// MLP's activation, which the experts share (TransformerConfig's
// gated_linear_unit and activation_func).
func megatronMoE(t *tree, layers, hidden, ffn, tp int64, act string, noBias bool) (*megatronExperts, error) {
	experts, err := t.integer("num-experts", 0, 0, 1<<20)
	if err != nil || experts == 0 {
		for _, k := range megatronMoEFlags {
			if _, ok := t.leaves[k]; ok && err == nil {
				return nil, t.errorf(k, "add --num-experts N, or drop it", "an MoE flag without --num-experts (Megatron builds no MoE layer)")
			}
		}
		return nil, err
	}
	if !noBias { // experts.py TEGroupedMLP: "bias in the expert layer is not supported"
		return nil, t.errorf("num-experts", "add --disable-bias-linear (TEGroupedMLP has no biases; memsh's Megatron experts have none)", "MoE layers with linear biases are not modelled")
	}
	// arguments.py l.1650: moe_ffn_hidden_size defaults to ffn_hidden_size
	moeFFN, err := t.integer("moe-ffn-hidden-size", ffn, 1, 1<<24)
	if err != nil {
		return nil, err
	}
	topk, err := t.integer("moe-router-topk", 2, 1, experts) // transformer_config.py l.760
	if err != nil {
		return nil, err
	}
	pattern, err := megatronMoEPattern(t, layers)
	if err != nil {
		return nil, err
	}
	// gpt_layer_specs.py get_moe_module_spec: TEGroupedMLP with
	// --moe-grouped-gemm under Transformer Engine, else SequentialMLP
	impl := "sequential"
	if grouped, err := t.boolean("moe-grouped-gemm", false); err != nil {
		return nil, err
	} else if grouped {
		impl = "grouped"
	}
	args := []string{num(hidden), num(moeFFN), num(experts), num(topk), kw("act", str(act)), kw("impl", str(impl))}
	router, err := megatronRouter(t, experts, topk)
	if err != nil {
		return nil, err
	}
	args = append(args, router...)
	if n, err := t.integer("moe-shared-expert-intermediate-size", 0, 1, 1<<24); err != nil {
		return nil, err
	} else if n > 0 { // SharedExpertMLP: one MLP of that size (shared_experts.py)
		args = append(args, kw("shared_experts", num(1)), kw("shared_hidden", num(n)))
		if gate, err := t.boolean("moe-shared-expert-gate", false); err != nil {
			return nil, err
		} else if gate {
			args = append(args, kw("shared_gate", "True"))
		}
	} else {
		for _, k := range []string{"moe-shared-expert-gate", "moe-shared-expert-overlap"} {
			if on, err := t.boolean(k, false); err != nil {
				return nil, err
			} else if on {
				return nil, t.errorf(k, "add --moe-shared-expert-intermediate-size N, or drop it", "no shared expert to gate or overlap")
			}
		}
	}
	capArgs, err := megatronCapacity(t)
	if err != nil {
		return nil, err
	}
	args = append(append(args, capArgs...), kw("router_name", str("router")), kw("name", str("mlp")))
	par, err := megatronExpertLayout(t, experts, tp)
	if err != nil {
		return nil, err
	}
	if err := megatronMoEKernels(t); err != nil {
		return nil, err
	}
	return &megatronExperts{block: call("moe", args...), pattern: pattern, parallel: par}, nil
}

// megatronMoEFlags are the MoE flags that need --num-experts.
var megatronMoEFlags = []string{"moe-ffn-hidden-size", "moe-router-topk", "moe-layer-freq", "expert-model-parallel-size",
	"moe-shared-expert-intermediate-size", "moe-grouped-gemm", "moe-token-dispatcher-type"}

// megatronMoEPattern is --moe-layer-freq (arguments.py moe_freq_type,
// l.327-348): an int N, an MoE layer every N (layer i when i % N == 0,
// gpt_layer_specs.py get_gpt_decoder_layer_specs l.647-650), or a Python
// list expression of 0 and 1 over digits, commas, brackets, + and *
// (_eval_pattern, l.245-253) as long as --num-layers (l.653).
func megatronMoEPattern(t *tree, layers int64) ([]bool, error) {
	v, _ := t.get("moe-layer-freq")
	var list []int64
	switch x := v.(type) {
	case nil:
		list = nil
	case int64:
		if x < 1 {
			return nil, t.errorf("moe-layer-freq", "an MoE layer every N layers (N >= 1), or a pattern: ([0]*1+[1]*15)", "%d is not a frequency", x)
		}
		for i := range layers {
			list = append(list, btoi(i%x == 0))
		}
	case string:
		if n, err := strconv.ParseInt(strings.TrimSpace(x), 10, 64); err == nil {
			t.leaves["moe-layer-freq"] = leaf{value: n, line: t.leaves["moe-layer-freq"].line}
			return megatronMoEPattern(t, layers)
		}
		p, err := evalLayerPattern(x, 1<<16) // num-layers is at most 1<<16 (megatronModel)
		if err != nil {
			return nil, t.errorf("moe-layer-freq", "Megatron evaluates a Python list of 0 (dense) and 1 (MoE) per layer: ([0]*1+[1]*15)", "%v", err)
		}
		list = p
	default:
		return nil, t.errorf("moe-layer-freq", "an int or a pattern: ([0]*1+[1]*15)", "want a frequency, got %s", describe(v))
	}
	if list == nil {
		list = make([]int64, layers)
		for i := range list {
			list[i] = 1
		}
	}
	if int64(len(list)) != layers {
		return nil, t.errorf("moe-layer-freq", "Megatron asserts the same: one 0 or 1 per --num-layers layer", "%d layers in the pattern, %d in the model", len(list), layers)
	}
	out := make([]bool, len(list))
	any := false
	for i, x := range list {
		if x != 0 && x != 1 {
			return nil, t.errorf("moe-layer-freq", "0 (dense) or 1 (MoE) per layer", "Megatron raises Invalid layer pattern: %d", x)
		}
		out[i] = x == 1
		any = any || out[i]
	}
	if !any {
		return nil, t.errorf("moe-layer-freq", "at least one 1 (an MoE layer), or drop --num-experts", "the pattern has no MoE layer")
	}
	return out, nil
}

func btoi(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// megatronRouter is the TopKRouter's keywords (router.py; moe_utils.py
// topk_routing_with_score_function l.766-945): with
// --moe-router-score-function softmax (the default) the softmax over the
// top-k logits ("topk_softmax"), or with --moe-router-pre-softmax over
// all experts then the top-k, not renormalised ("softmax", norm_topk
// False; --moe-router-num-groups and --moe-router-group-topk make its
// top-k group-limited, the masked_fill that keeps a bool mask); sigmoid
// scores renormalised over the top-k when k > 1, the expert bias
// (--moe-router-enable-expert-bias, a [experts] fp32 buffer) added for
// the selection alone ("sigmoid", score_bias). --moe-router-topk-scaling-
// factor multiplies the probs by a number (nothing saved);
// --moe-router-bias-update-rate is the bias's update between steps.
func megatronRouter(t *tree, experts, topk int64) ([]string, error) {
	fn, err := t.str("moe-router-score-function", "softmax")
	if err != nil {
		return nil, err
	}
	pre, err := t.boolean("moe-router-pre-softmax", false)
	if err != nil {
		return nil, err
	}
	bias, err := t.boolean("moe-router-enable-expert-bias", false)
	if err != nil {
		return nil, err
	}
	groups, err := t.integer("moe-router-num-groups", 0, 1, experts)
	if err != nil {
		return nil, err
	}
	groupTopk, err := t.integer("moe-router-group-topk", 0, 1, experts)
	if err != nil {
		return nil, err
	}
	if groupTopk > 0 && groups == 0 {
		return nil, t.errorf("moe-router-group-topk", "add --moe-router-num-groups N", "group-limited routing needs the groups")
	}
	if groupTopk > groups {
		return nil, t.errorf("moe-router-group-topk", fmt.Sprintf("at most the %d groups", groups), "%d of %d groups", groupTopk, groups)
	}
	var args []string
	switch fn {
	case "softmax":
		if bias { // TransformerConfig: the expert bias needs sigmoid scores in memsh's routers
			t.notModelled = append(t.notModelled, "moe-router-enable-expert-bias: the expert bias with softmax scores (memsh adds it to sigmoid routers; a [experts] fp32 buffer)")
		}
		if pre {
			args = append(args, kw("router", str("softmax")), kw("norm_topk", "False"))
			if groupTopk > 0 {
				args = append(args, kw("group_limited", "True"))
			}
		} else {
			args = append(args, kw("router", str("topk_softmax")))
			if groupTopk > 0 {
				t.notModelled = append(t.notModelled, "moe-router-group-topk: group-limited top-k of the logits (its masked_fill's bool mask per MoE layer)")
			}
		}
	case "sigmoid":
		// use_pre_softmax is read only by the softmax branch; the group
		// mask only picks indices (no gradient) when the bias selects
		args = append(args, kw("router", str("sigmoid")), kw("norm_topk", boolean(topk > 1)))
		if bias {
			args = append(args, kw("score_bias", "True"))
		} else if groupTopk > 0 {
			t.notModelled = append(t.notModelled, "moe-router-group-topk: group-limited top-k of the sigmoid scores (its masked_fill's bool mask per MoE layer)")
		}
	case "sqrtsoftplus":
		return nil, t.errorf("moe-router-score-function", "softmax or sigmoid; write DeepSeek-V4's router in Starlark (moe(router=\"sqrtsoftplus\"))", "the sqrtsoftplus score function is not read")
	default:
		return nil, t.errorf("moe-router-score-function", "softmax, sigmoid or sqrtsoftplus", "unknown score function %s", quoteKey(fn))
	}
	for _, k := range []string{"moe-router-topk-scaling-factor", "moe-router-bias-update-rate"} {
		t.get(k) // a number multiplied in, or the bias's update between steps: nothing kept
	}
	lb, _ := t.get("moe-router-load-balancing-type")
	for _, x := range asList(lb) {
		switch s := fmt.Sprint(x); s {
		case "aux_loss", "seq_aux_loss", "global_aux_loss", "sinkhorn", "none":
		case "quantile_balancing":
			t.notModelled = append(t.notModelled, "moe-router-load-balancing-type: quantile_balancing (its per-expert dual variables and selection)")
		default:
			return nil, t.errorf("moe-router-load-balancing-type", "aux_loss, seq_aux_loss, global_aux_loss, sinkhorn, quantile_balancing or none", "unknown type %s", quoteKey(s))
		}
	}
	return args, nil
}

func asList(v any) []any {
	switch x := v.(type) {
	case nil:
		return nil
	case []any:
		return x
	}
	return []any{v}
}

// megatronCapacity is --moe-expert-capacity-factor (None: dropless) with
// --moe-pad-expert-input-to-capacity: padded, every expert gets exactly
// its capacity, memsh's capacity=; unpadded, only the rows beyond it are
// dropped (moe_utils.py apply_router_token_dropping), which memsh's
// balanced routing never reaches at a factor of 1 or more.
func megatronCapacity(t *tree) ([]string, error) {
	v, _ := t.get("moe-expert-capacity-factor")
	pad, err := t.boolean("moe-pad-expert-input-to-capacity", false)
	if err != nil {
		return nil, err
	}
	t.get("moe-token-drop-policy") // which rows are dropped, not how many
	if v == nil {
		if pad { // TransformerConfig asserts it
			return nil, t.errorf("moe-pad-expert-input-to-capacity", "add --moe-expert-capacity-factor F, or drop it", "Megatron asserts: it needs a capacity factor")
		}
		return nil, nil
	}
	f, ok := toFloat(v)
	if !ok || f <= 0 {
		return nil, t.errorf("moe-expert-capacity-factor", "a positive factor: 1.0", "want a factor, got %s", describe(v))
	}
	switch {
	case pad && f >= 1:
		return []string{kw("capacity", formatFloat(f))}, nil
	case pad:
		return nil, t.errorf("moe-expert-capacity-factor", "1.0 or more (memsh pads every expert to its capacity and drops beyond it)", "a capacity factor of %s below 1 is not modelled", formatFloat(f))
	case f < 1:
		t.notModelled = append(t.notModelled, fmt.Sprintf("moe-expert-capacity-factor: %s drops rows beyond each expert's capacity (memsh routes every row, balanced)", formatFloat(f)))
	}
	return nil, nil
}
