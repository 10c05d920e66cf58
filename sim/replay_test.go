package sim

import (
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/replay"
)

// A hand-checked step: one fp32 Linear(1024 -> 4096) with an MSE loss,
// AdamW (foreach) on a device with the pre-Hopper cuBLAS workspace.
func TestReplayLinearByHand(t *testing.T) {
	const MiB = 1 << 20
	m := &core.Model{Name: "lin", Layers: []core.Layer{&nn.Linear{In: 1024, Out: 4096}}, Loss: "mse"}
	plan := &core.Plan{Model: m, Batch: 2, Seq: 512, GradAccum: 1, Members: 1,
		Precision: core.Precisions()[0], Optimizer: core.Optimizer{Kind: core.AdamW},
		Device: hw.Device{Name: "test", Memory: 80 << 30}}
	rep, err := Evaluate(plan, core.Options{Timeline: true})
	if err != nil {
		t.Fatal(err)
	}
	// params 16 MiB, AdamW moments 32 MiB, two cuBLAS workspaces of
	// 8,519,680 B (the forward's thread's and the autograd engine's
	// backward thread's), input 4 MiB; peak in the loss backward: the saved
	// output (16 MiB) and its gradient (16 MiB) are live at once, plus the
	// loss and its seed gradient (512 B blocks each).
	want := int64(84*MiB + 2*8_519_680 + 1024)
	if rep.PeakAllocated != want {
		t.Errorf("peak allocated %d, want %d", rep.PeakAllocated, want)
	}
	if rep.PeakAt.Phase != replay.PhaseBackward || rep.PeakAt.Op != "loss.mse" {
		t.Errorf("peak at %+v, want backward loss.mse", rep.PeakAt)
	}
	if rep.SavedActivations != 20*MiB { // the input (saved by the matmul) and the output (saved by mse)
		t.Errorf("saved activations %d, want %d", rep.SavedActivations, 20*MiB)
	}
	wantStates := replay.States{Params: 16 * MiB, Grads: 16 * MiB, Optimizer: 32 * MiB}
	if rep.States != wantStates {
		t.Errorf("states %+v, want %+v", rep.States, wantStates)
	}
	if rep.Largest.Bytes != 16*MiB {
		t.Errorf("largest %d, want 16 MiB", rep.Largest.Bytes)
	}
	if !rep.Fits || rep.OOM != nil {
		t.Errorf("must fit: %+v", rep.OOM)
	}
	if len(rep.Timeline) == 0 || rep.Timeline[len(rep.Timeline)-1].Phase != replay.PhaseOptimizer {
		t.Errorf("timeline must end in the optimizer step")
	}
	var sum int64
	for _, s := range rep.Categories() {
		sum += s.Bytes
	}
	if sum != rep.PeakAllocated {
		t.Errorf("breakdown sums to %d, peak is %d", sum, rep.PeakAllocated)
	}
}

// Full checkpointing never raises saved activations, and its recompute
// shows in backward.
func TestCheckpointLowersSavedActivations(t *testing.T) {
	m := testmodels.Llama(1024, 4, 16, 4, 2816, 32000, "flash")
	none := testmodels.LlamaPlan(m, 2, 1024, "bf16-mixed", "none", "A100-80GB")
	full := testmodels.LlamaPlan(m, 2, 1024, "bf16-mixed", "full", "A100-80GB")
	a, err := Evaluate(none, core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Evaluate(full, core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if b.SavedActivations >= a.SavedActivations {
		t.Errorf("full checkpointing saved %d >= none %d", b.SavedActivations, a.SavedActivations)
	}
	if b.FLOPs.Recompute <= 0 || a.FLOPs.Recompute != 0 {
		t.Errorf("recompute FLOPs: none %g, full %g", a.FLOPs.Recompute, b.FLOPs.Recompute)
	}
	if b.PeakAllocated >= a.PeakAllocated {
		t.Errorf("full checkpointing peak %d >= none %d", b.PeakAllocated, a.PeakAllocated)
	}
}

func TestOOMMessageInPyTorchWords(t *testing.T) {
	m := testmodels.Llama(8192, 80, 64, 8, 28672, 128256, "flash")
	rep, err := Evaluate(testmodels.LlamaPlan(m, 1, 4096, "bf16-mixed", "full", "H100-80GB"), core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Fits || rep.OOM == nil {
		t.Fatal("a 70B model with AdamW cannot fit one 80 GB GPU")
	}
	want := "CUDA out of memory. Tried to allocate "
	if got := rep.OOM.Message; len(got) < len(want) || got[:len(want)] != want {
		t.Errorf("message %q", got)
	}
	if rep.OOM.Alloc.Phase != replay.PhaseSetup {
		t.Errorf("a 70B model runs out while allocating its state, got %s", rep.OOM.Alloc.Phase)
	}
}
