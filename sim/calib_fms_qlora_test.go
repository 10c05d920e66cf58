package sim

import (
	"fmt"
	"math"
	"os"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/units"
)

// TestLlama70BQLoRAFSDP1 replays fms-acceleration's accelerated-peft-bnb
// rows (github.com/foundation-model-stack/fms-acceleration,
// scripts/benchmarks/refs/a100_80gb.csv at 0aab2c6) for Llama-2-70B
// (NousResearch/Llama-2-70b-hf), Mistral-7B-v0.1 and, on two GPUs,
// Mixtral-8x7B-Instruct-v0.1 on A100-80GBs: the setup of
// TestMixtralQLoRACalibration (bf16, nf4 with double quantization, LoRA
// r=16 alpha=16 dropout 0.1 on q, k, v, o, gradient checkpointing, flash
// attention, packed rows of 4,096 tokens, AdamW); the figure is
// mem_peak_torch_mem_alloc_in_bytes. On two GPUs accelerate runs FSDP1
// (scripts/benchmarks/accelerate.yaml: FULL_SHARD, TRANSFORMER_BASED_WRAP,
// BACKWARD_PRE) over the 4-bit codes stored in bf16
// (bnb_4bit_quant_storage).
//
// One GPU lands within 2 %; two GPUs under FSDP1 are short for every
// model: Mistral -14.8 and -16.2 % (batch 2 and 4), Mixtral -9.9 and
// -12.8 %, Llama-2-70B -22.5 % (memsh 36.2 GB, measured 46.7 GB). The
// runs end holding what memsh holds between steps
// (mem_torch_mem_alloc_in_bytes: 19.3 GB for the 70B), so the missing
// bytes are transient. They are in the training step, not in loading or
// FSDP1's initialisation: on two GPUs they grow with the batch (1.2 GB
// for Mistral, 1.5 GB for Mixtral per 8,192 more tokens, about 150 and
// 190 KB per token, where one GPU's rows scale as memsh does). The
// baseline-peft-bnb rows (TRL's preparation) peak at the same bytes on
// two GPUs as these (Llama 46,685,328,896 and Mistral 9,525,273,600 and
// 16,171,410,432 alike), while on one GPU they differ by gigabytes: under
// FSDP the two preparations run the same model, which says nothing about
// where the peak is. Per token the two-GPU gap is of the size of an fp32
// row of the 32,000-word logits (128 KB), but 70B's 10.5 GB at 8,192
// tokens is far more than that; what of accelerate's FSDP1 path holds it
// is not found yet. The bounds below are the measured gaps rounded up, so
// a change that widens them fails.
func TestLlama70BQLoRAFSDP1(t *testing.T) {
	dev, err := hw.LookupDevice("A100-80GB")
	if err != nil {
		t.Fatal(err)
	}
	rt, _ := core.LookupRuntime("cuda")
	ck, _ := core.ParseCheckpoint("full")
	prec := core.Precision{Name: "hf-bf16", Params: units.BF16, Compute: units.BF16, Grads: units.BF16, States: units.BF16, Autocast: true}
	models := map[string]*core.Model{}
	for _, tc := range []struct {
		config      string
		gpus, batch int64
		peak        int64 // bytes measured
		tolerance   float64
	}{
		{"llama-2-70b", 1, 4, 68_126_422_016, 0.10},
		{"llama-2-70b", 2, 2, 46_685_328_896, 0.23},
		{"mistral-7b-v0.1", 1, 4, 15_323_147_776, 0.10},
		{"mistral-7b-v0.1", 1, 8, 26_312_879_616, 0.10},
		{"mistral-7b-v0.1", 2, 2, 9_525_273_600, 0.15},
		{"mistral-7b-v0.1", 2, 4, 16_171_410_432, 0.17},
		{"mixtral-8x7b-v0.1", 2, 2, 21_766_241_792, 0.10},
		{"mixtral-8x7b-v0.1", 2, 4, 28_882_755_584, 0.13},
	} {
		m, ok := models[tc.config]
		if !ok {
			data, err := os.ReadFile("testdata/hf/" + tc.config + ".json")
			if err != nil {
				t.Fatal(err)
			}
			if m, err = hf.FromConfig(data, "flash"); err != nil {
				t.Fatal(err)
			}
			models[tc.config] = m
		}
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
		msg := fmt.Sprintf("%s, %d GPUs, batch %d: peak %.2f GB, measured %.2f GB (%+.1f %%)", tc.config, tc.gpus, tc.batch,
			float64(r.PeakAllocated)/1e9, float64(tc.peak)/1e9, 100*d)
		t.Log(msg)
		if math.Abs(d) > tc.tolerance {
			t.Error(msg)
		}
	}
}
