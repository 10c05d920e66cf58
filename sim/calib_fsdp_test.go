package sim

import (
	"math"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/litgpt"
)

// TestLitGPTFSDPCalibration reproduces calibration.md B4 rows 16-19: the
// LitGPT resource tables (LitGPT 8641822, PyTorch 2.1.0,
// torch.cuda.max_memory_allocated()/1e9 on A100-SXM4-40GB), LoRA r=8 on
// query and value, bf16-true, the longest Alpaca sample (1304 tokens),
// micro-batch 1 or 4 of a global batch 128, on 2 or 4 GPUs with
// Lightning's FSDPStrategy: FSDP1 (use_orig_params=True), one unit per
// Block and the root, activation checkpointing per Block, full sharding.
// The LitGPT model and its lowering are litgpt/litgpt.go's (calibrated on one GPU
// by TestLitGPTResourceTable).
//
// Why these rows hold about twice the sharded model (replay/fsdp1.go): the Block
// FlatParameters mix frozen weights and LoRA adapters, so each requires
// grad and its gradient is the whole Block; and finetune/lora.py
// accumulates 128/micro-batch micro-batches under
// fabric.no_backward_sync, FSDP's no_sync(), which keeps those gradients
// unsharded. A no_sync micro-batch (what memsh replays for grad_accum > 1)
// holds the shard of the parameters plus the unsharded gradient of every
// Block: 6.74 + 12.96 GB for Llama 2 7B on 2 GPUs. The root (embedding,
// final norm, head: all frozen) never gets a post-backward hook and stays
// gathered through the backward.
//
// Gaps: row 16 is -1.2 %, row 19 -1.6 %, row 17 +4.3 %. The replay is the
// steady state, where the accumulated gradients exist from the start of
// the micro-batch; the measured peak mixes iteration 0 (the 1304-token
// sample, whose gradients appear only during its backward) with later,
// shorter samples (all gradients present), so the replay over-counts by
// up to the activations of the 1304-token sample, which grow with the
// micro-batch: hence row 17 (micro-batch 4) is the one above. Row 18
// measured OOM; memsh puts it at 42.6 of 42.9 GB used (0.8 % free), within
// the accuracy of the neighbouring rows, so the test asks for less than
// the 5 % goal of free memory rather than a predicted OOM.
func TestLitGPTFSDPCalibration(t *testing.T) {
	dev, err := hw.LookupDevice("A100-40GB")
	if err != nil {
		t.Fatal(err)
	}
	prec, _ := core.LookupPrecision("bf16-true")
	rt, _ := core.LookupRuntime("cuda-2.1")
	ck, _ := core.ParseCheckpoint("full")
	for _, tc := range []struct {
		row      string
		model    string
		mb, gpus int64
		gb       float64 // measured, GB (1e9); 0 = OOM
	}{
		{"16", "Llama-2-7b-hf", 1, 2, 22.18},
		{"17", "Llama-2-7b-hf", 4, 2, 23.39},
		{"18", "Llama-2-13b-hf", 1, 2, 0},
		{"19", "Llama-2-13b-hf", 1, 4, 35.57},
	} {
		c, err := litgpt.Lookup(tc.model)
		if err != nil {
			t.Fatal(err)
		}
		m, err := litgpt.New(c)
		if err != nil {
			t.Fatal(err)
		}
		p := &core.Plan{Model: m, Batch: tc.mb, Seq: 1304, GradAccum: 128 / tc.mb, Members: 1, Precision: prec,
			Optimizer: core.Optimizer{Kind: core.AdamW}, Checkpoint: ck, Device: dev, Phase: core.Train, Runtime: rt,
			LoRA:     &core.LoRA{Rank: 8, Alpha: 16, Targets: []string{"q", "v"}, Dropout: 0.05},
			Parallel: core.Parallelism{DP: tc.gpus, FSDP: true, FSDPVersion: 1}}
		r := evalPlan(t, p)
		got := float64(r.PeakAllocated) / 1e9
		if tc.gb == 0 {
			if free := float64(r.Headroom) / float64(r.Capacity); free > 0.05 {
				t.Errorf("row %s: %.2f GB allocated, %.1f %% free; measured OOM", tc.row, got, 100*free)
			}
			continue
		}
		if d := (got - tc.gb) / tc.gb; math.Abs(d) > 0.05 {
			t.Errorf("row %s %s mb=%d on %d GPUs: %.2f GB, measured %.2f GB (%+.1f %%)", tc.row, tc.model, tc.mb, tc.gpus, got, tc.gb, 100*d)
		}
	}
}
