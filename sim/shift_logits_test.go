package sim

import (
	"os"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/units"
)

// TestShiftLogits: the causal-LM loss by transformers version
// (core.Model.ShiftLogits and ForwardUpcast, sim/hf/transformers.go).
// Before 4.46 the model's forward upcasts the logits (logits =
// logits.float()), so a loop that keeps the output keeps them in fp32;
// before 4.49 the loss copies all but the last position (shift_logits =
// logits[..., :-1, :].contiguous()), so its tensors are one position
// shorter; from 4.49 it pads the labels and reads the logits whole. At the
// loss's backward, the peak, the kept logits and the three fp32 loss
// tensors (the saved log-probabilities, the backward's temporary and the
// gradient) are live.
func TestShiftLogits(t *testing.T) {
	data, err := os.ReadFile("testdata/cuda_h200/configs/llama-3.2-1b.json")
	if err != nil {
		t.Fatal(err)
	}
	const vocab = 128_256
	for _, tc := range []struct {
		transformers     string
		shift, upcast    bool
		precision        string
		batch, seq       int64
		peakOver         func(b, s int64) int64 // over transformers 4.53.3's peak
		heldDType        units.DType
		heldBytesPerElem int64
	}{
		{"4.45.2", true, true, "bf16", 2, 2048, func(b, s int64) int64 { return 2*b*s*vocab - 3*4*b*vocab }, units.FP32, 4},
		{"4.45.2", true, true, "bf16-mixed", 4, 1024, func(b, s int64) int64 { return 2*b*s*vocab - 3*4*b*vocab }, units.FP32, 4},
		{"4.48.0", true, false, "bf16", 2, 2048, func(b, s int64) int64 { return -3 * 4 * b * vocab }, units.BF16, 2},
		{"4.49.0", false, false, "bf16", 2, 2048, func(b, s int64) int64 { return 0 }, units.BF16, 2},
	} {
		name := tc.transformers + " " + tc.precision
		plan := func(version string) *core.Plan {
			m, err := hf.FromConfigOptions(data, hf.Options{Attn: "sdpa", Transformers: version})
			if err != nil {
				t.Fatal(err)
			}
			return &core.Plan{Model: m, Batch: tc.batch, Seq: tc.seq, GradAccum: 1, Members: 1, Precision: mustPrecision(t, tc.precision),
				Optimizer: core.Optimizer{Kind: core.AdamW}, Device: mustDevice(t, "H200"), Runtime: mustRuntime(t, "cuda"), KeepLogits: true}
		}
		p := plan(tc.transformers)
		if p.Model.ShiftLogits != tc.shift || p.Model.ForwardUpcast != tc.upcast {
			t.Errorf("%s: shift %v upcast %v, want %v %v", name, p.Model.ShiftLogits, p.Model.ForwardUpcast, tc.shift, tc.upcast)
		}
		prog, err := p.LowerProgram()
		if err != nil {
			t.Fatal(err)
		}
		if len(prog.HeldBackward) != 1 {
			t.Fatalf("%s: %d values held through the backward, want the logits", name, len(prog.HeldBackward))
		}
		held := prog.Values[prog.HeldBackward[0]]
		if want := tc.heldBytesPerElem * tc.batch * tc.seq * vocab; held.Dtype != tc.heldDType || held.Bytes != want {
			t.Errorf("%s: the loop holds %s of %d B, want %s of %d", name, held.Dtype.Name(), held.Bytes, tc.heldDType.Name(), want)
		}
		var shift int64
		for _, v := range prog.Values {
			if v.Name == "loss.shift_logits" {
				shift = v.Bytes
			}
		}
		want := int64(0)
		if tc.shift {
			want = units.FP32.Bytes(tc.batch * (tc.seq - 1) * vocab)
		}
		if shift != want {
			t.Errorf("%s: shift_logits %d B, want %d", name, shift, want)
		}
		base, r := evalPlan(t, plan("4.53.3")), evalPlan(t, p) // 4.53.3 expands k and v too (gqa_sdpa_test.go)
		if base.PeakAt.Op != "loss.cross_entropy" || r.PeakAt.Op != "loss.cross_entropy" {
			t.Fatalf("%s: peaks at %s and %s, want the loss's backward", name, base.PeakAt.Op, r.PeakAt.Op)
		}
		// Within 5 MiB: a request takes a block whole when less than 1
		// MiB of it would remain (kSmallSize in c10/cuda/
		// CUDACachingAllocator.cpp), which each of the four logits-sized
		// tensors at the peak may do, and one block beside them
		// (TestKeepLogits).
		d := tc.peakOver(tc.batch, tc.seq)
		if got := r.PeakAllocated - base.PeakAllocated; got < d-5<<20 || got > d+5<<20 {
			t.Errorf("%s: the peak is %d B over 4.53.3's, want %d (within 5 MiB)", name, got, d)
		}
	}
}

