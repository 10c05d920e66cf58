package sim

import (
	"fmt"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/nn"
)

// What AFMoE's decoder layers keep for backward, against transformers
// 5.25.0 on PyTorch 2.15.0 (the CPU, no autocast, experts_implementation
// grouped_mm, from_pretrained's fp32 keeps applied, no attention_mask):
// afmoe-tiny.json (64 wide, 4 heads of 16, 2 kv heads; layer 0 sliding
// over 16 keys with a dense mlp of 128, layer 1 full without rope, layer 2
// sliding, both MoE: 8 experts of 32, top 2, 1 shared expert of 32;
// mup_enabled), 2 samples of 32 tokens, 1, 2 and 3 layers:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/afmoe-tiny.json {1,2,3} 2 32 {float32,bfloat16} {sdpa,eager} nocache keepfp32
//
// Per layer: the four Olmo2RMSNorms' fp32 rows, q_norm's and k_norm's
// over each head, the rotary products on the sliding layers only,
// gate_proj's sigmoid and the gated product, the kernel's saves (SDPA's
// additive bias on the sliding layers, whole over the batch), and on the
// MoE layers the router's fp32 scores and the grouped experts' and the
// shared expert's saves.
//
// With every layer checkpointed (use_reentrant=False; the same command
// with ckpt held): each layer's input and the loss's, SDPA and eager alike,
// plus what the model's forward hands every checkpointed layer (held):
// position_ids (1, 32) int64, 256 bytes, and the rotary cos and sin (1,
// 32, 16) in the model's dtype; under SDPA the sliding layers' bool mask,
// one (1, 1, 32, 32) storage expanded over the batch, 1,024 bytes (the
// full layers run is_causal without one): 5,376 bytes in fp32, 3,328 in
// bf16. Eager attention gets a float mask a layer type instead, (2, 1,
// 32, 32) in the model's dtype: 12,544 / 20,736 / 20,736 in fp32 (the
// full layers' from 2 layers on), 6,400 / 10,496 / 10,496 in bf16.
func TestAfmoeSavesAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		precision, attn string
		ckpt            bool
		saved, held     [3]int64
	}{
		{"fp32", "sdpa", false, [3]int64{574212, 1044004, 1538372}, [3]int64{}},
		{"fp32", "eager", false, [3]int64{597764, 1115684, 1633604}, [3]int64{}},
		{"bf16", "sdpa", false, [3]int64{428804, 759332, 1102148}, [3]int64{}},
		{"bf16", "eager", false, [3]int64{472836, 859684, 1246532}, [3]int64{}},
		{"fp32", "sdpa", true, [3]int64{132356, 148740, 165124}, [3]int64{5376, 5376, 5376}},
		{"fp32", "eager", true, [3]int64{132356, 148740, 165124}, [3]int64{12544, 20736, 20736}},
		{"bf16", "sdpa", true, [3]int64{115972, 124164, 132356}, [3]int64{3328, 3328, 3328}},
		{"bf16", "eager", true, [3]int64{115972, 124164, 132356}, [3]int64{6400, 10496, 10496}},
	} {
		for i, saved := range tc.saved {
			p := hfOraclePlan(t, ropeConfig(t, "afmoe-tiny.json", int64(i+1), nil), hf.Options{Attn: tc.attn, Transformers: "5.25.0"}, tc.precision)
			p.NoAttentionMask = true
			if tc.ckpt {
				p.Checkpoint = core.Checkpoint{Mode: "full", Every: 1}
			}
			want := saved + tc.held[i]
			if got := evalPlan(t, p).SavedActivations; got != want {
				t.Errorf("%s %s ckpt %v, %d layers: memsh keeps %d bytes, transformers %d (%+d)", tc.precision, tc.attn, tc.ckpt, i+1, got, want, got-want)
			}
		}
	}
}

// AFMoE's parameters, which transformers 5.25.0 counts on the meta device
// (AutoModelForCausalLM.from_config under torch.device("meta"), summing
// numel; torch 2.15.0) for trinity-mini.json (26,123,974,400, 3,840 of them
// without gradient: 30 MoE layers' expert_bias of 128) and
// trinity-nano.json (6,120,003,328, 6,912 without: 54 x 128); the files
// carry the published sizes as public test code spells them
// (tokenspeed's afmoe config test for Trinity-Mini, its layer_types as
// written; the neuronx-distributed-inference Trinity port's NANO_CONFIG,
// "matches arcee-ai/Trinity-Nano-Preview/config.json"), the hub not being
// reachable from here. afmoe-tiny.json: 219,056 (16 without).
func TestAfmoeParams(t *testing.T) {
	checkParams(t, map[string]int64{
		"trinity-mini.json": 26_123_974_400,
		"trinity-nano.json": 6_120_003_328,
		"afmoe-tiny.json":   219_056,
	})
	for file, frozen := range map[string]int64{"trinity-mini.json": 3_840, "trinity-nano.json": 6_912, "afmoe-tiny.json": 16} {
		m, err := hf.FromConfig(readHF(t, file), "sdpa")
		if err != nil {
			t.Fatal(err)
		}
		p := tinyPlan(t, m)
		prog, err := p.LowerProgram()
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		for _, pa := range prog.Params {
			if !pa.Trainable {
				n += core.Numel(pa.Shape)
			}
		}
		if n != frozen {
			t.Errorf("%s: %d parameters without gradient, transformers %d", file, n, frozen)
		}
	}
}

