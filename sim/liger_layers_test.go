package sim

import (
	"slices"
	"strings"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/replay"
)

// TestLigerKernels counts Liger's RMSNorm and SwiGLU kernels by hand
// (sim/core/liger_layers.go) on a small Llama in bf16: 2 x 1,024 tokens,
// hidden 512 (X = 2,048 x 512: 2,097,152 bytes in bf16, 4,194,304 in
// fp32), MLP 1,376 (G = 2,048 x 1,376 x 2: 5,636,096 bytes), two layers.
//
//   - an eager RMSNorm saves the input's fp32 copy (4,194,304), the rsqrt
//     (2,048 x 4: 8,192) and the normalized input (2,097,152); Liger's
//     saves the input (2,097,152) and RSTD (8,192): 4,194,304 less;
//   - an eager SwiGLU saves the gate's output, its SiLU and the up
//     output (3 G); Liger's the gate and up outputs (2 G): G less;
//   - two norms and an MLP per layer, two layers and the final norm:
//     5 x 4,194,304 + 2 x 5,636,096 = 32,243,712 bytes less saved;
//   - the backward: the SwiGLU's gradients take the saved gate and up
//     outputs' place (freed, then the same sizes made); the final norm,
//     whose input nothing else reads, writes its input's gradient into
//     its output's and allocates only its weight's (512 x 2 bytes).
func TestLigerKernels(t *testing.T) {
	const g = 5_636_096
	m := testmodels.Llama(512, 2, 8, 2, 1376, 32000, "flash")
	p := testmodels.LlamaPlan(m, 2, 1024, "bf16", "none", "H100-80GB")
	eager := evalPlan(t, p)
	p.LigerKernels = true
	r, err := Evaluate(p, core.Options{Trace: true})
	if err != nil {
		t.Fatal(err)
	}
	if d := eager.SavedActivations - r.SavedActivations; d != 32_243_712 {
		t.Errorf("Liger's kernels save %d bytes less, want 32,243,712", d)
	}
	if got, want := opEvents(r.Trace, "layers.0.mlp.liger_swiglu", replay.PhaseBackward), []int64{-g, -g, g, g, -g}; !slices.Equal(got, want) {
		t.Errorf("SwiGLU backward %v, want %v", got, want)
	}
	var allocs []int64
	for _, e := range opEvents(r.Trace, "norm.liger_rms_norm", replay.PhaseBackward) {
		if e > 0 {
			allocs = append(allocs, e)
		}
	}
	if !slices.Equal(allocs, []int64{1024}) {
		t.Errorf("the final norm's backward allocates %v, want its weight's gradient only (1,024)", allocs)
	}
	if r.PeakAllocated >= eager.PeakAllocated {
		t.Errorf("peak %d with Liger's kernels, %d eager: want lower", r.PeakAllocated, eager.PeakAllocated)
	}
}

// TestLigerKernelsNothingToReplace: on a model with LayerNorm and a GELU
// MLP (GPT-2's layers) Liger's layer kernels replace nothing, so the step
// is the eager one and a note says so; on a Llama the note is absent.
func TestLigerKernelsNothingToReplace(t *testing.T) {
	const note = "liger_kernels=True: nothing here for Liger's layer kernels to replace"
	block := &core.Residual{Layer: &core.Sequential{Layers: []core.Layer{
		&nn.Norm{Name: "ln_2", Dim: 256},
		&nn.MLP{Name: "mlp", Dim: 256, Hidden: 1024, Act: "gelu"},
	}}}
	gpt := &core.Model{Name: "gpt", Layers: []core.Layer{
		&nn.Embedding{Name: "wte", Rows: 1000, Dim: 256},
		&core.Repeat{Name: "h", Layer: block, N: 2},
		&nn.Norm{Name: "ln_f", Dim: 256},
	}, Vocab: 1000, Loss: "cross_entropy"}
	llama := testmodels.Llama(256, 2, 4, 4, 688, 1000, "flash")
	for _, tc := range []struct {
		name     string
		m        *core.Model
		wantNote bool
	}{{"gpt", gpt, true}, {"llama", llama, false}} {
		t.Run(tc.name, func(t *testing.T) {
			p := testmodels.LlamaPlan(tc.m, 2, 128, "bf16-mixed", "none", "H100-80GB")
			eager := evalPlan(t, p)
			p.LigerKernels = true
			r := evalPlan(t, p)
			has := slices.ContainsFunc(r.Notes, func(n string) bool { return strings.HasPrefix(n, note) })
			if has != tc.wantNote {
				t.Errorf("note %q present %v, want %v (notes: %q)", note, has, tc.wantNote, r.Notes)
			}
			if tc.wantNote && (r.PeakAllocated != eager.PeakAllocated || r.SavedActivations != eager.SavedActivations) {
				t.Errorf("peak %d, saved %d with liger_kernels; eager %d, %d: want the same step", r.PeakAllocated, r.SavedActivations, eager.PeakAllocated, eager.SavedActivations)
			}
			if !tc.wantNote && r.SavedActivations >= eager.SavedActivations {
				t.Errorf("Llama saves %d with Liger's kernels, %d eager: want less", r.SavedActivations, eager.SavedActivations)
			}
		})
	}
}
