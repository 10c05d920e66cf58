package sim

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// zamba2Config is file (zamba2-tiny.json, ...) cut to layers (its layers_block_type
// cut with it, as hf_block_saved.py cuts it and makes hybrid_layer_ids
// again), with set's keys replaced.
func zamba2Config(t *testing.T, file string, layers int64, set map[string]any) []byte {
	t.Helper()
	var cfg map[string]any
	if err := json.Unmarshal(readHF(t, file), &cfg); err != nil {
		t.Fatal(err)
	}
	for k, v := range set {
		cfg[k] = v
	}
	cfg["num_hidden_layers"] = layers
	cfg["layers_block_type"] = cfg["layers_block_type"].([]any)[:layers]
	data, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// What a Zamba2 model keeps for backward, against transformers 5.25.0 on
// PyTorch 2.15.0 (the CPU, no autocast), the mamba_ssm kernel's node
// standing in for the kernel the CPU lacks (what it keeps read from
// mamba_ssm's source; tools/oracle/mamba2_kernel_saved.py):
// zamba2-tiny.json (64 wide; layers hybrid, mamba, hybrid, hybrid; two
// shared blocks, so that layer 3 runs layer 0's block with adapters of
// its own, rank 8, on q, k, v and gate_up_proj; attention of 4 heads of
// 32 over 128, rotary; MLPs of 96, gelu; Mamba-2 of 8 heads of 16, state
// 16, one group), 2 samples of 32 tokens:
//
//	python tools/oracle/mamba2_kernel_saved.py sim/testdata/hf/zamba2-tiny.json {1,2,3,4} 2 32 {float32,bfloat16} {sdpa,eager} nocache
func TestZamba2SavesAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		precision, attn string
		want            [4]int64
	}{
		{"fp32", "sdpa", [4]int64{685380, 843652, 1404868, 1966084}},
		{"fp32", "eager", [4]int64{717124, 875396, 1468356, 2061316}},
		{"bf16", "sdpa", [4]int64{418116, 505732, 820164, 1134596}},
		{"bf16", "eager", [4]int64{466244, 553860, 916420, 1278980}},
	} {
		for i, want := range tc.want {
			p := hfOraclePlan(t, zamba2Config(t, "zamba2-tiny.json", int64(i+1), nil), hf.Options{Attn: tc.attn}, tc.precision)
			if got := evalPlan(t, p).SavedActivations; got != want {
				t.Errorf("%s %s, %d layers: memsh keeps %d, transformers %d (%+d)", tc.precision, tc.attn, i+1, got, want, got-want)
			}
		}
	}
}

// Under full checkpointing (use_reentrant=False), the same at 3 and 4
// layers (... {3,4} 2 32 {float32,bfloat16} sdpa nocache ckpt held):
// saved fp32 181,508 / 197,892, bf16 132,356 / 140,548 (each layer's
// input, and the embeddings' copy the hybrid layers read); held by the
// checkpointed layers' arguments: position_ids (256) and the rotary pair
// (fp32 8,192, bf16 4,096).
func TestZamba2CheckpointSavesAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		precision string
		saved     [2]int64
		held      int64
	}{
		{"fp32", [2]int64{181508, 197892}, 8448},
		{"bf16", [2]int64{132356, 140548}, 4352},
	} {
		for i, saved := range tc.saved {
			layers := int64(i + 3)
			p := hfOraclePlan(t, zamba2Config(t, "zamba2-tiny.json", layers, nil), hf.Options{Attn: "sdpa"}, tc.precision)
			p.Checkpoint = core.Checkpoint{Mode: "full", Every: 1}
			if got := evalPlan(t, p).SavedActivations; got != saved+tc.held {
				t.Errorf("%s, %d layers: memsh keeps %d, transformers %d (%+d)", tc.precision, layers, got, saved+tc.held, got-saved-tc.held)
			}
		}
	}
}

// The same without the attention's adapters and rotary embeddings
// (zamba2-tiny-plain.json: use_shared_attention_adapter and use_mem_rope
// false, as Zamba2-2.7B's sizes have them):
//
//	python tools/oracle/mamba2_kernel_saved.py sim/testdata/hf/zamba2-tiny-plain.json 4 2 32 float32 sdpa nocache
//	... 4 2 32 bfloat16 eager nocache; ... 3 2 32 float32 eager nocache
func TestZamba2PlainSavesAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		precision, attn string
		layers, want    int64
	}{
		{"fp32", "sdpa", 4, 1939460},
		{"bf16", "eager", 4, 1265668},
		{"fp32", "eager", 3, 1447876},
	} {
		p := hfOraclePlan(t, zamba2Config(t, "zamba2-tiny-plain.json", tc.layers, nil), hf.Options{Attn: tc.attn}, tc.precision)
		if got := evalPlan(t, p).SavedActivations; got != tc.want {
			t.Errorf("%s %s, %d layers: memsh keeps %d, transformers %d (%+d)", tc.precision, tc.attn, tc.layers, got, tc.want, got-tc.want)
		}
	}
}