// afmoe's layers: layer_types, else every global_attn_every_n_layers-th
// layer full (default 4), the full layers without rope or window, the
// first num_dense_layers dense; the configs transformers 5.25.0 cannot
// build are refused naming the key, and so is a release before 5.0.
func TestAfmoeConfig(t *testing.T) {
	tiny := string(readHF(t, "afmoe-tiny.json"))
	layout := func(cfg string) string {
		m, err := hf.FromConfig([]byte(cfg), "sdpa")
		if err != nil {
			t.Fatal(err)
		}
		stack := layerStack(t, m)
		var out []string
		for i := int64(0); i < stack.Count(); i++ {
			s := "F"
			core.Walk(stack.Block(i), "", func(_ string, l core.Layer) {
				switch x := l.(type) {
				case *nn.Attention:
					if x.Rope && x.Window > 0 {
						s = fmt.Sprintf("S%d", x.Window)
					}
				case *nn.MoE:
					s += "m"
				}
			})
			out = append(out, s)
		}
		return strings.Join(out, " ")
	}
	for _, tc := range []struct {
		name, cfg, want string
	}{
		{"every 2nd full, 1 dense", tiny, "S16 Fm S16m"},
		{"default every 4th", strings.Replace(tiny, `"global_attn_every_n_layers": 2,`, "", 1), "S16 S16m S16m"},
		{"layer_types", strings.Replace(tiny, `"global_attn_every_n_layers": 2,`, `"layer_types": ["full_attention", "sliding_attention", "full_attention"],`, 1), "F S16m Fm"},
		{"no dense layer", strings.Replace(tiny, `"num_dense_layers": 1,`, `"num_dense_layers": 0,`, 1), "S16m Fm S16m"},
		{"default window", strings.Replace(tiny, `"sliding_window": 16,`, "", 1), "S1024 Fm S1024m"},
	} {
		if got := layout(tc.cfg); got != tc.want {
			t.Errorf("%s: layers %s, want %s", tc.name, got, tc.want)
		}
	}
	for _, tc := range []struct{ cfg, key string }{
		{strings.Replace(tiny, `"sliding_window": 16,`, `"sliding_window": null,`, 1), `"sliding_window" must be a window size`},
		{strings.Replace(tiny, `"global_attn_every_n_layers": 2,`, `"layer_types": ["sliding_attention"],`, 1), `"layer_types" must list one attention type per layer`},
		{strings.Replace(tiny, `"global_attn_every_n_layers": 2,`, `"global_attn_every_n_layers": 0,`, 1), `"global_attn_every_n_layers"`},
		{strings.Replace(tiny, `"num_dense_layers": 1,`, `"num_dense_layers": -1,`, 1), `"num_dense_layers"`},
		{strings.Replace(tiny, `"num_experts_per_tok": 2,`, `"num_experts_per_tok": 9,`, 1), `"num_experts_per_tok" (9) must be at most "num_experts" (8)`},
		{strings.Replace(tiny, `"mup_enabled": true,`, `"mup_enabled": 1,`, 1), `"mup_enabled" must be true or false`},
	} {
		if _, err := hf.FromConfig([]byte(tc.cfg), "sdpa"); err == nil || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("error %v, want one with %q", err, tc.key)
		}
	}
	_, err := hf.FromConfigOptions([]byte(tiny), hf.Options{Attn: "sdpa", Transformers: "4.57.3"})
	if err == nil || !strings.Contains(err.Error(), `model_type "afmoe" needs transformers 5.0 or later`) {
		t.Errorf("transformers 4.57.3: error %v, want one naming 5.0", err)
	}
}

