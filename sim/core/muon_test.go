package core

import (
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/units"
)

// TestMuonStepTemporariesAsTorch: the tensors alive at the peak of
// torch.optim.Muon's step of one matrix, as tools/oracle/muon_step.py
// measured them on the CPU (torch 2.15.0, a TorchDispatchMode recording
// every storage an op makes and when it dies; the step after the first,
// so the momentum buffer exists already):
//
//	256 x 1024 fp32, nesterov, 5 steps   2,359,296 B: lerp [256,1024] fp32, _to_copy bf16, addmm [256,1024] bf16, mm and addmm [256,256] bf16
//	1024 x 256 fp32, nesterov, 5 steps   2,359,296 B: the same, the iterate transposed to [256,1024]
//	512 x 512 bf16, nesterov, 5 steps    2,621,440 B: five [512,512] bf16 (the copy is made even in bf16: copy=True)
//	256 x 1024 fp32, no nesterov         1,310,720 B: no update tensor (it is the buffer)
//	384 x 640 fp32, nesterov, 1 step     2,555,904 B
//
// and the state: one momentum_buffer of the gradient's shape and dtype.
// The reference form (LLaMA-Factory's copy of K. Jordan's muon.py,
// src/llamafactory/third_party/muon/muon.py at ff6d4d12e, passed to the
// oracle: muon_step.py lf_muon.py) holds a * X, B @ X and their sum beside
// X, A and B at its peak:
//
//	256 x 1024 fp32, nesterov, 5 steps   3,407,872 B: add [256,1024] fp32, div, mul, mm, add [256,1024] bf16, mm and add [256,256] bf16
//	1024 x 256 fp32                      3,407,872 B
//	512 x 512 bf16                       3,670,016 B: seven [512,512] bf16 (G.bfloat16() of a bf16 update is no copy)
//	256 x 1024 fp32, no nesterov         2,359,296 B
//	384 x 640 fp32, 1 step               3,538,944 B
//	256 x 1024 bf16, nesterov            2,883,584 B
func TestMuonStepTemporariesAsTorch(t *testing.T) {
	for _, c := range []struct {
		ns         string
		rows, cols int64
		dt         units.DType
		nesterov   bool
		steps      int
		peak       int64
		iterate    []int64
	}{
		{"", 256, 1024, units.FP32, true, 5, 2_359_296, []int64{256, 1024}},
		{"", 1024, 256, units.FP32, true, 5, 2_359_296, []int64{256, 1024}},
		{"", 512, 512, units.BF16, true, 5, 2_621_440, []int64{512, 512}},
		{"", 256, 1024, units.FP32, false, 5, 1_310_720, []int64{256, 1024}},
		{"", 384, 640, units.FP32, true, 1, 2_555_904, []int64{384, 640}},
		{MuonReference, 256, 1024, units.FP32, true, 5, 3_407_872, []int64{256, 1024}},
		{MuonReference, 1024, 256, units.FP32, true, 5, 3_407_872, []int64{256, 1024}},
		{MuonReference, 512, 512, units.BF16, true, 5, 3_670_016, []int64{512, 512}},
		{MuonReference, 256, 1024, units.FP32, false, 5, 2_359_296, []int64{256, 1024}},
		{MuonReference, 384, 640, units.FP32, true, 1, 3_538_944, []int64{384, 640}},
		{MuonReference, 256, 1024, units.BF16, true, 5, 2_883_584, []int64{256, 1024}},
	} {
		o := Optimizer{Kind: Muon, Momentum: 0.95, Nesterov: c.nesterov, NSSteps: c.steps, NS: c.ns}
		if err := o.Validate(); err != nil {
			t.Fatal(err)
		}
		p := &ParamInfo{Name: "w", Shape: []int64{c.rows, c.cols}, Numel: c.rows * c.cols, Role: "q"}
		var peak int64
		temps := o.MuonStepTemporaries(p, c.dt)
		for _, tm := range temps {
			peak += tm.DType.Bytes(Numel(tm.Shape))
		}
		if peak != c.peak {
			t.Errorf("%q %dx%d %s nesterov=%v: step peak %d B, torch %d", c.ns, c.rows, c.cols, c.dt, c.nesterov, peak, c.peak)
		}
		if last := temps[len(temps)-1]; last.Shape[0] != c.iterate[0] || last.Shape[1] != c.iterate[1] {
			t.Errorf("%dx%d: the next iterate is %v, torch's %v", c.rows, c.cols, last.Shape, c.iterate)
		}
		st := o.ParamStates(p, c.dt)
		if l := st.List(); len(l) != 1 || l[0].Name != "momentum_buffer" || l[0].Bytes != c.dt.Bytes(p.Numel) {
			t.Errorf("%dx%d: states %v, want one momentum_buffer of %d B", c.rows, c.cols, l, c.dt.Bytes(p.Numel))
		}
	}
}