// Zamba2's parameters as transformers 5.25.0 builds Zamba2ForCausalLM on
// the meta device (sum of p.numel() over model.parameters(): the shared
// blocks and the tied head once): zamba2-tiny.json 317,856,
// zamba2-tiny-plain.json 299,424; zamba2-7b-sizes.json 7,356,749,648, a
// config of Zamba2-7B's sizes (3584 wide, 81 layers of which 13 hybrid,
// two shared blocks with MLPs of 14336 and 32 heads, adapters of rank
// 128 on the MLPs only, rotary; Mamba-2 of 112 heads of 64, two groups,
// state 64; 32,000 tokens) as a pre-release export of its config lists
// them (transformers 4.43.0.dev0's keys: ffn_hidden_size, state_size,
// lora_rank, use_shared_attention_lora false, use_shared_block_lora true)
// in a public benchmark script; the hub's config.json was not reachable
// from here.
func TestZamba2Params(t *testing.T) {
	checkParams(t, map[string]int64{
		"zamba2-tiny.json":       317_856,
		"zamba2-tiny-plain.json": 299_424,
		"zamba2-7b-sizes.json":   7_356_749_648,
	})
}

// Bad Zamba2 configs are refused, naming the key; transformers older than
// 5.17 is refused (families.go: 4.x trains the Mamba-2 layers through
// other kernels, 5.0 to 5.16 tie or number the shared blocks otherwise).
func TestZamba2Config(t *testing.T) {
	base := string(readHF(t, "zamba2-tiny.json"))
	for _, tc := range []struct {
		from, to, want string
	}{
		{`"hybrid", "mamba", "hybrid", "hybrid"`, `"hybrid", "mamba", "hybrid"`, `"layers_block_type" must list one layer type per layer (4`},
		{`"hybrid", "mamba", "hybrid", "hybrid"`, `"hybrid", "mamba", "attention", "hybrid"`, `"layers_block_type" entry 2 must be "mamba" or "hybrid"`},
		{`"n_mamba_heads": 8`, `"n_mamba_heads": 6`, `"n_mamba_heads" (6) must divide mamba_expand x hidden_size (128)`},
		{`"num_key_value_heads": 4`, `"num_key_value_heads": 2`, `"use_shared_attention_adapter" is true, but`},
		{`"num_key_value_heads": 4`, `"num_key_value_heads": 3`, `"num_key_value_heads" (3) must divide the 4 attention heads`},
		{`"hidden_act": "gelu"`, `"hidden_act": "mish"`, `"hidden_act" names an activation memsh does not know`},
	} {
		if !strings.Contains(base, tc.from) {
			t.Fatalf("zamba2-tiny.json has no %s", tc.from)
		}
		_, err := hf.FromConfig([]byte(strings.Replace(base, tc.from, tc.to, 1)), "sdpa")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %s", tc.to, err, tc.want)
		}
	}
	for _, tc := range []struct {
		version string
		ok      bool
	}{{"4.57.1", false}, {"5.16.0", false}, {"5.17.0", true}} {
		_, err := hf.FromConfigOptions([]byte(base), hf.Options{Attn: "sdpa", Transformers: tc.version})
		if (err == nil) != tc.ok {
			t.Errorf("transformers %s: error %v, want built %v", tc.version, err, tc.ok)
		}
	}
	// Without the key, Zamba2Config's own 54 layers, hybrid at 6, 12, ...,
	// 42, 47 and 51: zamba2-tiny.json so, 1,799,184 parameters in
	// transformers 5.25.0 on the meta device.
	m, err := hf.FromConfig([]byte(strings.Replace(strings.Replace(base, `"layers_block_type": ["hybrid", "mamba", "hybrid", "hybrid"],`, "", 1),
		`"num_hidden_layers": 4`, `"num_hidden_layers": 54`, 1)), "sdpa")
	if err != nil {
		t.Fatal(err)
	}
	if m.Params() != 1_799_184 {
		t.Errorf("zamba2-tiny.json with the default layers: %d parameters, transformers 1,799,184", m.Params())
	}
	// Tensor and pipeline parallelism are refused at the shared blocks.
	if m, err = hf.FromConfig([]byte(base), "sdpa"); err != nil {
		t.Fatal(err)
	}
	for _, set := range []func(p *core.Plan){func(p *core.Plan) { p.Parallel.TP = 2 }, func(p *core.Plan) { p.Parallel.PP = 2 }} {
		p := tinyPlan(t, m)
		set(p)
		if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "not modelled for Zamba2's shared transformer blocks") {
			t.Errorf("tp %d pp %d: %v", p.Parallel.TP, p.Parallel.PP, err)
		}
	}
}
