package sim

import (
	"os"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/units"
)

// TestShiftLogits: the causal-LM loss of transformers 4.x before its
// loss_function (core.Model.ShiftLogits; LlamaForCausalLM.forward at
// v4.40.0: logits = logits.float(), then shift_logits = logits[..., :-1,
// :].contiguous()). The model's output holds the logits upcast to fp32
// (what a loop that keeps the output keeps through the backward), and the
// cross-entropy reads an fp32 copy of all but the last position. At the
// loss's backward, its peak, the kept logits are fp32 rather than the
// compute dtype, and the loss's tensors one position shorter: the peak
// grows by batch x seq x vocab x 2 bytes, less the three fp32 loss tensors'
// last position (batch x vocab x 4 bytes each).
func TestShiftLogits(t *testing.T) {
	data, err := os.ReadFile("testdata/cuda_h200/configs/llama-3.2-1b.json")
	if err != nil {
		t.Fatal(err)
	}
	const vocab = 128_256
	for _, tc := range []struct {
		precision  string
		batch, seq int64
	}{
		{"bf16", 2, 2048},
		{"bf16", 4, 1024},
		{"bf16-mixed", 2, 2048},
	} {
		m, err := hf.FromConfigOptions(data, hf.Options{Attn: "sdpa"})
		if err != nil {
			t.Fatal(err)
		}
		p := &core.Plan{Model: m, Batch: tc.batch, Seq: tc.seq, GradAccum: 1, Members: 1, Precision: mustPrecision(t, tc.precision),
			Optimizer: core.Optimizer{Kind: core.AdamW}, Device: mustDevice(t, "H200"), Runtime: mustRuntime(t, "cuda"), KeepLogits: true}
		base := evalPlan(t, p)
		shifted := *m
		shifted.ShiftLogits = true
		q := *p
		q.Model = &shifted
		prog, err := q.LowerProgram()
		if err != nil {
			t.Fatal(err)
		}
		// The loop holds the fp32 logits; the loss reads a copy one
		// position shorter.
		if len(prog.HeldBackward) != 1 {
			t.Fatalf("%s %dx%d: %d values held through the backward, want the logits", tc.precision, tc.batch, tc.seq, len(prog.HeldBackward))
		}
		held := prog.Values[prog.HeldBackward[0]]
		if want := units.FP32.Bytes(tc.batch * tc.seq * vocab); held.Dtype != units.FP32 || held.Bytes != want {
			t.Errorf("%s %dx%d: the loop holds %s of %d B, want fp32 logits of %d B", tc.precision, tc.batch, tc.seq, held.Dtype.Name(), held.Bytes, want)
		}
		var shift int64
		for _, v := range prog.Values {
			if v.Name == "loss.shift_logits" {
				shift = v.Bytes
			}
		}
		if want := units.FP32.Bytes(tc.batch * (tc.seq - 1) * vocab); shift != want {
			t.Errorf("%s %dx%d: shift_logits %d B, want %d", tc.precision, tc.batch, tc.seq, shift, want)
		}
		r := evalPlan(t, &q)
		if base.PeakAt.Op != "loss.cross_entropy" || r.PeakAt.Op != "loss.cross_entropy" {
			t.Fatalf("%s %dx%d: peaks at %s and %s, want the loss's backward", tc.precision, tc.batch, tc.seq, base.PeakAt.Op, r.PeakAt.Op)
		}
		// Within 5 MiB: a request takes a block whole when less than 1
		// MiB of it would remain (kSmallSize in c10/cuda/
		// CUDACachingAllocator.cpp), which each of the four logits-sized
		// tensors at the peak (the kept logits, the saved
		// log-probabilities, the backward's temporary and its gradient)
		// may do, and one block beside them (TestKeepLogits).
		want := 2*tc.batch*tc.seq*vocab - 3*4*tc.batch*vocab
		if got := r.PeakAllocated - base.PeakAllocated; got < want-5<<20 || got > want+5<<20 {
			t.Errorf("%s %dx%d: the shifted loss adds %d B to the peak, want %d (within 5 MiB)", tc.precision, tc.batch, tc.seq, got, want)
		}
	}
}
