package sim

import (
	"math"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/litgpt"
	"github.com/memsh/memsh/sim/units"
)

// The LitGPT resource tables (shared/research/calibration.md B4; source
// Lightning-AI/lit-gpt tutorials/resource-tables.md, measured with LitGPT
// 8641822, PyTorch 2.1.0, bitsandbytes 0.41.1 on one A100-SXM4-40GB):
// torch.cuda.max_memory_allocated()/1e9 over a finetune run whose first
// iteration uses the longest Alpaca sample (1304 tokens for Llama 2, 1044
// for phi-1.5, 1034 for StableLM-Alpha-3B, 1079 for Falcon), micro-batch
// padded to it, bf16-true, LoRA r=8 alpha=16 dropout 0.05 on query and
// value (finetune/lora.py), AdamW, or bitsandbytes PagedAdamW when
// quantized, no activation checkpointing, global batch 128. Rows 1-15 and
// 20-21 are the calibration.md rows; the "extra" rows are the other rows
// of the same LitGPT tables.
//
// What the replay models, from the sources (litgpt/litgpt.go, core/chunked_loss.go,
// core/quant.go), with no fitted constant:
//   - bf16 weights; rope cos/sin buffers are not counted (1304 x 128 fp32,
//     under 1.4 MB for two buffers, below the tolerance);
//   - the LoRA block's saved tensors: the dropout mask and output, the
//     conv1d input, zero_pad's index_copy source and index, flash
//     attention's q, k, qkv (v is a view of it), output and logsumexp,
//     RMSNorm's x and x^2 (torch 2.1 MeanBackward1 keeps its input:
//     runtime "cuda-2.1"), the MLP activations;
//   - the 128-token lm_head chunks, Fabric's conversion of every chunk to
//     fp32 after the forward (both lists alive at once), fp32 log_softmax
//     per chunk, the fp32 logits list alive until the step ends;
//   - bitsandbytes (quantized rows): nf4 codes + fp32 absmax per 64 values
//     (+ second level for nf4-dq) for every nn.Linear including lm_head,
//     MatMul4Bit keeping its input, each call dequantizing the weight to
//     fp16 (Lightning quantizes from .half()) and copying it to bf16, in
//     forward and again in backward; PagedAdamW state in unified memory,
//     outside max_memory_allocated.
//
// Gaps (model - measured), each explained:
//   - the replay is the steady state: the AdamW state of the LoRA weights
//     (bf16, 2 x 2 B per trainable parameter: 16.8 MB for Llama 2 7B) is
//     counted although the measured peak is in iteration 0, before the
//     first optimizer step; under 0.1 % in every bf16 row;
//   - quantized LoRA rows come out 1.8-2.7 % low: 0.10 GB for phi-1.5,
//     0.11 GB for StableLM, 0.27 GB for Llama 2 7B, 0.52 GB for 13B. In
//     units of one hidden-wide bf16 activation per block (tokens x hidden
//     x 2 B x layers: 0.10, 0.14, 0.34, 0.53 GB) that is 0.8-1.0 each, so
//     the measured runs keep about one more [tokens, hidden] bf16 tensor
//     per block than the replay does. It is specific to LoRA on a
//     quantized base: adapter v1 + nf4 (same MatMul4Bit lowering, no
//     LoRA) is +0.6 %, and the bf16 LoRA rows are within 0.3 %. Reading
//     bitsandbytes 0.41.1 (MatMul4Bit keeps A, dequantizes in forward and
//     backward) and lit_gpt/lora.py did not show which tensor it is, so no
//     term is added for it; the rows stay inside the 5 % goal.
//   - adapter v2 (extra rows only) is 2.7 % low: AdapterV2Linear's scale
//     and bias are lowered on every linear, but the prefix projection of
//     the adapter prompt goes through the plain qkv weight (no v2 scale).
func TestLitGPTResourceTable(t *testing.T) {
	dev, err := hw.LookupDevice("A100-40GB")
	if err != nil {
		t.Fatal(err)
	}
	prec, err := core.LookupPrecision("bf16-true")
	if err != nil {
		t.Fatal(err)
	}
	rt, err := core.LookupRuntime("cuda-2.1")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		row       string
		model     string
		adapter   string // "" = LoRA
		quant     string
		mb, seq   int64
		trainable int64
		gb        float64 // measured GB (1e9); 0 = OOM
	}{
		{"1", "phi-1_5", "", "", 1, 1044, 1_572_864, 4.82},
		{"2", "phi-1_5", "", "nf4", 1, 1044, 1_572_864, 3.78},
		{"3", "phi-1_5", "", "", 2, 1044, 1_572_864, 6.76},
		{"4", "phi-1_5", "", "", 4, 1044, 1_572_864, 10.68},
		{"5", "stablelm-base-alpha-3b", "", "", 1, 1034, 2_097_152, 9.69},
		{"6", "stablelm-base-alpha-3b", "", "", 4, 1034, 2_097_152, 16.92},
		{"7", "Llama-2-7b-hf", "", "", 1, 1304, 4_194_304, 21.30},
		{"8", "Llama-2-7b-hf", "", "nf4", 1, 1304, 4_194_304, 14.14},
		{"9", "Llama-2-7b-hf", "", "nf4-dq", 1, 1304, 4_194_304, 13.84},
		{"10", "Llama-2-7b-hf", "", "", 2, 1304, 4_194_304, 29.07},
		{"11", "Llama-2-7b-hf", "", "", 4, 1304, 4_194_304, 0},
		{"12", "Llama-2-13b-hf", "", "", 1, 1304, 6_553_600, 38.12},
		{"13", "Llama-2-13b-hf", "", "nf4", 1, 1304, 6_553_600, 23.14},
		{"14", "Llama-2-13b-hf", "", "", 2, 1304, 6_553_600, 0},
		{"15", "falcon-40b", "", "", 1, 1079, 12_042_240, 0},
		{"15 nf4", "falcon-40b", "", "nf4", 1, 1079, 12_042_240, 0},
		{"15 nf4-dq", "falcon-40b", "", "nf4-dq", 1, 1079, 12_042_240, 0},
		{"20", "Llama-2-7b-hf", "v1", "", 1, 1304, 1_229_760, 19.98},
		{"21", "Llama-2-7b-hf", "v2", "", 1, 1304, 4_279_744, 25.51},
		// the other rows of the same LitGPT tables
		{"extra", "phi-1_5", "", "nf4-dq", 1, 1044, 1_572_864, 3.72},
		{"extra", "stablelm-base-alpha-3b", "", "nf4", 1, 1034, 2_097_152, 6.35},
		{"extra", "stablelm-base-alpha-3b", "", "nf4-dq", 1, 1034, 2_097_152, 6.19},
		{"extra", "stablelm-base-alpha-3b", "", "", 2, 1034, 2_097_152, 12.10},
		{"extra", "Llama-2-13b-hf", "", "nf4-dq", 1, 1304, 6_553_600, 22.55},
		{"extra", "Llama-2-13b-hf", "", "", 4, 1304, 6_553_600, 0},
		{"extra", "stablelm-base-alpha-3b", "v1", "", 1, 1034, 573_888, 9.10},
		{"extra", "stablelm-base-alpha-3b", "v2", "", 1, 1034, 2_125_248, 10.71},
		{"extra", "Llama-2-7b-hf", "v1", "nf4", 1, 1304, 1_229_760, 12.68},
	} {
		c, err := litgpt.Lookup(tc.model)
		if err != nil {
			t.Fatal(err)
		}
		c.Adapter = tc.adapter
		m, err := litgpt.New(c)
		if err != nil {
			t.Fatal(err)
		}
		opt := core.Optimizer{Kind: core.AdamW}
		if tc.quant != "" {
			opt = core.Optimizer{Kind: core.PagedAdamW} // bnb.optim.PagedAdamW (finetune/lora.py)
		}
		p := &core.Plan{Model: m, Batch: tc.mb, Seq: tc.seq, GradAccum: 128 / tc.mb, Members: 1, Precision: prec, Optimizer: opt,
			Quant: tc.quant, QuantLMHead: tc.quant != "", QuantFrom: units.FP16, Device: dev, Phase: core.Train, Runtime: rt}
		if tc.adapter != "" {
			p.Freeze = []string{"all"} // mark_only_adapter_as_trainable
		} else {
			p.LoRA = &core.LoRA{Rank: 8, Alpha: 16, Targets: []string{"q", "v"}, Dropout: 0.05}
		}
		r, err := Evaluate(p, core.Options{})
		if err != nil {
			t.Fatalf("row %s: %v", tc.row, err)
		}
		if r.TrainableParams != tc.trainable {
			t.Errorf("row %s %s: trainable params %d, want %d", tc.row, tc.model, r.TrainableParams, tc.trainable)
		}
		got := float64(r.PeakAllocated) / 1e9
		if tc.gb == 0 {
			if r.OOM == nil || r.Fits {
				t.Errorf("row %s %s mb=%d %s: %.2f GB fits, measured OOM", tc.row, tc.model, tc.mb, tc.quant, got)
			}
			continue
		}
		if r.OOM != nil {
			t.Errorf("row %s %s: predicted OOM, measured %.2f GB", tc.row, tc.model, tc.gb)
			continue
		}
		if d := got/tc.gb - 1; math.Abs(d) > 0.05 {
			t.Errorf("row %s %s mb=%d %s%s: %.2f GB, measured %.2f GB (%+.1f %%)", tc.row, tc.model, tc.mb, tc.quant, tc.adapter, got, tc.gb, 100*d)
		}
	}
}

// TestLitGPTParams checks the LitGPT configs against the Hugging Face
// parameter counts (calibration.md A5 for Llama 2 7B; phi-1_5 and
// Llama-2-13b-hf from their safetensors index total_size / 2).
func TestLitGPTParams(t *testing.T) {
	for _, tc := range []struct {
		name string
		want int64
	}{
		{"phi-1_5", 1_418_270_720},
		{"Llama-2-7b-hf", 6_738_415_616},
		{"Llama-2-13b-hf", 13_015_864_320},
	} {
		c, err := litgpt.Lookup(tc.name)
		if err != nil {
			t.Fatal(err)
		}
		m, err := litgpt.New(c)
		if err != nil {
			t.Fatal(err)
		}
		if got := m.Params(); got != tc.want {
			t.Errorf("%s: %d params, want %d", tc.name, got, tc.want)
		}
	}
	if _, err := litgpt.Lookup("gpt-5"); err == nil || !strings.Contains(err.Error(), "unknown LitGPT checkpoint") {
		t.Errorf("unknown checkpoint: %v", err)
	}
}
