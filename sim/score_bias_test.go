package sim

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// TestScoreBiasWhateverTopkMethod: transformers' DeepseekV3TopkRouter
// (and Glm4MoeTopkRouter, which GLM-4.5 and GLM-4.7-Flash share) makes its
// e_score_correction_bias buffer, (n_routed_experts,) fp32, in every MoE
// layer whatever the config's topk_method says (it routes by it in every
// case and never reads topk_method: modeling_deepseek_v3.py l. 130 in
// 5.25.0, register_buffer l. 121 in 4.57.1); only the hub's remote code
// makes it for "noaux_tc" alone. DeepseekV2TopkRouter makes none in any
// release. On the meta device, fp32 buffers, topk_method "noaux_tc",
// "greedy" and absent alike (tools/oracle's helper is this, inline):
//
//	[PYTHONPATH=tf4.57.1:deps] python -c 'import transformers, torch; ... m.named_buffers() ... "e_score" in n'
//
// transformers 5.25.0 and 4.57.1 (torch 2.15.0): Moonlight-16B-A3B
// (deepseek_v3) 26 buffers, 6,656 B; GLM-4.5-Air (glm4_moe) 45, 23,040 B;
// GLM-4.7-Flash (glm4_moe_lite, 5.25.0) 46, 11,776 B. memsh registered
// them for "noaux_tc" only.
func TestScoreBiasWhateverTopkMethod(t *testing.T) {
	for _, tc := range []struct {
		file, version string
		bias          int64 // e_score_correction_bias bytes, fp32
	}{
		{"moonlight-16b-a3b-instruct.json", "5.25.0", 6_656},
		{"moonlight-16b-a3b-instruct.json", "4.57.1", 6_656},
		{"glm-4.5-air.json", "5.25.0", 23_040},
		{"glm-4.5-air.json", "4.57.1", 23_040},
		{"glm-4.7-flash.json", "5.25.0", 11_776},
		{"deepseek-v2-lite.json", "5.25.0", 0},
		{"deepseek-v2-lite.json", "4.57.1", 0},
	} {
		for _, method := range []string{"noaux_tc", "greedy", ""} {
			if strings.HasPrefix(tc.file, "deepseek-v2") && method == "noaux_tc" {
				continue // refused for deepseek_v2 (TestDeepSeekV2Refusals)
			}
			var cfg map[string]any
			if err := json.Unmarshal(readHF(t, tc.file), &cfg); err != nil {
				t.Fatal(err)
			}
			delete(cfg, "topk_method")
			if method != "" {
				cfg["topk_method"] = method
			}
			data, err := json.Marshal(cfg)
			if err != nil {
				t.Fatal(err)
			}
			m, err := hf.FromConfigOptions(data, hf.Options{Attn: "sdpa", Transformers: tc.version})
			if err != nil {
				t.Fatalf("%s %s topk_method %q: %v", tc.file, tc.version, method, err)
			}
			p := tinyPlan(t, m)
			p.Precision, _ = core.LookupPrecision("fp32")
			prog, err := p.LowerProgram()
			if err != nil {
				t.Fatal(err)
			}
			var got int64
			for _, b := range prog.Buffers {
				if strings.HasSuffix(b.Name, "e_score_correction_bias") {
					got += core.Numel(b.Shape) * b.Dtype.Bytes(1)
				}
			}
			if got != tc.bias {
				t.Errorf("%s %s topk_method %q: e_score_correction_bias %d B, transformers %d", tc.file, tc.version, method, got, tc.bias)
			}
		}
	}
}
