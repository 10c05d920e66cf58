package sim

import (
	"slices"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/replay"
)

// TestCublasWorkspaces counts cuBLAS's workspaces by hand (core/cublas.go,
// replay/cublas.go): one per thread that runs matmuls, each sized by
// CUBLAS_WORKSPACE_CONFIG or PyTorch's default for the GPU
// (CublasHandlePool.cpp parseChosenWorkspaceSize). A training step has
// the forward's and the autograd engine's backward thread's; made by the
// first step, the second comes at the first backward matmul (the
// Linear's: the MSE's backward runs none); an evaluation has one; PyTorch
// on the CPU none.
func TestCublasWorkspaces(t *testing.T) {
	const kib, mib = 1 << 10, 1 << 20
	pre := int64(4096*kib*2 + 16*kib*8) // 8,519,680 B (pytorch/pytorch#95668)
	for _, tc := range []struct {
		name, gpu, config string
		phase             core.Phase
		firstStep, cpu    bool
		want              []replay.Phase // the phase of each workspace's allocation
		size              int64
	}{
		{"A100 train", "A100-80GB", "", core.Train, false, false, []replay.Phase{replay.PhaseSetup, replay.PhaseSetup}, pre},
		{"H100 train", "H100-80GB", "", core.Train, false, false, []replay.Phase{replay.PhaseSetup, replay.PhaseSetup}, 32 * mib},
		{"B200 train", "B200", "", core.Train, false, false, []replay.Phase{replay.PhaseSetup, replay.PhaseSetup}, 32 * mib},
		{"MI300X train", "MI300X", "", core.Train, false, false, []replay.Phase{replay.PhaseSetup, replay.PhaseSetup}, 128 * mib},
		{"H100 :4096:2:16:8", "H100-80GB", ":4096:2:16:8", core.Train, false, false, []replay.Phase{replay.PhaseSetup, replay.PhaseSetup}, pre},
		{"A100 :4096:8", "A100-80GB", ":4096:8", core.Train, false, false, []replay.Phase{replay.PhaseSetup, replay.PhaseSetup}, 32 * mib},
		{"H100 first step", "H100-80GB", "", core.Train, true, false, []replay.Phase{replay.PhaseSetup, replay.PhaseBackward}, 32 * mib},
		{"H100 eval", "H100-80GB", "", core.Eval, false, false, []replay.Phase{replay.PhaseSetup}, 32 * mib},
		{"CPU", "H100-80GB", "", core.Train, false, true, nil, 0},
	} {
		m := &core.Model{Name: "lin", Layers: []core.Layer{&nn.Linear{In: 1024, Out: 4096}}, Loss: "mse"}
		dev, err := hw.LookupDevice(tc.gpu)
		if err != nil {
			t.Fatal(err)
		}
		p := &core.Plan{Model: m, Batch: 2, Seq: 512, GradAccum: 1, Members: 1, Phase: tc.phase, FirstStep: tc.firstStep,
			Precision: core.Precisions()[0], Optimizer: core.Optimizer{Kind: core.AdamW}, Device: dev,
			RuntimeMemory: core.RuntimeMemory{CublasWorkspaceConfig: tc.config}}
		p.Runtime.CPU = tc.cpu
		r, err := Evaluate(p, core.Options{Trace: true})
		if err != nil {
			t.Fatal(err)
		}
		var phases []replay.Phase
		for _, e := range r.Trace.Events {
			if e.Action == "alloc" && e.Tensor == "cuBLAS workspace" {
				phases = append(phases, e.Phase)
				if e.Size != tc.size {
					t.Errorf("%s: workspace of %d B, want %d", tc.name, e.Size, tc.size)
				}
				if tc.firstStep && e.Phase == replay.PhaseBackward && e.Op != "linear" {
					t.Errorf("%s: backward workspace at %s, want the Linear's backward", tc.name, e.Op)
				}
			}
		}
		if !slices.Equal(phases, tc.want) {
			t.Errorf("%s: workspaces allocated in %v, want %v", tc.name, phases, tc.want)
		}
	}
}

// TestCublasWorkspaceConfigErrors: CUBLAS_WORKSPACE_CONFIG that is not
// ":SIZE:COUNT" is an error (PyTorch warns and takes its default).
func TestCublasWorkspaceConfigErrors(t *testing.T) {
	for _, s := range []string{"4096:8", ":4096", "big", ":99999999999:8", ":4096:9999999"} {
		err := core.RuntimeMemory{CublasWorkspaceConfig: s}.Validate()
		if err == nil || !strings.Contains(err.Error(), "cublas_workspace_config") {
			t.Errorf("%q: error %v, want one naming cublas_workspace_config", s, err)
		}
	}
	if err := (core.RuntimeMemory{CublasWorkspaceConfig: ":16:8"}).Validate(); err != nil {
		t.Errorf(":16:8: %v", err)
	}
}

// TestCublasLtWorkspace: a Linear with a bias runs on cuBLASLt (addmm's
// bias epilogue), which takes a workspace of its own per thread: 1 MiB
// (CUBLASLT_WORKSPACE_SIZE's default, under the cuBLAS workspace), made
// at the first such call and kept. A Linear's backward is two mm and a
// sum: no second one. Without a bias there is none; a float8 linear's
// torch._scaled_mm runs on cuBLASLt in the forward and the backward: two.
// On ROCm (hipBLASLt) memsh models none.
func TestCublasLtWorkspace(t *testing.T) {
	const mib = 1 << 20
	stack := func(bias bool) *core.Model {
		block := &core.Sequential{Layers: []core.Layer{
			&nn.Linear{Name: "up", In: 1024, Out: 4096, Bias: bias},
			&nn.Linear{Name: "down", In: 4096, Out: 1024, Bias: bias},
		}}
		return &core.Model{Name: "stack", Layers: []core.Layer{&core.Repeat{Layer: block, N: 2}}, Loss: "mse", InputDim: 1024}
	}
	for _, tc := range []struct {
		name   string
		bias   bool
		float8 string
		gpu    string
		want   []int64
	}{
		{"no bias", false, "", "H100-80GB", nil},
		{"bias", true, "", "H100-80GB", []int64{mib}},
		{"float8", false, "tensorwise", "H100-80GB", []int64{mib, mib}},
		{"bias on ROCm", true, "", "MI300X", nil},
	} {
		p := distPlan(t, stack(tc.bias), "bf16-mixed", core.Parallelism{})
		p.Float8.Scaling = tc.float8
		p.Seq = 16 // a float8 grad_weight GEMM's tokens are a multiple of 16 (torch._scaled_mm)
		dev, err := hw.LookupDevice(tc.gpu)
		if err != nil {
			t.Fatal(err)
		}
		p.Device = dev
		rep, err := Evaluate(p, core.Options{Trace: true})
		if err != nil {
			t.Fatal(err)
		}
		var got []int64
		for _, e := range rep.Trace.Events {
			if e.Action == "alloc" && e.Tensor == "cuBLASLt workspace" {
				got = append(got, e.Size)
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: cuBLASLt workspaces %v, want %v", tc.name, got, tc.want)
		}
	}
}
