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
// The models are built as transformers 4.45.2 (the pinned release) builds
// them: its causal-LM loss upcasts the logits in the forward and copies
// all but the last position (TestShiftLogits); no row's peak is at the
// loss, so the peaks are those of the 4.57.1 default to the byte.
// TestMixtralQLoRACalibration's rows are a later commit's (24bdadb,
// transformers 4.48.1: the shift copy without the forward's upcast);
// there too the peaks are unchanged and the steps 0.02 s longer.
//
// The checkpointing is Hugging Face's: transformers 4.45.2's
// gradient_checkpointing_enable() asks for use_reentrant=True when no
// kwargs are given (modeling_utils.py), and TRL 0.11.4's SFTTrainer (or
// peft's prepare_model_for_kbit_training on one GPU) calls
// enable_input_require_grads() for it: checkpoint("full", reentrant=True,
// input_requires_grad=True) (scripts/benchmarks/refs/requirements.txt pins
// the versions). Under FSDP fms-hf-tuning wraps the PEFT model with peft's
// fsdp_auto_wrap_policy (tuning/sft_trainer.py at 398c2a8), every adapter a
// unit of its own, so the decoder layers' units are frozen and, with the
// reentrant checkpoint around them, FSDP1's reshard-only hook keeps every
// recomputed layer's input and its gradient until the backward ends
// (replay/fsdp1_reentrant.go): the peak moves to the first layer's
// backward. Without that rule the two-GPU rows were -22.5 % (Llama-2-70B:
// 80 layers x 8,192 tokens x 16 KB of gradients is the 10.5 GB missing),
// -14.7/-16.2 % (Mistral) and -9.9/-12.7 % (Mixtral), short by about 150
// (Mistral) and 190 KB (Mixtral) per token, where one GPU scaled as memsh
// does. The same CSV's standard-peft rows (bf16 LoRA, no bitsandbytes)
// hold as much more per token on two GPUs than on one (Mistral: 844 and
// 671 KB), which ruled out bitsandbytes; the
// baseline-peft-bnb rows peak at the same bytes as these on two GPUs
// (Llama 46,685,328,896; Mistral 9,525,273,600 and 16,171,410,432), as
// both run the same model under FSDP (TRL skips
// prepare_model_for_kbit_training for sharded QLoRA). Now every row is
// within 2.5 %.
func TestLlama70BQLoRAFSDP1(t *testing.T) {
	dev, err := hw.LookupDevice("A100-80GB")
	if err != nil {
		t.Fatal(err)
	}
	rt, _ := core.LookupRuntime("cuda")
	ck := core.Checkpoint{Mode: "full", Reentrant: true, InputGrad: true}
	prec := core.Precision{Name: "hf-bf16", Params: units.BF16, Compute: units.BF16, Grads: units.BF16, States: units.BF16, Autocast: true}
	models := map[string]*core.Model{}
	for _, tc := range []struct {
		config      string
		gpus, batch int64
		peak        int64   // bytes measured
		tolerance   float64 // the gap rounded up
	}{
		{"llama-2-70b", 1, 4, 68_126_422_016, 0.01},
		{"llama-2-70b", 2, 2, 46_685_328_896, 0.01},
		{"mistral-7b-v0.1", 1, 4, 15_323_147_776, 0.02},
		{"mistral-7b-v0.1", 1, 8, 26_312_879_616, 0.02},
		{"mistral-7b-v0.1", 2, 2, 9_525_273_600, 0.01},
		{"mistral-7b-v0.1", 2, 4, 16_171_410_432, 0.015},
		{"mixtral-8x7b-v0.1", 2, 2, 21_766_241_792, 0.01},
		{"mixtral-8x7b-v0.1", 2, 4, 28_882_755_584, 0.03},
	} {
		m, ok := models[tc.config]
		if !ok {
			data, err := os.ReadFile("testdata/hf/" + tc.config + ".json")
			if err != nil {
				t.Fatal(err)
			}
			if m, err = hf.FromConfigOptions(data, hf.Options{Attn: "flash", Transformers: "4.45.2"}); err != nil {
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

// TestFmsLoRAFSDP1 is the same CSV's standard-peft rows, held back while
// the FSDP1 rule above was found: bf16 Mistral-7B and Mixtral-8x7B with
// LoRA (r=16, alpha 16, dropout 0.1 on q, k, v, o), no bitsandbytes and no
// bf16 flag (torch_dtype bfloat16 alone: accelerate's mixed_precision
// "no", no autocast), the same checkpointing. On two GPUs fms-hf-tuning
// wraps every adapter as its own unit there too (fsdp_adapter_units=True),
// so the reshard-only hook keeps the layers' inputs and gradients as in
// the QLoRA rows. Adapters in their layers' units (Lightning's wrapping:
// each layer's flat gradient covers its frozen weights) put the two-GPU
// rows at +16.6 and -8.4 % (Mistral), +73.3 and +56.5 % (Mixtral). Now
// -2.4, -3.0, -1.6 and -1.8 %, one GPU -0.5 and -0.7 %: there peft 0.13
// keeps the bf16 model's adapters in fp32 (autocast_adapter_dtype) and
// casts their input to it, as memsh replays it (-0.8 and -1.0 % with bf16
// adapters); under FSDP1 memsh keeps them in bf16 (core.Plan.AdapterDType,
// docs/peft.md). Mixtral on one GPU ran out of memory.
func TestFmsLoRAFSDP1(t *testing.T) {
	dev, _ := hw.LookupDevice("A100-80GB")
	rt, _ := core.LookupRuntime("cuda")
	prec, _ := core.LookupPrecision("bf16")
	ck := core.Checkpoint{Mode: "full", Reentrant: true, InputGrad: true}
	models := map[string]*core.Model{}
	for _, tc := range []struct {
		config      string
		gpus, batch int64
		peak        int64   // mem_peak_torch_mem_alloc_in_bytes
		tolerance   float64 // the gap rounded up
	}{
		{"mistral-7b-v0.1", 1, 4, 25_653_881_344, 0.01},
		{"mistral-7b-v0.1", 1, 8, 36_643_613_184, 0.01},
		{"mistral-7b-v0.1", 2, 2, 15_245_549_568, 0.03},
		{"mistral-7b-v0.1", 2, 4, 22_161_170_432, 0.035},
		{"mixtral-8x7b-v0.1", 2, 2, 58_196_957_184, 0.02},
		{"mixtral-8x7b-v0.1", 2, 4, 65_592_615_936, 0.02},
	} {
		m, ok := models[tc.config]
		if !ok {
			data, err := os.ReadFile("testdata/hf/" + tc.config + ".json")
			if err != nil {
				t.Fatal(err)
			}
			if m, err = hf.FromConfigOptions(data, hf.Options{Attn: "flash", Transformers: "4.45.2"}); err != nil {
				t.Fatal(err)
			}
			models[tc.config] = m
		}
		p := &core.Plan{Model: m, Batch: tc.batch, Seq: 4096, GradAccum: 1, Members: 1, Precision: prec,
			Optimizer: core.Optimizer{Kind: core.AdamW}, Checkpoint: ck, Device: dev, Phase: core.Train, Runtime: rt,
			LoRA: &core.LoRA{Rank: 16, Alpha: 16, Targets: []string{"q", "k", "v", "o"}, Dropout: 0.1}}
		if tc.gpus > 1 {
			p.Parallel = core.Parallelism{DP: tc.gpus, FSDP: true, FSDPVersion: 1, AdapterUnits: true}
		}
		r := evalPlan(t, p)
		d := float64(r.PeakAllocated)/float64(tc.peak) - 1
		msg := fmt.Sprintf("%s LoRA, %d GPUs, batch %d: peak %.2f GB, measured %.2f GB (%+.1f %%)", tc.config, tc.gpus, tc.batch,
			float64(r.PeakAllocated)/1e9, float64(tc.peak)/1e9, 100*d)
		t.Log(msg)
		if math.Abs(d) > tc.tolerance {
			t.Error(msg)
		}
	}
}