// The gates and norms AFMoE's attention and experts add refuse the
// combinations they are not modelled in, naming the option.
func TestAfmoeOptionsRefused(t *testing.T) {
	at := func(f func(a *nn.Attention)) core.Layer {
		a := &nn.Attention{Dim: 64, Heads: 4, Impl: "sdpa", QKNorm: true, QKNormOlmo2: true, GateProj: true}
		f(a)
		return a
	}
	moe := func(f func(m *nn.MoE)) core.Layer {
		m := &nn.MoE{Dim: 64, Hidden: 32, Experts: 8, TopK: 2, Act: "silu", Router: nn.RouterSigmoid, ScoreBias: true, ScoreBiasParam: true}
		f(m)
		return m
	}
	for _, tc := range []struct {
		l    core.Layer
		want string
	}{
		{at(func(a *nn.Attention) { a.OutputGate = true }), "not both"},
		{at(func(a *nn.Attention) { a.FusedQKV = true }), "separate q, k and v projections"},
		{at(func(a *nn.Attention) { a.QKNorm = false }), "qk_norm=\"olmo2_head\""},
		{at(func(a *nn.Attention) { a.QKNormGemma = true }), "qk_norm=\"olmo2_head\""},
		{moe(func(m *nn.MoE) { m.ScoreBias = false }), "score bias kept as a parameter"},
		{moe(func(m *nn.MoE) { m.Router = nn.RouterSoftmax }), "the sigmoid router's selection bias"},
	} {
		if err := tc.l.Validate("x"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one with %q", tc.l.Summary(), err, tc.want)
		}
	}
	for _, l := range []core.Layer{at(func(*nn.Attention) {}), moe(func(*nn.MoE) {})} {
		if err := l.Validate("x"); err != nil {
			t.Errorf("%s: %v", l.Summary(), err)
		}
	}
}

// layerStack is the model's stack of decoder layers (its last core.Repeat).
func layerStack(t *testing.T, m *core.Model) *core.Repeat {
	t.Helper()
	var stack *core.Repeat
	for _, top := range m.Layers {
		core.Walk(top, "", func(_ string, l core.Layer) {
			if r, ok := l.(*core.Repeat); ok {
				stack = r
			}
		})
	}
	if stack == nil {
		t.Fatal("no stack of layers")
	}
	return stack
}

// AFMoE under PEFT's LoRA all-linear (r=4, alpha=8, fp32 adapters):
// PEFT converts qwen2_moe's 4.x names on afmoe, so the experts and the
// router's nn.Linear (mlp.router.gate, whose weight key ends in
// gate.weight) get ParamWrappers, the attention's linears and the dense
// and shared experts' none but q, k, v, o, ... (lora_param_linear.go).
// afmoe-tiny.json as TestAfmoeSavesAsTransformers lays it out, 2 and 3
// layers (the first MoE layer is layer 1), transformers 5.25.0, peft
// 0.21.2, PyTorch 2.15.0 on the CPU:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/afmoe-tiny.json {2,3} 2 32 {float32,bfloat16} sdpa nocache keepfp32 lora=all-linear
//
// saved 963,364 / 1,562,180 bytes in fp32, 737,060 / 1,160,772 in bf16;
// gradients 60,544 / 113,920 bytes.
func TestAfmoeLoRASavesAsPEFT(t *testing.T) {
	for _, tc := range []struct {
		precision    string
		saved, grads [2]int64
	}{
		{"fp32", [2]int64{963364, 1562180}, [2]int64{60544, 113920}},
		{"bf16", [2]int64{737060, 1160772}, [2]int64{60544, 113920}},
	} {
		for i, saved := range tc.saved {
			layers := int64(i + 2)
			p := hfOraclePlan(t, ropeConfig(t, "afmoe-tiny.json", layers, nil), hf.Options{Attn: "sdpa", Transformers: "5.25.0"}, tc.precision)
			p.NoAttentionMask = true
			p.LoRA = &core.LoRA{Rank: 4, Alpha: 8, Targets: []string{"all-linear"}}
			rep := evalPlan(t, p)
			if got := rep.SavedActivations; got != saved {
				t.Errorf("%s, %d layers: memsh keeps %d bytes, PEFT %d (%+d)", tc.precision, layers, got, saved, got-saved)
			}
			if got := rep.States.Grads; got != tc.grads[i] {
				t.Errorf("%s, %d layers: %d bytes of gradients, PEFT %d (%+d)", tc.precision, layers, got, tc.grads[i], got-tc.grads[i])
			}
		}
	}
}

// Under QLoRA the router's nn.Linear is stored 4-bit (transformers 5.25.0's
// get_keys_to_not_convert spares the output layer alone), and PEFT's
// ParamWrapper, which all-linear puts on its weight, would read the packed
// storage as the weight: memsh refuses it, naming the weight.
func TestAfmoeQLoRARouterRefused(t *testing.T) {
	m, err := hf.FromConfigOptions(readHF(t, "afmoe-tiny.json"), hf.Options{Attn: "sdpa"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		targets []string
		refused bool
	}{
		{[]string{"all-linear"}, true},
		{[]string{"q_proj", "k_proj", "v_proj", "o_proj"}, false},
	} {
		p := tinyPlan(t, m)
		p.Quant = "nf4"
		p.LoRA = &core.LoRA{Rank: 4, Alpha: 8, Targets: tc.targets}
		_, err := p.LowerProgram()
		if refused := err != nil && strings.Contains(err.Error(), "mlp.router.gate.weight") && strings.Contains(err.Error(), "bitsandbytes-quantized"); refused != tc.refused || (err != nil && !refused) {
			t.Errorf("%v: %v, want refused %v", tc.targets, err, tc.refused)
		}
	}
}
