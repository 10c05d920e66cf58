package sim

import (
	"testing"

	"github.com/memsh/memsh/sim/hf"
)

// What Falcon-H1 keeps for backward, against transformers 5.25.0 on
// PyTorch 2.15.0 (the CPU, no autocast), with the mamba_ssm kernel's
// autograd node standing in for the kernel the CPU lacks
// (tools/oracle/mamba2_kernel_saved.py: it keeps what
// MambaSplitConv1dScanCombinedFn keeps; everything around it runs as
// transformers runs it): falcon-h1-tiny.json (64 wide, 4 heads of 16, 2 kv
// heads, a mixer of 6 heads of 16, state 16, no gated norm, every
// multiplier off 1; untied) and falcon-h1-norm-tiny.json (the gated norm
// in 2 groups; tied), 2 samples of 32 tokens, 1 and 2 layers:
//
//	python tools/oracle/mamba2_kernel_saved.py sim/testdata/hf/FILE {1,2} 2 32 {float32,bfloat16} {sdpa,eager} nocache
//
// The harness counts each layer's mup_vector, a buffer the product by it
// keeps (1 x 1 x in_proj's outputs, in the parameters' dtype): model state in memsh
// (nn.Mamba2.MupVector), taken off its figures here. The mixer's and the
// attention's scaled inputs are two tensors in_proj and q, k, v_proj keep.
func TestFalconH1SavesAsTransformers(t *testing.T) {
	for _, tc := range []struct {
		file, precision, attn string
		mup                   int64 // mup_vector's channels: in_proj's outputs
		one, two              int64
	}{
		{"falcon-h1-tiny.json", "fp32", "sdpa", 230, 468172, 816276},
		{"falcon-h1-tiny.json", "fp32", "eager", 230, 516300, 912532},
		{"falcon-h1-tiny.json", "bf16", "sdpa", 230, 292864, 484092},
		{"falcon-h1-tiny.json", "bf16", "eager", 230, 349184, 596732},
		{"falcon-h1-norm-tiny.json", "fp32", "sdpa", 262, 477004, 833940},
		{"falcon-h1-norm-tiny.json", "fp32", "eager", 262, 525132, 930196},
		{"falcon-h1-norm-tiny.json", "bf16", "sdpa", 262, 297536, 493436},
	} {
		buffer := tc.mup * 4
		if tc.precision == "bf16" {
			buffer = tc.mup * 2
		}
		one, two := graniteSaved(t, tc.file, 1, tc.precision, tc.attn, false), graniteSaved(t, tc.file, 2, tc.precision, tc.attn, false)
		if one != tc.one-buffer || two != tc.two-2*buffer {
			t.Errorf("%s %s %s: 1 layer %d (%+d), 2 layers %d (%+d)", tc.file, tc.precision, tc.attn, one, one-tc.one+buffer, two, two-tc.two+2*buffer)
		}
	}
}

// Falcon-H1's parameters as transformers 5.25.0 counts them on the meta
// device: 137,572 (untied) and 125,796 (tied, the gated norm).
func TestFalconH1Params(t *testing.T) {
	for file, want := range map[string]int64{"falcon-h1-tiny.json": 137_572, "falcon-h1-norm-tiny.json": 125_796} {
		m, err := hf.FromConfig(readHF(t, file), "sdpa")
		if err != nil {
			t.Fatal(err)
		}
		if got := m.Params(); got != want {
			t.Errorf("%s: %d parameters, transformers %d", file, got, want)
		}
	}
}
