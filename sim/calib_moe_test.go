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

// TestMixtralQLoRACalibration replays fms-acceleration's QLoRA rows for
// Mixtral-8x7B-Instruct-v0.1 on one A100-80GB
// (github.com/foundation-model-stack/fms-acceleration,
// scripts/benchmarks/refs/a100_80gb.csv at 24bdadb, 2025-02-07;
// requirements.txt beside it: torch 2.4.1, transformers 4.48.1,
// bitsandbytes 0.43.3, peft 0.13.2, trl 0.13.0, flash-attn 2.7.3). The
// benchmark (scripts/benchmarks/scenarios.yaml, defaults.yaml,
// benchmark.py) trains with bf16=True, torch_dtype bfloat16, nf4 with
// double quantization (the plugin's BitsAndBytesConfig,
// bnb_4bit_use_double_quant=True), LoRA r=16 alpha=16 dropout 0.1 on q,
// k, v, o, gradient checkpointing, flash attention, packed rows of 4,096
// tokens (max_seq_len 4096, packing True), AdamW; the peak is
// torch.cuda.max_memory_allocated (mem_peak_torch_mem_alloc_in_bytes) and
// the step time train_runtime / max_steps (100).
//
// Two preparations of the same model:
//   - accelerated-peft-bnb: the plugin's own kbit preparation, bf16
//     throughout;
//   - baseline-peft-bnb (no_peft_model: True): TRL's SFTTrainer prepares
//     the model, peft's prepare_model_for_kbit_training upcasting the
//     non-quantized weights to fp32 and peft_module_casting_to_bf16
//     casting embeddings and lm_head back but not the norms: each norm's
//     output is fp32, so the MoE block's index-selected rows, its expert
//     outputs (Linear4bit casts its output back to its input's dtype)
//     and the residual stream from the second layer on are fp32:
//     precision norms=fp32.
//
// The experts are nn.Linear modules (transformers 4.48 MixtralSparseMoeBlock),
// so bitsandbytes quantizes all 256 of them and the router; before
// quant= reached the experts, memsh put the bs=4 accelerated row at
// 96.4 GiB (2.8 times the 34.2 GiB measured).
//
// Approximations, each small: gradient checkpointing is replayed
// non-reentrant (transformers asks for reentrant, with
// enable_input_require_grads; reentrant also keeps each block's output
// until its backward); the LoRA adapters are stored in bf16 (peft keeps
// fp32 adapters over a Linear4bit base: 13.6 M weights, about 0.1 GB
// more with their AdamW state); peft's defensive clone of each Linear4bit
// output is not replayed.
//
// Rows at bs=8 were not used to shape anything: they check that the
// saved activations scale.
func TestMixtralQLoRACalibration(t *testing.T) {
	data, err := os.ReadFile("testdata/hf/mixtral-8x7b-v0.1.json")
	if err != nil {
		t.Fatal(err)
	}
	// transformers 4.48.1, as requirements.txt at 24bdadb pins it (the
	// loss's fp32 shift copy; calib_fms_qlora_test.go's rows, at 0aab2c6,
	// ran 4.45.2)
	m, err := hf.FromConfigOptions(data, hf.Options{Attn: "flash", Transformers: "4.48.1"})
	if err != nil {
		t.Fatal(err)
	}
	dev, err := hw.LookupDevice("A100-80GB")
	if err != nil {
		t.Fatal(err)
	}
	rt, _ := core.LookupRuntime("cuda")
	ck, _ := core.ParseCheckpoint("full")
	for _, tc := range []struct {
		config   string
		batch    int64
		peak     int64   // bytes measured
		stepSecs float64 // train_runtime / 100
	}{
		{"accelerated-peft-bnb", 4, 36_731_843_072, 833.7459 / 100},
		{"accelerated-peft-bnb", 8, 48_770_183_680, 1556.2219 / 100},
		{"baseline-peft-bnb", 4, 42_794_268_160, 1072.2023 / 100},
		{"baseline-peft-bnb", 8, 60_545_920_512, 1938.6247 / 100},
	} {
		prec := core.Precision{Name: "hf-bf16", Params: units.BF16, Compute: units.BF16, Grads: units.BF16, States: units.BF16, Autocast: true}
		if tc.config == "baseline-peft-bnb" {
			prec.Norms = units.FP32
		}
		p := &core.Plan{Model: m, Batch: tc.batch, Seq: 4096, GradAccum: 1, Members: 1, Precision: prec,
			Optimizer: core.Optimizer{Kind: core.AdamW}, Checkpoint: ck, Device: dev, Phase: core.Train, Runtime: rt,
			LoRA:  &core.LoRA{Rank: 16, Alpha: 16, Targets: []string{"q", "k", "v", "o"}, Dropout: 0.1},
			Quant: "nf4-dq"}
		r := evalPlan(t, p)
		memErr := float64(r.PeakAllocated)/float64(tc.peak) - 1
		timeErr := r.Time.StepSeconds/tc.stepSecs - 1
		t.Logf("%s bs=%d: peak %.2f GB (measured %.2f, %+.1f %%), step %.2f s (measured %.2f, %+.1f %%)",
			tc.config, tc.batch, float64(r.PeakAllocated)/1e9, float64(tc.peak)/1e9, 100*memErr, r.Time.StepSeconds, tc.stepSecs, 100*timeErr)
		if math.Abs(memErr) > 0.06 { // the gaps rounded up
			t.Errorf("%s bs=%d: peak %.2f GB, measured %.2f GB (%+.1f %%, band 6 %%)", tc.config, tc.batch, float64(r.PeakAllocated)/1e9, float64(tc.peak)/1e9, 100*memErr)
		}
		if math.Abs(timeErr) > 0.08 {
			t.Errorf("%s bs=%d: step %.2f s, measured %.2f s (%+.1f %%, band 8 %%)", tc.config, tc.batch, r.Time.StepSeconds, tc.stepSecs, 100*timeErr)
		}
	}
}
