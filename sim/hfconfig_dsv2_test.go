package sim

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"

	"github.com/memsh/memsh/sim/hf"
)

// DeepSeek-V2's parameters: transformers 5.25.0's DeepseekV2ForCausalLM
// on the meta device over the config.json values in testdata/hf
// (deepseek-v2-lite.json: deepseek-ai/DeepSeek-V2-Lite's config.json,
// as copied in public tests; deepseek-v2.json: deepseek-ai/DeepSeek-V2's,
// as NVIDIA Megatron-Bridge's DeepSeek-V2 bridge test copies it):
//
//	m = AutoModelForCausalLM.from_config(DeepseekV2Config(**cfg)) under torch.device("meta")
//	sum(p.numel() for p in m.parameters())
//
// The model cards count 15.7 B and 236 B. DeepSeek-V2-Lite's
// model.safetensors.index.json reports total_size 31,412,968,448 B (as a
// public write-up of its weights quotes it), 2 B a parameter in bf16:
// 15,706,484,224. DeepSeek-V2's index total was not found.
func TestDeepSeekV2Params(t *testing.T) {
	for _, tc := range []struct {
		file string
		want int64
	}{
		{"deepseek-v2-lite.json", 15_706_484_224},
		{"deepseek-v2.json", 235_741_434_880},
	} {
		m, err := hf.FromConfigOptions(readHF(t, tc.file), hf.Options{Attn: "sdpa"})
		if err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		if got := m.Params(); got != tc.want {
			t.Errorf("%s: %d parameters, want %d", tc.file, got, tc.want)
		}
	}
}

// What one DeepSeek-V2 MoE layer keeps for backward, against transformers
// on PyTorch 2.15.0 (the CPU, bf16 weights loaded as from_pretrained
// loads them, no autocast, sdpa, use_cache=False): deepseek-v2-tiny.json
// (64 wide, 4 heads, MLA with kv_lora_rank 16, 8 + 4 query/key dims and
// 8 value dims, 8 experts of 32, top-2, 2 shared), layer 0 dense and
// layer 1 an MoE layer, so that a layer's bytes are the difference of 2
// layers and 1, 2 samples of 32 tokens:
//
//	[PYTHONPATH=tf5.23.0] python tools/oracle/hf_block_saved.py CONFIG {1,2} 2 32 bfloat16 sdpa nocache keepfp32
//
// 5.25.0 keeps the router's weight fp32 (_keep_in_fp32_modules_strict
// ["gate.weight"], from 5.24): greedy, no q_lora_rank: 518,948 - 253,444
// kept; group-limited (q_lora_rank 32, n_group 4, topk_group 2): 552,740
// - 270,084 (the layer's 512 more than greedy's, beyond q_a_proj's, is
// masked_fill's [64 tokens, 8 experts] bool mask: nn.MoE.GroupLimited).
// 5.23.0 (the 5.23.0 wheel unpacked on PYTHONPATH) loads the router in
// bf16, and its F.linear(x.float(), weight.float()) keeps the fp32 copy
// of the weight, 2,048 B a layer more: 520,996 - 253,444 and 554,788 -
// 270,084 (as 5.25.0 measures without keepfp32, its .to(bfloat16)
// casting the router). memsh counts the copy as a saved weight copy. The
// config as deepseek_v3 measures 265,504 a layer at 5.25.0, as greedy.
// memsh counts what the harness counts but one thing:
//
//   - the CPU's attention: SDPA with 12-wide queries and keys and 8-wide
//     values takes the math path on the CPU, which keeps fp32 copies of
//     q, k^T and v and the fp32 probabilities (12,288 + 12,288 + 8,192 +
//     32,768 B), where memsh lowers the CUDA memory-efficient kernel (q,
//     k, the kv_b_proj output v is a view of, its output and logsumexp:
//     6,144 + 6,144 + 8,192 + 4,096 + 1,024 B): 39,936 B fewer.
//
// grouped_mm's offsets (int32 [8 experts], 32 B) are counted (nn/moe_hf.go).
func TestDeepSeekV2LayerSavesAsTransformers(t *testing.T) {
	const cpuMathAttention = 39_936
	cpu, err := core.LookupRuntime("cpu")
	if err != nil {
		t.Fatal(err)
	}
	tiny := string(readHF(t, "deepseek-v2-tiny.json"))
	grouped := strings.NewReplacer(`"q_lora_rank": null`, `"q_lora_rank": 32`,
		`"topk_method": "greedy"`, `"topk_method": "group_limited_greedy", "n_group": 4, "topk_group": 2`).Replace(tiny)
	saved := func(cfg, layers, version string) int64 {
		m, err := hf.FromConfigOptions([]byte(strings.Replace(cfg, `"num_hidden_layers": 2`, `"num_hidden_layers": `+layers, 1)), hf.Options{Attn: "sdpa", Transformers: version})
		if err != nil {
			t.Fatal(err)
		}
		p := tinyPlan(t, m)
		p.Runtime, p.Batch, p.Seq = cpu, 2, 32
		if p.Precision, err = core.LookupPrecision("bf16"); err != nil {
			t.Fatal(err)
		}
		r := evalPlan(t, p)
		return r.SavedActivations + r.SavedWeightCopies
	}
	for _, tc := range []struct {
		name, cfg, version string
		want               int64
	}{
		{"greedy", tiny, "5.25.0", 518_948 - 253_444},
		{"group_limited_greedy", grouped, "5.25.0", 552_740 - 270_084},
		{"greedy", tiny, "5.23.0", 520_996 - 253_444},
		{"group_limited_greedy", grouped, "5.23.0", 554_788 - 270_084},
	} {
		want := tc.want - cpuMathAttention
		if got := saved(tc.cfg, "2", tc.version) - saved(tc.cfg, "1", tc.version); got != want {
			t.Errorf("%s %s: a layer keeps %d bytes, transformers %d less the CPU's attention, %d (%+d)", tc.name, tc.version, got, tc.want, want, got-want)
		}
	}
}

// What hf_config refuses for deepseek_v2, naming the key: a router
// DeepseekV2TopkRouter does not have, and groups that do not divide the
// experts (its view(-1, n_group, experts // n_group) fails).
func TestDeepSeekV2Refuses(t *testing.T) {
	tiny := string(readHF(t, "deepseek-v2-tiny.json"))
	for _, tc := range []struct {
		name, from, to, want string
	}{
		{"topk_method", `"topk_method": "greedy"`, `"topk_method": "noaux_tc"`,
			`"topk_method" must be "greedy" or "group_limited_greedy" for model_type deepseek_v2 (got "noaux_tc")`},
		{"n_group", `"topk_method": "greedy"`, `"topk_method": "group_limited_greedy", "n_group": 3, "topk_group": 2`,
			`"n_group" must divide n_routed_experts (8) for topk_method "group_limited_greedy" (got 3)`},
		{"no n_group", `"topk_method": "greedy"`, `"topk_method": "group_limited_greedy"`, `"n_group"`},
	} {
		_, err := hf.FromConfigOptions([]byte(strings.Replace(tiny, tc.from, tc.to, 1)), hf.Options{Attn: "sdpa"})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %s", tc.name, err, tc.want)
		}
	}
}
