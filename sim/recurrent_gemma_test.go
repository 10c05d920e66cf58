package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// recurrentGemmaConfig is recurrent_gemma-tiny.json cut to layers (its
// block_types repeat over the layers: recurrent, recurrent, attention).
func recurrentGemmaConfig(t *testing.T, layers int64) []byte {
	return ropeConfig(t, "recurrent_gemma-tiny.json", layers, nil)
}

// What a RecurrentGemma model keeps for backward, against transformers
// 5.25.0 on PyTorch 2.15.0 (the CPU, no autocast; the RG-LRU has no
// kernel in transformers: the PyTorch ops and the loop over the tokens
// are what runs on a GPU too): recurrent_gemma-tiny.json (64 wide, an
// RG-LRU of 64 in 4 blocks, conv width 4; local attention of 4 heads of
// 16, one kv head, rotary on half of each head, a window of 16; MLPs of
// 96), layers recurrent, recurrent, attention, 2 samples of 32 tokens:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/recurrent_gemma-tiny.json {1,2,3} 2 32 {float32,bfloat16} {sdpa,eager} nocache
//
// transformers' figures count the model's 0-dim normalizer buffer, which
// the embeddings' product keeps (4 bytes in fp32, 2 in bf16); memsh
// counts it as model state (a buffer), not as saved activations.
func TestRecurrentGemmaSavesAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		precision, attn string
		want            [3]int64
	}{
		{"fp32", "sdpa", [3]int64{659784, 1137800, 1404040}},
		{"fp32", "eager", [3]int64{659784, 1137800, 1435784}},
		{"bf16", "sdpa", [3]int64{428998, 717190, 884102}},
		{"bf16", "eager", [3]int64{428998, 717190, 932230}},
	} {
		buffer := int64(4)
		if tc.precision == "bf16" {
			buffer = 2
		}
		for i, want := range tc.want {
			p := hfOraclePlan(t, recurrentGemmaConfig(t, int64(i+1)), hf.Options{Attn: tc.attn}, tc.precision)
			if got := evalPlan(t, p).SavedActivations; got != want-buffer {
				t.Errorf("%s %s, %d layers: memsh keeps %d, transformers %d less the %d-byte buffer (%+d)", tc.precision, tc.attn, i+1, got, want, buffer, got-want+buffer)
			}
			prog, err := p.LowerProgram()
			if err != nil {
				t.Fatal(err)
			}
			var n int64
			for _, b := range prog.Buffers {
				if strings.HasSuffix(b.Name, "normalizer") {
					n += b.Dtype.Bytes(1)
				}
			}
			if n != buffer {
				t.Errorf("%s: the normalizer buffer is %d bytes, transformers %d", tc.precision, n, buffer)
			}
		}
	}
}

// Two attention layers among six, each with its own rotary pair and the
// float mask the CPU's SDPA kernel makes of the boolean one (... 6 2 32
// {float32 sdpa, float32 eager, bfloat16 sdpa} nocache): 2,626,312,
// 2,689,800, 1,627,398, less the normalizer buffer.
func TestRecurrentGemmaSixLayersAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		precision, attn string
		want            int64
	}{{"fp32", "sdpa", 2626312 - 4}, {"fp32", "eager", 2689800 - 4}, {"bf16", "sdpa", 1627398 - 2}} {
		p := hfOraclePlan(t, recurrentGemmaConfig(t, 6), hf.Options{Attn: tc.attn}, tc.precision)
		if got := evalPlan(t, p).SavedActivations; got != tc.want {
			t.Errorf("%s %s, 6 layers: memsh keeps %d, transformers %d (%+d)", tc.precision, tc.attn, got, tc.want, got-tc.want)
		}
	}
}