// TestShiftLogitsFamilies: the families whose causal-LM loss differs from
// Llama's (sim/hf/transformers.go useLoss, each read in the transformers
// wheels named there): GPT-2, OPT, BLOOM, Falcon and GPT-NeoX shift their
// logits in the model's dtype and never upcast them before 4.49; Mamba and
// Mamba-2 upcast in the forward in every release and shift until 5.17 and
// 4.52; Mllama upcasts in the forward in every release.
func TestShiftLogitsFamilies(t *testing.T) {
	for _, tc := range []struct {
		config, transformers    string
		shift, upcast, logits32 bool
		shiftDType              units.DType // of loss.shift_logits under bf16
	}{
		{"gpt2.json", "4.45.2", true, false, false, units.BF16},
		{"gpt2.json", "4.48.0", true, false, false, units.BF16},
		{"gpt2.json", "4.49.0", false, false, true, 0},
		{"opt-125m.json", "4.40.0", true, false, false, units.BF16},
		{"pythia-160m.json", "4.46.0", true, false, false, units.BF16},
		{"bloom-560m.json", "4.57.1", false, false, true, 0},
		{"falcon-7b.json", "4.44.0", true, false, false, units.BF16},
		{"llama-2-7b.json", "4.45.2", true, true, true, units.FP32},
		{"mamba-130m-hf.json", "4.57.1", true, true, true, units.FP32},
		{"mamba-130m-hf.json", "5.16.0", true, true, true, units.FP32},
		{"mamba-130m-hf.json", "5.17.0", false, true, true, 0},
		{"mamba-codestral-7b.json", "4.51.0", true, true, true, units.FP32},
		{"mamba-codestral-7b.json", "4.52.1", false, true, true, 0},
		{"mllama-tiny.json", "4.57.1", false, true, true, 0},
		{"mllama-tiny.json", "4.46.0", true, true, true, units.FP32},
	} {
		name := tc.config + " " + tc.transformers
		data, err := os.ReadFile("testdata/hf/" + tc.config)
		if err != nil {
			t.Fatal(err)
		}
		m, err := hf.FromConfigOptions(data, hf.Options{Attn: "sdpa", Transformers: tc.transformers})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if m.ShiftLogits != tc.shift || m.ForwardUpcast != tc.upcast || m.LogitsFP32 != tc.logits32 {
			t.Errorf("%s: shift %v, forward upcast %v, logits fp32 %v; want %v %v %v", name,
				m.ShiftLogits, m.ForwardUpcast, m.LogitsFP32, tc.shift, tc.upcast, tc.logits32)
		}
		p := &core.Plan{Model: m, Batch: 1, Seq: 64, GradAccum: 1, Members: 1, Precision: mustPrecision(t, "bf16"),
			Optimizer: core.Optimizer{Kind: core.AdamW}, Device: mustDevice(t, "H200"), Runtime: mustRuntime(t, "cuda")}
		prog, err := p.LowerProgram()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var found bool
		for _, v := range prog.Values {
			if v.Name != "loss.shift_logits" {
				continue
			}
			found = true
			if want := tc.shiftDType.Bytes(63 * m.Vocab); v.Dtype != tc.shiftDType || v.Bytes != want {
				t.Errorf("%s: shift_logits %s of %d B, want %s of %d", name, v.Dtype.Name(), v.Bytes, tc.shiftDType.Name(), want)
			}
		}
		if found != tc.shift {
			t.Errorf("%s: a shift_logits copy %v, want %v", name, found, tc.shift)
		}
	}
}
