package sim

import (
	"os"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/hw"
)

// calibration.md B1: Hugging Face "GPU memory anatomy", bert-large-uncased
// with a 2-label classification head (335,143,938 params) on one
// V100-SXM2-16GB, seq 512, HF Trainer. Measured figure: NVML "used" after
// trainer.train(), in MiB: the caching allocator's reserved peak (the cache
// is not released) plus the CUDA context (row 0: 1,343 MiB).
//
// The Trainer of that time called model.zero_grad() with PyTorch < 2.0,
// whose default set_to_none=False keeps gradients allocated between steps
// (Plan.KeepGrads).
//
// Where memsh lands (device_used vs NVML):
//   - the micro-batch-1 rows (3, 4, 6, 8, 10) are within 3.4 %;
//   - the micro-batch-4 rows without checkpointing (2, 5, 7, 9) are 7-13 %
//     low. The gap grows with the batch (about 270 MiB per extra sample in
//     fp32, more under fp16 autocast), so it is per-sample activation or
//     allocator memory that the replay does not see. One candidate was
//     tried and ruled out: replaying a first step that creates the AdamW
//     state lazily inside blocks freed by step 1's activations, then the
//     steady-state step through the same allocator model, LOWERS reserved
//     memory here (best-fit reuse packs step 2 tighter), so it does not
//     explain the gap. Unverified without a GPU; the tolerance below
//     records the gap rather than hiding it.
type bertRow struct {
	row       int
	batch     int64
	accum     int64
	ckpt      string
	precision string
	optimizer core.Optimizer
	measured  int64   // MiB
	tol       float64 // accepted |relative error|
}

func TestBertLargeLadder(t *testing.T) {
	data, err := os.ReadFile("testdata/hf/bert-large-uncased.json")
	if err != nil {
		t.Fatal(err)
	}
	m, err := hf.FromConfigArch(data, "eager", "BertForSequenceClassification")
	if err != nil {
		t.Fatal(err)
	}
	if m.Params() != 335_143_938 {
		t.Fatalf("params %d", m.Params())
	}
	dev, err := hw.LookupDevice("V100-16GB")
	if err != nil {
		t.Fatal(err)
	}
	// HF Trainer's default optimizer then was transformers' own AdamW
	// ("adamw_hf"): a per-parameter loop (for-loop temporaries).
	adamw := core.Optimizer{Kind: core.AdamW, Impl: "for-loop"}
	rows := []bertRow{
		{2, 4, 1, "none", "fp32", adamw, 14949, 0.10},
		{3, 1, 4, "none", "fp32", adamw, 8681, 0.05},
		{4, 1, 4, "full", "fp32", adamw, 6775, 0.05},
		{5, 4, 1, "none", "fp16-mixed", adamw, 13939, 0.15},
		{6, 1, 4, "full", "fp16-mixed", adamw, 7275, 0.05},
		{7, 4, 1, "none", "fp32", core.Optimizer{Kind: core.Adafactor}, 12295, 0.10},
		{8, 1, 4, "full", "fp16-mixed", core.Optimizer{Kind: core.Adafactor}, 4847, 0.05},
		{9, 4, 1, "none", "fp32", core.Optimizer{Kind: core.AdamW8bit}, 13085, 0.15},
		{10, 1, 4, "full", "fp16-mixed", core.Optimizer{Kind: core.AdamW8bit}, 5363, 0.05},
	}
	rt, _ := core.LookupRuntime("cuda")
	for _, r := range rows {
		prec, _ := core.LookupPrecision(r.precision)
		ck, _ := core.ParseCheckpoint(r.ckpt)
		// Row 0's 1,343 MiB context was measured in the same runs: torch
		// 1.x of 2022 loading every kernel at start (V100's catalog
		// context is that eager figure, hw.Device.ContextEager).
		plan := &core.Plan{Model: m, Batch: r.batch, Seq: 512, GradAccum: r.accum, Members: 1, Precision: prec,
			Optimizer: r.optimizer, Checkpoint: ck, Device: dev, Runtime: rt, KeepGrads: true,
			RuntimeMemory: core.RuntimeMemory{ModuleLoading: "eager"}}
		rep, err := Evaluate(plan, core.Options{})
		if err != nil {
			t.Fatal(err)
		}
		got := float64(rep.DeviceUsed) / (1 << 20)
		diff := (got - float64(r.measured)) / float64(r.measured)
		if diff > r.tol || diff < -r.tol {
			t.Errorf("row %d: memsh %.0f MiB vs measured %d MiB (%+.1f%%), beyond %.0f%%", r.row, got, r.measured, 100*diff, 100*r.tol)
		}
		t.Logf("row %2d: measured %6d MiB, memsh %8.0f MiB (%+5.1f%%) reserved %.0f allocated %.0f peak at %s %s",
			r.row, r.measured, got, 100*diff, float64(rep.PeakReserved)/(1<<20), float64(rep.PeakAllocated)/(1<<20), rep.PeakAt.Phase, rep.PeakAt.Op)
	}
}
