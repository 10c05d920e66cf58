package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// bambaSaved is what memsh keeps for bamba-tiny.json cut to layers (its
// attn_layer_indices cut with it) at 2 x 32 tokens on the CPU.
func bambaSaved(t *testing.T, layers int64, precision, attn string) int64 {
	t.Helper()
	var idx []any
	if layers > 1 {
		idx = []any{1}
	}
	p := hfOraclePlan(t, ropeConfig(t, "bamba-tiny.json", layers, map[string]any{"attn_layer_indices": idx}), hf.Options{Attn: attn}, precision)
	return evalPlan(t, p).SavedActivations
}

// What a Bamba model keeps for backward, against transformers 5.25.0 on
// PyTorch 2.15.0 (the CPU, no autocast), the mamba_ssm kernel's node
// standing in for the kernel the CPU lacks (what it keeps read from
// mamba_ssm's source; sim/falcon_h1_test.go): bamba-tiny.json (64 wide,
// Mamba-2 layers of 8 heads of 16, state 16, one group; attention of 4
// heads of 16, 2 kv heads, rotary on 8 of each head's 16; MLPs of 96),
// layers Mamba-2, attention, Mamba-2, 2 samples of 32 tokens:
//
//	python tools/oracle/mamba2_kernel_saved.py sim/testdata/hf/bamba-tiny.json {1,2,3} 2 32 {float32,bfloat16} {sdpa,eager} nocache
func TestBambaSavesAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		precision, attn string
		want            [3]int64
	}{
		{"fp32", "sdpa", [3]int64{421956, 687684, 993668}},
		{"fp32", "eager", [3]int64{421956, 719428, 1025412}},
		{"bf16", "sdpa", [3]int64{269380, 419396, 589188}},
		{"bf16", "eager", [3]int64{269380, 467524, 637316}},
	} {
		for i, want := range tc.want {
			if got := bambaSaved(t, int64(i+1), tc.precision, tc.attn); got != want {
				t.Errorf("%s %s, %d layers: memsh keeps %d, transformers %d (%+d)", tc.precision, tc.attn, i+1, got, want, got-want)
			}
		}
	}
}

// Under full checkpointing (use_reentrant=False) with an attention_mask
// of ones, the same at 2 and 3 layers (ckpt held mask): saved fp32
// 148,740 / 165,124, bf16 115,972 / 124,164 (each layer's input); held
// position_ids (256) and the rotary pair, 8 of each head's 16 wide (fp32
// 2,048, bf16 1,024), and under eager the causal float mask (8,192 in
// fp32, 4,096 in bf16): sdpa 2,304 / 1,280, eager 10,496 / 5,376. (At 1
// layer, a Mamba-2 layer alone, BambaModel still makes the rotary pair
// and hands it to the layer, held 2,304 in fp32, where memsh, which makes
// the pair for the attention layers that read it, has none: no released
// Bamba lacks attention layers.)
func TestBambaCheckpointSavesAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		precision, attn string
		saved           [2]int64
		held            int64
	}{
		{"fp32", "sdpa", [2]int64{148740, 165124}, 2304},
		{"bf16", "sdpa", [2]int64{115972, 124164}, 1280},
		{"fp32", "eager", [2]int64{148740, 165124}, 10496},
		{"bf16", "eager", [2]int64{115972, 124164}, 5376},
	} {
		for i, saved := range tc.saved {
			layers := int64(i + 2)
			p := hfOraclePlan(t, ropeConfig(t, "bamba-tiny.json", layers, nil), hf.Options{Attn: tc.attn}, tc.precision)
			p.Checkpoint = core.Checkpoint{Mode: "full", Every: 1}
			if got := evalPlan(t, p).SavedActivations; got != saved+tc.held {
				t.Errorf("%s %s, %d layers: memsh keeps %d, transformers %d (%+d)", tc.precision, tc.attn, layers, got, saved+tc.held, got-saved-tc.held)
			}
		}
	}
}

// Bamba's parameters as transformers 5.25.0 builds BambaForCausalLM on
// the meta device: bamba-9b-sizes.json, a config of Bamba-9B's published
// sizes (the card's table: 32 layers of 4096, 32 heads, 8 kv heads,
// untied; attention at layers 9, 18 and 27, Mamba-2 of 128 heads of 64,
// state 128, one group, Llama 3's 128,256-token vocabulary: no
// config.json was reachable from here), 9,780,235,392, the card's
// "9B (9.78B)"; bamba-tiny.json 156,976.
func TestBambaParams(t *testing.T) {
	checkParams(t, map[string]int64{
		"bamba-9b-sizes.json": 9_780_235_392,
		"bamba-tiny.json":     156_976,
	})
}

// Bad Bamba configs are refused, naming the key; transformers older than
// 4.48 (the 4.47.1 wheel has no models/bamba, 4.48.0 has) is refused.
func TestBambaConfig(t *testing.T) {
	base := string(readHF(t, "bamba-tiny.json"))
	for _, tc := range []struct {
		from, to, want string
	}{
		{`"attn_layer_indices": [1]`, `"attn_layer_indices": [3]`, `"attn_layer_indices" must list layer indices in 0..2 (got 3)`},
		{`"attn_layer_indices": [1]`, `"attn_layer_indices": 1`, `"attn_layer_indices" must be a list of layer indices`},
		{`"vocab_size": 256`, `"vocab_size": 256, "z_loss_coefficient": 0.001`, `"z_loss_coefficient" is 0.001: the z-loss`},
		{`"mamba_d_head": 16`, `"mamba_d_head": 12`, `"mamba_d_head" times mamba_n_heads (12 x 8) must be mamba_expand x hidden_size (128)`},
		{`"num_key_value_heads": 2`, `"num_key_value_heads": 3`, `"num_key_value_heads" (3) must divide the 4 attention heads`},
	} {
		if !strings.Contains(base, tc.from) {
			t.Fatalf("bamba-tiny.json has no %s", tc.from)
		}
		_, err := hf.FromConfig([]byte(strings.Replace(base, tc.from, tc.to, 1)), "sdpa")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %s", tc.to, err, tc.want)
		}
	}
	for _, tc := range []struct {
		version string
		ok      bool
	}{{"4.47.1", false}, {"4.48.0", true}} {
		_, err := hf.FromConfigOptions([]byte(base), hf.Options{Attn: "sdpa", Transformers: tc.version})
		if (err == nil) != tc.ok {
			t.Errorf("transformers %s: error %v, want built %v", tc.version, err, tc.ok)
		}
	}
	// No Mamba-2 layer: every layer attention (transformers 5.25.0 on the
	// meta device: 125,376 parameters).
	m, err := hf.FromConfig([]byte(strings.Replace(base, `"attn_layer_indices": [1]`, `"attn_layer_indices": [0, 1, 2]`, 1)), "sdpa")
	if err != nil {
		t.Fatal(err)
	}
	if m.Params() != 125_376 {
		t.Errorf("all-attention bamba: %d parameters, transformers 125,376", m.Params())
	}
}
