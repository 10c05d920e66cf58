package models

import (
	"fmt"
	"strings"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/units"
	"go.starlark.net/starlark"
)

// attentionFn is attention() (its doc is LayerBuiltins'); qkNormArg and
// ropeTablesArg read the qk_norm= and rope_tables= options the other
// attention builtins share.
func attentionFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var dim, heads, kvHeads, headDim, dropout, fused, smFP32, softcap, window, tables, ropeDim, qkNormV, gateV, selfName, name starlark.Value
	var projNamesArg host.NoneOr[starlark.Indexable]
	var qkvBias, outBias, rope, sinks, gqa, mrope, ropeCat, tablesFP32, eagerMask bool
	impl, causal := "flash", true
	if err := starlark.UnpackArgs(b.Name(), args, kwargs,
		"dim", &dim, "heads", &heads, "kv_heads?", &kvHeads, "head_dim?", &headDim,
		"qkv_bias?", &qkvBias, "out_bias?", &outBias, "impl?", &impl, "causal?", &causal,
		"dropout?", &dropout, "rope?", &rope, "fused_qkv?", &fused, "softmax_fp32?", &smFP32,
		"qk_norm?", &qkNormV, "softcap?", &softcap, "window?", &window, "sinks?", &sinks, "enable_gqa?", &gqa, "output_gate?", &gateV, "rope_tables?", &tables, "rope_dim?", &ropeDim, "mrope?", &mrope, "rope_cat?", &ropeCat, "rope_tables_fp32?", &tablesFP32, "eager_mask?", &eagerMask, "proj_names?", &projNamesArg, "self_name?", &selfName, "name?", &name); err != nil {
		return nil, err
	}
	projNames := projNamesArg.V
	qk, err := qkNormArg(qkNormV)
	if err != nil {
		return nil, err
	}
	gate, gateProj, err := outputGateArg(gateV)
	if err != nil {
		return nil, err
	}
	a := &nn.Attention{QKNormGemma: qk.gemma, QKNormOlmo2: qk.olmo2, QKNormWide: qk.wide, QKNormWideLlama: qk.wideLlama, QKVBias: qkvBias, OutBias: outBias, Impl: impl, Causal: causal, Rope: rope, QKNorm: qk.perHead, Sinks: sinks, EnableGQA: gqa,
		OutputGate: gate, GateProj: gateProj, RopeCat: ropeCat, EagerMask: eagerMask}
	if ropeCat && !rope {
		return nil, fmt.Errorf("attention: rope_cat=True needs rope=True (the cat ends the rotary embedding)")
	}
	if gqa && impl != "sdpa" {
		return nil, fmt.Errorf("attention: enable_gqa=True is scaled_dot_product_attention's argument, and impl is %q (use impl=\"sdpa\", or leave enable_gqa out)", impl)
	}
	if err := ints(intArg{dim, "dim", &a.Dim}, intArg{heads, "heads", &a.Heads}); err != nil {
		return nil, err
	}
	if a.KVHeads, err = OptInt(kvHeads, "kv_heads", 0); err != nil {
		return nil, err
	}
	if kvHeads != nil && kvHeads != starlark.None && a.KVHeads <= 0 {
		return nil, fmt.Errorf("kv_heads must be positive (got %d)", a.KVHeads)
	}
	if a.HeadDim, err = OptInt(headDim, "head_dim", 0); err != nil {
		return nil, err
	}
	if headDim != nil && headDim != starlark.None && a.HeadDim <= 0 {
		return nil, fmt.Errorf("attention: head_dim must be positive (got %d)", a.HeadDim)
	}
	if a.Dropout, err = OptProb(dropout, "dropout"); err != nil {
		return nil, err
	}
	mha := a.KVHeads == 0 || a.KVHeads == a.Heads
	if a.FusedQKV, err = optBool(fused, "fused_qkv", !rope && !qk.perHead && !qk.wide && !gateProj && mha); err != nil {
		return nil, err
	}
	if a.SoftmaxFP32, err = optBool(smFP32, "softmax_fp32", rope); err != nil {
		return nil, err
	}
	if softcap != nil && softcap != starlark.None {
		if a.Softcap, err = host.AsFloat(softcap, "softcap"); err != nil {
			return nil, err
		}
		if !(a.Softcap > 0) {
			return nil, fmt.Errorf("attention: softcap must be positive (got %g; None for no cap)", a.Softcap)
		}
	}
	if a.Window, err = OptInt(window, "window", 0); err != nil {
		return nil, err
	}
	if window != nil && window != starlark.None && a.Window <= 0 {
		return nil, fmt.Errorf("attention: window must be positive (got %d; None for none)", a.Window)
	}
	if a.RopeTables, err = ropeTablesArg("attention", tables, rope); err != nil {
		return nil, err
	}
	if a.RopeTablesDim, err = OptInt(ropeDim, "rope_dim", 0); err != nil {
		return nil, err
	}
	if (ropeDim != nil && ropeDim != starlark.None || mrope) && a.RopeTables == "" {
		return nil, fmt.Errorf("attention: rope_dim and mrope shape the rotary tables, which need rope_tables=\"rotary_emb\"")
	}
	if ropeDim != nil && ropeDim != starlark.None && (a.RopeTablesDim <= 0 || a.RopeTablesDim > a.Hd() || a.RopeTablesDim%2 != 0) {
		return nil, fmt.Errorf("attention: rope_dim must be an even number of dimensions up to head_dim %d (got %d)", a.Hd(), a.RopeTablesDim)
	}
	a.RopeTablesBatch = mrope
	if tablesFP32 {
		if a.RopeTables == "" {
			return nil, fmt.Errorf("attention: rope_tables_fp32 is the dtype of the rotary tables, which need rope_tables=\"rotary_emb\"")
		}
		a.RopeTablesDType = units.FP32
	}
	if err := setAttentionNames(a, projNames); err != nil {
		return nil, err
	}
	if a.SelfName, err = optName(selfName); err != nil {
		return nil, fmt.Errorf("attention: self_name: %v", err)
	}
	if a.Name, err = optName(name); err != nil {
		return nil, err
	}
	return newLayer(thread, a)
}

