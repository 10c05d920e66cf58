package sim

import (
	"math"
	"os"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/units"
)

// TestLlama70BQLoRAFSDP1 replays fms-acceleration's accelerated-peft-bnb
// rows for Llama-2-70B (NousResearch/Llama-2-70b-hf) on A100-80GBs
// (github.com/foundation-model-stack/fms-acceleration,
// scripts/benchmarks/refs/a100_80gb.csv at 0aab2c6): the setup of
// TestMixtralQLoRACalibration (bf16, nf4 with double quantization, LoRA
// r=16 alpha=16 dropout 0.1 on q, k, v, o, gradient checkpointing, flash
// attention, packed rows of 4,096 tokens, AdamW); the figure is
// mem_peak_torch_mem_alloc_in_bytes. On two GPUs accelerate runs FSDP1
// (scripts/benchmarks/accelerate.yaml: FULL_SHARD, TRANSFORMER_BASED_WRAP,
// BACKWARD_PRE) over the 4-bit codes stored in bf16
// (bnb_4bit_quant_storage), per-device batch 2.
//
// One GPU, batch 4: -0.2 %. Two GPUs under FSDP1, batch 2: -22.5 %
// (memsh 36.2 GB, measured 46.7 GB). Both runs end holding what memsh
// holds between steps (mem_torch_mem_alloc_in_bytes: 37.2 and 19.3 GB), so
// the 10.5 GB are transient and FSDP1's: the gathered 4-bit layers are
// 0.4 GB each, too small to explain them; candidates not yet checked
// against the sources are the flat gradients FSDP1 allocates for a
// FlatParameter that mixes frozen base weights with the LoRA adapters
// (use_orig_params) and the reduce-scatter's padded buffers. A clue: the
// two-GPU baseline-peft-bnb row of the same file (TRL's preparation, fp32
// norms, which on one GPU at batch 4 runs out of memory where
// accelerated-peft-bnb peaks at 68.1 GB) peaks at the very same
// 46,685,328,896 bytes, so the two-GPU peak may not
// be in the training step at all (FSDP1's initialisation with
// sync_module_states and cpu_ram_efficient_loading, counted by
// max_memory_allocated too). The bound below is the measured gap rounded
// up, so a change that widens it fails.
func TestLlama70BQLoRAFSDP1(t *testing.T) {
	data, err := os.ReadFile("testdata/hf/llama-2-70b.json")
	if err != nil {
		t.Fatal(err)
	}
	m, err := hf.FromConfig(data, "flash")
	if err != nil {
		t.Fatal(err)
	}
	dev, err := hw.LookupDevice("A100-80GB")
	if err != nil {
		t.Fatal(err)
	}
	rt, _ := core.LookupRuntime("cuda")
	ck, _ := core.ParseCheckpoint("full")
	prec := core.Precision{Name: "hf-bf16", Params: units.BF16, Compute: units.BF16, Grads: units.BF16, States: units.BF16, Autocast: true}
	for _, tc := range []struct {
		gpus, batch int64
		peak        int64 // bytes measured
		tolerance   float64
	}{
		{1, 4, 68_126_422_016, 0.10},
		{2, 2, 46_685_328_896, 0.23},
	} {
		p := &core.Plan{Model: m, Batch: tc.batch, Seq: 4096, GradAccum: 1, Members: 1, Precision: prec,
			Optimizer: core.Optimizer{Kind: core.AdamW}, Checkpoint: ck, Device: dev, Phase: core.Train, Runtime: rt,
			LoRA:  &core.LoRA{Rank: 16, Alpha: 16, Targets: []string{"q", "k", "v", "o"}, Dropout: 0.1},
			Quant: "nf4-dq"}
		if tc.gpus > 1 {
			p.QuantStorage = units.BF16
			p.Parallel = core.Parallelism{DP: tc.gpus, FSDP: true, FSDPVersion: 1}
		}
		r := evalPlan(t, p)
		d := float64(r.PeakAllocated)/float64(tc.peak) - 1
		t.Logf("%d GPUs, batch %d: peak %.2f GB, measured %.2f GB (%+.1f %%)", tc.gpus, tc.batch, float64(r.PeakAllocated)/1e9, float64(tc.peak)/1e9, 100*d)
		if math.Abs(d) > tc.tolerance {
			t.Errorf("%d GPUs, batch %d: peak %.2f GB, measured %.2f GB (%+.1f %%)", tc.gpus, tc.batch, float64(r.PeakAllocated)/1e9, float64(tc.peak)/1e9, 100*d)
		}
	}
}