// TestMuonHybrid: Muon steps the 2-D matrices other than the embedding
// and the head; its AdamW the rest.
func TestMuonHybrid(t *testing.T) {
	o := Optimizer{Kind: Muon, Momentum: 0.95, Nesterov: true, NSSteps: 5}
	for _, c := range []struct {
		p    ParamInfo
		muon bool
	}{
		{ParamInfo{Shape: []int64{4096, 4096}, Numel: 4096 * 4096, Role: "q"}, true},
		{ParamInfo{Shape: []int64{14336, 4096}, Numel: 14336 * 4096, Role: "down"}, true},
		{ParamInfo{Shape: []int64{8, 4096}, Numel: 8 * 4096, Role: "lora_a"}, true},
		{ParamInfo{Shape: []int64{128256, 4096}, Numel: 128256 * 4096, Role: RoleEmbed}, false},
		{ParamInfo{Shape: []int64{128256, 4096}, Numel: 128256 * 4096, Role: RoleLMHead}, false},
		{ParamInfo{Shape: []int64{4096}, Numel: 4096, Role: "norm"}, false},
		{ParamInfo{Shape: []int64{8, 1024, 4096}, Numel: 8 * 1024 * 4096, Role: "expert_gate"}, false},
	} {
		if got := o.MuonMatrix(&c.p); got != c.muon {
			t.Errorf("%v %s: Muon's matrix %v, want %v", c.p.Shape, c.p.Role, got, c.muon)
		}
		st := o.ParamStates(&c.p, units.FP32)
		n := len(st.List())
		if want := map[bool]int{true: 1, false: 2}[c.muon]; n != want {
			t.Errorf("%v %s: %d state tensors, want %d", c.p.Shape, c.p.Role, n, want)
		}
	}
	if (Optimizer{Kind: AdamW}).MuonMatrix(&ParamInfo{Shape: []int64{4, 4}}) {
		t.Error("AdamW has no Muon matrices")
	}
}

func TestMuonErrors(t *testing.T) {
	for _, c := range []struct {
		o    Optimizer
		want string
	}{
		{Optimizer{Kind: Muon, NSSteps: 0}, "ns_steps must be in [1, 100)"},
		{Optimizer{Kind: Muon, NSSteps: 100}, "refuses 100 or more"},
		{Optimizer{Kind: Muon, NSSteps: 5, InBackward: true}, "in the backward is not modelled"},
		{Optimizer{Kind: AdamW, NSSteps: 5}, "are Muon's"},
		{Optimizer{Kind: AdamW, NS: MuonReference}, "are Muon's"},
		{Optimizer{Kind: Muon, NSSteps: 5, NS: "polar"}, `newton_schulz "polar" is not a form memsh knows`},
		{Optimizer{Kind: SGD, Nesterov: true}, "are Muon's"},
	} {
		err := c.o.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want %q", c.o, err, c.want)
		}
	}
}

// TestMuonGEMMs: X @ X.T, gram @ gram and gram_update @ X, whichever
// way the matrix lies.
func TestMuonGEMMs(t *testing.T) {
	want := [3][3]int64{{1024, 1024, 4096}, {1024, 1024, 1024}, {1024, 4096, 1024}}
	for _, s := range [][]int64{{1024, 4096}, {4096, 1024}} {
		if got := MuonGEMMs(s); got != want {
			t.Errorf("%v: %v, want %v", s, got, want)
		}
	}
}