// setAttentionNames reads attention(proj_names=): (q, k, v, out) for
// separate projections, (qkv, out) for a fused one; None keeps
// nn.Attention's defaults. A name may hold dots, a path below the
// attention (BERT's output projection, "output.dense").
func setAttentionNames(a *nn.Attention, names starlark.Indexable) error {
	if names == nil {
		return nil
	}
	if _, ok := names.(starlark.String); ok {
		return fmt.Errorf("attention: proj_names is a list of names, not one string (got %s)", names)
	}
	want := 4
	if a.FusedQKV {
		want = 2
	}
	if a.OutputGate {
		return fmt.Errorf("attention: proj_names is not modelled with output_gate (its q_proj also yields the gate)")
	}
	if names.Len() != want {
		return fmt.Errorf("attention: proj_names are %d names (got %d): (q, k, v, out) for separate projections, (qkv, out) with fused_qkv", want, names.Len())
	}
	got := make([]string, want)
	for i := range got {
		s, ok := starlark.AsString(names.Index(i))
		if !ok || s == "" || strings.Contains(s, "*") || strings.Contains(s, "..") || strings.HasPrefix(s, ".") || strings.HasSuffix(s, ".") {
			return fmt.Errorf("attention: proj_names[%d] must be a module name or a dotted path below the attention (got %s)", i, names.Index(i))
		}
		got[i] = s
	}
	if a.FusedQKV {
		a.QKVName, a.OutName = got[0], got[1]
	} else {
		a.QKVNames, a.OutName = [3]string{got[0], got[1], got[2]}, got[3]
	}
	return nil
}

// qkNorm is attention()'s qk_norm: which norms of q and k the layer has.
type qkNorm struct {
	perHead   bool // an RMS norm over each head (Qwen3's)
	gemma     bool // perHead's norms are gemma_norm's (Gemma 3's, Qwen3-Next's)
	olmo2     bool // perHead's norms are olmo2_norm's (AFMoE's)
	wide      bool // one norm over all the heads, OLMo 2's olmo2_norm
	wideLlama bool // wide's norms are Llama's RMSNorm (OLMoE's)
}

// qkNormArg unpacks attention()'s qk_norm: False (or None), True (Llama's
// RMSNorm over each head), "gemma" (gemma_norm's: Gemma 3's, Qwen3-Next's),
// "olmo2" (one norm over all the heads: OLMo 2's, wide) or "olmoe" (one
// Llama RMSNorm over all the heads: OLMoE's).
func qkNormArg(v starlark.Value) (qkNorm, error) {
	switch v := v.(type) {
	case nil, starlark.NoneType:
		return qkNorm{}, nil
	case starlark.Bool:
		return qkNorm{perHead: bool(v)}, nil
	case starlark.String:
		switch v {
		case "gemma":
			return qkNorm{perHead: true, gemma: true}, nil
		case "olmo2_head":
			return qkNorm{perHead: true, olmo2: true}, nil
		case "olmo2":
			return qkNorm{wide: true}, nil
		case "olmoe":
			return qkNorm{wide: true, wideLlama: true}, nil
		}
	}
	return qkNorm{}, fmt.Errorf("attention: qk_norm must be True, False, \"gemma\", \"olmo2_head\", \"olmo2\" or \"olmoe\" (got %s)", v.String())
}

// outputGateArg unpacks attention()'s output_gate: False (or None), True
// (q_proj's second half, Qwen3-Next's) or "gate_proj" (a projection of its
// own, AFMoE's).
func outputGateArg(v starlark.Value) (halfQ, proj bool, err error) {
	switch v := v.(type) {
	case nil, starlark.NoneType:
		return false, false, nil
	case starlark.Bool:
		return bool(v), false, nil
	case starlark.String:
		if v == "gate_proj" {
			return false, true, nil
		}
	}
	return false, false, fmt.Errorf("attention: output_gate must be True, False or \"gate_proj\" (got %s)", v.String())
}

// ropeTablesArg unpacks rope_tables of fn (attention, gemma4_attention,
// mla): None, or the name of the rotary module whose cos and sin the
// layer's rope saves, which needs rope.
func ropeTablesArg(fn string, v starlark.Value, rope bool) (string, error) {
	if v == nil || v == starlark.None {
		return "", nil
	}
	s, ok := starlark.AsString(v)
	if !ok || s == "" {
		return "", fmt.Errorf("%s: rope_tables must name the rotary module, e.g. \"rotary_emb\" (got %s; None for no tables)", fn, v.String())
	}
	if !rope {
		return "", fmt.Errorf("%s: rope_tables=%q needs rope=True (the tables are the rotary embedding's cos and sin)", fn, s)
	}
	return s, nil
}
