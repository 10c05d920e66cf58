package sim

import (
	"errors"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/units"
)

// What FalconMambaForCausalLM keeps for backward, against transformers
// 5.25.0 on PyTorch 2.15.0 (the CPU, no autocast; its mixer has no fused
// path, so the CPU runs what a GPU runs): falcon_mamba-tiny.json (32
// wide, inner 64, state 4, dt rank 2, conv 4, untied head), 2 samples of
// 32 tokens, 1 and 2 layers:
//
//	python tools/oracle/hf_block_saved.py sim/testdata/hf/falcon_mamba-tiny.json {1,2,3} 2 32 {float32,bfloat16} eager nocache
//
// (3 layers: fp32 1,241,860, bf16 1,126,404; sdpa is refused by
// transformers: no SDPA path.) A block keeps 396,800 bytes in fp32 and
// 359,680 in bf16: Mamba's slow block of the same sizes (the config with
// model_type mamba, 393,472 and 356,864) and the three weightless norms:
// in fp32 each norm's rsqrt (3 x 256), the normed dt dt_proj keeps (512),
// B (1,024: dt x B keeps it) and C (1,024: each step's product with C);
// in bf16 the norms' fp32 copies of their columns (512 + 1,024 + 1,024),
// the rsqrts, the bf16 normed dt and C (256 + 512), less x_proj's output
// (1,280), which nothing keeps any more.
func TestFalconMambaSavesAsTransformers(t *testing.T) {
	checkSavedOneTwo(t, []savedOneTwo{
		{"falcon_mamba-tiny.json", "fp32", "eager", 448260, 845060},
		{"falcon_mamba-tiny.json", "bf16", "eager", 407044, 766724},
		{"falcon_mamba-tiny.json", "fp32", "sdpa", 448260, 845060},
	})
}

// FalconMamba's parameters, counted as transformers 5.25.0 builds
// FalconMambaForCausalLM on the meta device (sum of p.numel(); the dt, B
// and C norms' all-ones weights are buffers, not parameters):
// falcon-mamba-7b.json, tiiuae/falcon-mamba-7b's config.json as the hub
// serves it (transcribed in onnx-diagnostic's and transformers'
// benchmark code; intermediate_size 8192 wins over expand 16),
// 7,272,665,088, the hub's "7.27B params"; falcon_mamba-tiny.json 21,728.
func TestFalconMambaParams(t *testing.T) {
	checkParams(t, map[string]int64{
		"falcon-mamba-7b.json":   7_272_665_088,
		"falcon_mamba-tiny.json": 21_728,
	})
}

// What falcon_mamba reads and refuses: sdpa runs the PyTorch loop as
// eager does (no SDPA path, no fused path), flash is refused,
// use_falcon_mambapy (the mamba.py scan) is refused, use_mambapy is never
// read (FalconMambaConfig resets it), transformers older than 5.25 is
// refused (the mamba_ssm path of 5.24 and earlier).
func TestFalconMambaConfig(t *testing.T) {
	base := string(readHF(t, "falcon_mamba-tiny.json"))
	with := func(key, val string) []byte {
		return []byte(strings.Replace(base, `"model_type": "falcon_mamba",`, `"model_type": "falcon_mamba", "`+key+`": `+val+`,`, 1))
	}
	for _, tc := range []struct {
		name   string
		config []byte
		opts   hf.Options
		want   string // "" built
	}{
		{"sdpa", []byte(base), hf.Options{Attn: "sdpa"}, ""},
		{"flash", []byte(base), hf.Options{Attn: "flash"}, `no flash-attention path for model_type "falcon_mamba"`},
		{"mambapy", with("use_falcon_mambapy", "true"), hf.Options{Attn: "eager"}, `"use_falcon_mambapy" is true: the mamba.py parallel scan is not modelled`},
		{"use_mambapy unread", with("use_mambapy", "true"), hf.Options{Attn: "eager"}, ""},
		{"5.24", []byte(base), hf.Options{Attn: "eager", Transformers: "5.24.0"}, `model_type "falcon_mamba" needs transformers 5.25 or later`},
		{"5.25", []byte(base), hf.Options{Attn: "eager", Transformers: "5.25.0"}, ""},
		{"state_size", []byte(strings.Replace(base, `"state_size": 4`, `"state_size": 0`, 1)), hf.Options{Attn: "eager"}, `"state_size"`},
	} {
		m, err := hf.FromConfigOptions(tc.config, tc.opts)
		var ue *units.Error
		if tc.name == "5.24" && (!errors.As(err, &ue) || !strings.Contains(ue.Hint, "mamba_ssm kernels (mamba_inner_fn")) {
			t.Errorf("5.24: hint %v, want the reason (the mamba_ssm kernels)", err)
		}
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: error %v, want one containing %s", tc.name, err, tc.want)
		case tc.want == "" && m.Params() != 21_728:
			t.Errorf("%s: %d parameters, want 21,728", tc.name, m.Params())
		}
	}
}
