package models

import (
	"fmt"
	"strings"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/sim/nn"
	"go.starlark.net/starlark"
)

// The feed-forward blocks: mlp() (plain, gated, Granite's fused GLU, its
// projections named as the model's tree names them) and moe().

func mlpFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var dim, hidden, dropout, outModule, name starlark.Value
	var projNamesArg host.NoneOr[starlark.Indexable]
	var bias, fused bool
	act := "gelu"
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "dim", &dim, "hidden", &hidden,
		"act?", &act, "bias?", &bias, "dropout?", &dropout, "fused?", &fused, "proj_names?", &projNamesArg, "out_module?", &outModule, "name?", &name); err != nil {
		return nil, err
	}
	projNames := projNamesArg.V
	if fused {
		if projNames != nil {
			return nil, fmt.Errorf("mlp: fused=True names its projections input_linear and output_linear (Granite's GLU): drop proj_names")
		}
		return fusedGLU(thread, dim, hidden, act, bias, dropout, name)
	}
	m := &nn.MLP{Act: act, Bias: bias}
	if err := setProjNames(m, projNames); err != nil {
		return nil, err
	}
	if err := ints(intArg{dim, "dim", &m.Dim}, intArg{hidden, "hidden", &m.Hidden}); err != nil {
		return nil, err
	}
	var err error
	if m.Dropout, err = OptProb(dropout, "dropout"); err != nil {
		return nil, err
	}
	if m.OutModule, err = optName(outModule); err != nil {
		return nil, fmt.Errorf("mlp: out_module: %v", err)
	}
	if m.Name, err = optName(name); err != nil {
		return nil, err
	}
	return newLayer(thread, m)
}

// setProjNames reads mlp(proj_names=): (in, out) for an ungated MLP,
// (gate, up, down) for a gated one, or (gate_up, down) for a gated one
// whose gate and up are one projection (nn.MLP.FusedName: Phi-3's
// gate_up_proj); None keeps nn.MLP's defaults.
func setProjNames(m *nn.MLP, names starlark.Indexable) error {
	if names == nil {
		return nil
	}
	if _, ok := names.(starlark.String); ok {
		return fmt.Errorf("mlp: proj_names is a list of names, not one string (got %s)", names)
	}
	want, kind := 2, "an ungated"
	gated := m.Act == "swiglu" || m.Act == "geglu"
	if gated {
		want, kind = 3, "a gated ("+m.Act+")"
		if names.Len() == 2 {
			want = 2 // (gate_up, down)
		}
	}
	if names.Len() != want {
		return fmt.Errorf("mlp: proj_names of %s MLP are %d names (got %d): (in, out) ungated, (gate, up, down) or (gate_up, down) gated", kind, want, names.Len())
	}
	got := make([]string, want)
	for i := range got {
		s, ok := starlark.AsString(names.Index(i))
		if !ok || s == "" || strings.ContainsAny(s, ".*") {
			return fmt.Errorf("mlp: proj_names[%d] must be a module name without dots or stars (got %s)", i, names.Index(i))
		}
		got[i] = s
	}
	switch {
	case want == 2 && gated:
		m.FusedName, m.OutName = got[0], got[1]
	case want == 2:
		m.InName, m.OutName = got[0], got[1]
	default:
		m.GateName, m.InName, m.OutName = got[0], got[1], got[2]
	}
	return nil
}

// fusedGLU is mlp(..., fused=True): nn.FusedGLU, which has no bias or dropout.
func fusedGLU(thread *starlark.Thread, dim, hidden starlark.Value, act string, bias bool, dropout, name starlark.Value) (starlark.Value, error) {
	if act != "swiglu" && act != "geglu" {
		return nil, fmt.Errorf("mlp: fused=True is a gated MLP: act must be \"swiglu\" or \"geglu\" (got %q)", act)
	}
	p, err := OptProb(dropout, "dropout")
	if err != nil {
		return nil, err
	}
	if bias || p != 0 {
		return nil, fmt.Errorf("mlp: fused=True has no bias or dropout (Granite's GLU)")
	}
	m := &nn.FusedGLU{Act: act}
	if err := ints(intArg{dim, "dim", &m.Dim}, intArg{hidden, "hidden", &m.Hidden}); err != nil {
		return nil, err
	}
	if m.Name, err = optName(name); err != nil {
		return nil, err
	}
	return newLayer(thread, m)
}

func moeFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var dim, hidden, experts, topK, shared, sharedHidden, capacity, normTopK, routerName, scoreBiasV, name starlark.Value
	act, impl, router := "swiglu", nn.MoELoop, nn.RouterSoftmax
	var routerBias, expertBias, sharedGate, groupLimited, logitsFP32, clampedGLU bool
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "dim", &dim, "hidden", &hidden,
		"experts", &experts, "top_k", &topK, "act?", &act, "shared_experts?", &shared,
		"shared_hidden?", &sharedHidden, "capacity?", &capacity, "impl?", &impl, "router?", &router,
		"norm_topk?", &normTopK, "router_bias?", &routerBias, "expert_bias?", &expertBias,
		"score_bias?", &scoreBiasV, "shared_gate?", &sharedGate, "group_limited?", &groupLimited, "router_name?", &routerName, "router_logits_fp32?", &logitsFP32, "clamped_glu?", &clampedGLU, "name?", &name); err != nil {
		return nil, err
	}
	m := &nn.MoE{Act: act, Impl: impl, Router: router, RouterBias: routerBias, ExpertBias: expertBias, SharedGate: sharedGate,
		GroupLimited: groupLimited, TopKLogitsFP32: logitsFP32, ClampedGLU: clampedGLU}
	if clampedGLU && (act != "swiglu" || impl == nn.MoEDenseBMM) {
		return nil, fmt.Errorf("moe: clamped_glu is gpt-oss's gate over the gated halves of each expert (act=\"swiglu\", not impl=\"dense_bmm\"; got act=%q, impl=%q)", act, impl)
	}
	switch v := scoreBiasV.(type) {
	case nil, starlark.NoneType:
	case starlark.Bool:
		m.ScoreBias = bool(v)
	case starlark.String:
		m.ScoreBias, m.ScoreBiasParam = v == "parameter", v == "parameter"
	}
	if scoreBiasV != nil && scoreBiasV != starlark.None && !m.ScoreBias && scoreBiasV != starlark.False {
		return nil, fmt.Errorf("moe: score_bias must be True, False or \"parameter\" (got %s)", scoreBiasV.String())
	}
	if m.ScoreBiasParam && router != nn.RouterSigmoid {
		return nil, fmt.Errorf("moe: score_bias=\"parameter\" is the sigmoid router's selection bias (router=\"sigmoid\"; got router=%q)", router)
	}
	if logitsFP32 && router != nn.RouterTopKSoftmax {
		return nil, fmt.Errorf("moe: router_logits_fp32 is Granite's top-k softmax router's (router=\"topk_softmax\"; got router=%q)", router)
	}
	if groupLimited && router != nn.RouterSoftmax {
		return nil, fmt.Errorf("moe: group_limited is DeepSeek-V2's softmax router's (router=\"softmax\"; got router=%q)", router)
	}
	if err := ints(intArg{dim, "dim", &m.Dim}, intArg{hidden, "hidden", &m.Hidden}, intArg{experts, "experts", &m.Experts}, intArg{topK, "top_k", &m.TopK}); err != nil {
		return nil, err
	}
	var err error
	if m.SharedExperts, err = OptInt(shared, "shared_experts", 0); err != nil {
		return nil, err
	}
	if m.SharedExperts < 0 {
		return nil, fmt.Errorf("shared_experts must not be negative (got %d)", m.SharedExperts)
	}
	if sharedGate && m.SharedExperts != 1 {
		return nil, fmt.Errorf("moe: shared_gate=True gates Qwen2-MoE's one shared expert (shared_experts=1; got %d)", m.SharedExperts)
	}
	if m.SharedHidden, err = OptInt(sharedHidden, "shared_hidden", 0); err != nil {
		return nil, err
	}
	if sharedHidden != nil && sharedHidden != starlark.None && m.SharedHidden <= 0 {
		return nil, fmt.Errorf("shared_hidden must be positive (got %d)", m.SharedHidden)
	}
	if capacity != nil && capacity != starlark.None {
		if m.Capacity, err = host.AsFloat(capacity, "capacity"); err != nil {
			return nil, err
		}
		if !(m.Capacity >= 1) {
			return nil, fmt.Errorf("moe: capacity must be at least 1.0 (got %g)", m.Capacity)
		}
	}
	if m.NormTopK, err = optBool(normTopK, "norm_topk", true); err != nil {
		return nil, err
	}
	if m.RouterName, err = optName(routerName); err != nil {
		return nil, fmt.Errorf("moe: router_name must be a module name or None (got %s)", routerName)
	}
	if m.Name, err = optName(name); err != nil {
		return nil, err
	}
	return newNamedLayer(thread, m, moeKeywords)
}