// Under full checkpointing (use_reentrant=False), no attention_mask,
// each checkpointed layer holds its input, the position_ids and the
// forward's boolean sliding-window mask ([1, 1, seq, seq], expanded over
// the batch); each attention layer remakes its rotary pair inside its
// checkpoint (... {3,6} 2 32 {float32,bfloat16} sdpa nocache ckpt held:
// fp32 232,200 / 281,352, bf16 166,662 / 191,238, held 0 beyond them;
// less the normalizer buffer). With recurrent layers alone (2 layers)
// RecurrentGemmaModel still makes the mask, which they hold (1,024 bytes
// here), where memsh, which makes it for the attention layers that read
// it, has none: no released RecurrentGemma lacks attention layers.
func TestRecurrentGemmaCheckpointSavesAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		precision string
		layers    int64
		want      int64
	}{{"fp32", 3, 232200 - 4}, {"fp32", 6, 281352 - 4}, {"bf16", 3, 166662 - 2}, {"bf16", 6, 191238 - 2}} {
		p := hfOraclePlan(t, recurrentGemmaConfig(t, tc.layers), hf.Options{Attn: "sdpa"}, tc.precision)
		p.Checkpoint = core.Checkpoint{Mode: "full", Every: 1}
		p.NoAttentionMask = true
		if got := evalPlan(t, p).SavedActivations; got != tc.want {
			t.Errorf("%s, %d layers: memsh keeps %d, transformers %d (%+d)", tc.precision, tc.layers, got, tc.want, got-tc.want)
		}
	}
}

// RecurrentGemma's parameters as transformers 5.25.0 builds
// RecurrentGemmaForCausalLM on the meta device: recurrentgemma-2b.json
// (google/recurrentgemma-2b's config.json as a public test quotes it; its
// "_block_types" is no key of RecurrentGemmaConfig, whose default is the
// same) 2,682,862,080, the paper's 2.7 B; recurrent_gemma-tiny.json
// 113,280.
func TestRecurrentGemmaParams(t *testing.T) {
	checkParams(t, map[string]int64{
		"recurrent_gemma-tiny.json": 113_280,
		"recurrentgemma-2b.json":    2_682_862_080,
	})
}

// Bad RecurrentGemma configs are refused naming the key, as is autocast
// (the RG-LRU's ops in autocast's own dtypes are not modelled) and a
// transformers older than 5.17 (families.go).
func TestRecurrentGemmaConfig(t *testing.T) {
	base := string(readHF(t, "recurrent_gemma-tiny.json"))
	for _, tc := range []struct {
		from, to, want string
	}{
		{`"block_types": ["recurrent", "recurrent", "attention"]`, `"block_types": ["recurrent", "mlp"]`, `"block_types" entry 1 must be "recurrent" or "attention"`},
		{`"block_types": ["recurrent", "recurrent", "attention"]`, `"block_types": []`, `"block_types" must be a list of block types`},
		{`"lru_width": 64`, `"lru_width": 66`, `"lru_width"`},
		{`"intermediate_size": 192`, `"intermediate_size": 191`, `"intermediate_size" (191) must be even`},
		{`"partial_rotary_factor": 0.5`, `"partial_rotary_factor": 1.5`, `"partial_rotary_factor" must be in (0, 1]`},
		{`"num_key_value_heads": 1`, `"num_key_value_heads": 3`, `"num_key_value_heads" (3) must divide the 4 attention heads`},
		{`"vocab_size": 256`, `"vocab_size": 256, "rope_scaling": {"rope_type": "linear", "factor": 2.0}`, `"rope_scaling" has rope_type "linear"`},
	} {
		if !strings.Contains(base, tc.from) {
			t.Fatalf("recurrent_gemma-tiny.json has no %s", tc.from)
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
	p := hfOraclePlan(t, recurrentGemmaConfig(t, 1), hf.Options{Attn: "sdpa"}, "bf16-mixed")
	if _, err := Evaluate(p, core.Options{}); err == nil || !strings.Contains(err.Error(), "not modelled under autocast") {
		t.Errorf("bf16-mixed: %v", err)
	}
}
