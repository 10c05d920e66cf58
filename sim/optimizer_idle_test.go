package sim

import (
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
)

// TestIdleTowerOptimizerState: a parameter the step never reaches gets no
// gradient and, under torch.optim, no optimizer state (replay's
// stateless): AdamW makes a parameter's exp_avg and exp_avg_sq in its
// first step() where p.grad is not None. Without images a vision-language
// model's towers (and Mllama's cross-attention layers) hold weights only;
// Gemma 4's audio tower always does (memsh models no audio input). The
// figures are transformers 5.25.0 and torch 2.15.0 on the CPU, fp32, one
// AdamW step, summed over optimizer.state and the parameters whose grad
// is set after backward:
//
//	/work/venv-t/bin/python tools/oracle/optim_state.py sim/testdata/hf/CONFIG 64
//
// (Gemma 4's image is one 64 x 64 image, gemma4vl_inputs.py's layout.)
func TestIdleTowerOptimizerState(t *testing.T) {
	for _, tc := range []struct {
		config  string
		params  int64
		im      core.Images
		accum   int64 // micro-batches: the gradients kept between them are those the step makes
		grads   int64 // elements with a gradient
		moments int64 // exp_avg + exp_avg_sq bytes
	}{
		{"gemma4-av-tiny.json", 793_844, core.Images{}, 1, 707_072, 5_656_576},
		{"gemma4-av-tiny.json", 793_844, core.Images{Count: 1, Height: 64, Width: 64}, 1, 735_552, 5_884_416},
		{"qwen2.5-vl-tiny.json", 198_304, core.Images{}, 1, 93_504, 748_032},
		{"qwen2.5-vl-tiny.json", 198_304, core.Images{}, 2, 93_504, 748_032},
		{"mllama-tiny.json", 279_499, core.Images{}, 1, 107_328, 858_624},
	} {
		p := visionPlan(t, tc.config, hf.Options{Attn: "sdpa", Transformers: "5.25.0"}, tc.params, "fp32")
		p.Images, p.GradAccum = tc.im, tc.accum
		st := evalPlan(t, p).States
		if want := 4 * tc.grads; st.Grads != want {
			t.Errorf("%s %v: gradients %d bytes, torch %d", tc.config, tc.im, st.Grads, want)
		}
		if st.Optimizer != tc.moments {
			t.Errorf("%s %v: optimizer state %d bytes, torch %d (%+d)", tc.config, tc.im, st.Optimizer, tc.moments, st.Optimizer-tc.moments)
		}
	}
}
