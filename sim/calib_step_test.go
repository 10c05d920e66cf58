package sim

import (
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/timing"
	"github.com/memsh/memsh/sim/units"
)

// Step time against published runs (issue 20). Each row is one published
// training run written down as a memsh plan: the figure as published
// (tokens/s per GPU, TFLOP/s per GPU), the step time it implies, and every
// assumption made to write the run down. Rows marked heldOut were kept
// out of the calibration: nothing in the time model was looked at against
// them before they were added, so their errors show how the model
// generalises. The time model's constants come from kernel benchmarks
// (sim/hw/kernels.go, sim/timing) and are not fitted to any row.

// stepRow is a published run.
type stepRow struct {
	name    string
	source  string
	heldOut bool
	heavy   bool // a large pipeline: skipped with -short
	// excluded says why a published row is printed but not counted: a run
	// memsh cannot write down faithfully.
	excluded string
	// miss says why a counted row is known to land beyond 25 %: the test
	// prints it and counts it in the median, and fails if it lands within
	// 25 % (the note is then stale) or any other row lands beyond.
	miss     string
	plan     func() *core.Plan
	measured float64 // seconds per step, as the source's figure implies
}

// median is the median of xs (sorted in place).
func median(xs []float64) float64 {
	sort.Float64s(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

// stepFromTPS is the step time of a run of gpus GPUs processing tokens
// tokens per step at tps tokens/s per GPU.
func stepFromTPS(tokens, gpus, tps float64) float64 { return tokens / (gpus * tps) }

// MosaicML's MPT models (llm-foundry scripts/train/yamls/pretrain/mpt-*.yaml:
// d_model, n_heads, n_layers; expansion ratio 4, GELU, vocabulary 50,368,
// learned positions in the benchmarks' NumParams, tied embedding), as
// gptModel builds a GPT (it adds biases MPT leaves out, under 0.1 % of the
// FLOPs).
var mptSizes = map[string][3]int64{
	"125m": {768, 12, 12}, "350m": {1024, 16, 24}, "760m": {1536, 12, 24}, "1b": {2048, 16, 24},
	"3b": {2560, 20, 32}, "7b": {4096, 32, 32}, "13b": {5120, 40, 40}, "30b": {7168, 56, 48}, "70b": {8192, 64, 80},
}

// mosaicPlan is an llm-foundry benchmark run (scripts/train/benchmarking/
// README.md @061f2c7): FSDP FULL_SHARD over gpus GPUs (Composer's FSDP 1),
// flash attention, micro-batch mb, grad_accum ga, amp_bf16 (autocast over
// fp32 weights: "bf16-mixed") or bf16 PURE ("bf16"), activation
// checkpointing on or off, AdamW (decoupled, Composer's; the foreach
// step). The attention is priced as FlashAttention-2: the benchmark
// script's default attn_impl is triton (submit_benchmarks.py @061f2c7),
// flash-attn's 2022 Triton kernel, but at that kernel's published rate
// (FlashAttention-2 paper, figure 4) the A100 MPT-13B 8k row could not
// reach its published throughput (docs/time.md, "Why the Ampere rows
// split"), so which kernel the runs used is not established.
// The loss is flash-attn's fused cross-entropy, MPT's default
// (loss_fn "fused_crossentropy", llmfoundry/models/mpt/modeling_mpt.py
// at 061f2c7; setup.py pins xentropy-cuda-lib from flash-attention
// v1.0.9), over the bf16 logits as the tied head writes them.
func mosaicPlan(size string, seq, gpus, mb, ga int64, precision string, ckpt bool, dev string) *core.Plan {
	s := mptSizes[size]
	m := gptModel(s[0], s[2], s[1], 50368, seq, "flash")
	m.Loss = core.FlashCE
	ck := "none"
	if ckpt {
		ck = "full"
	}
	p := testmodels.LlamaPlan(m, mb, seq, precision, ck, dev)
	// The tables are of 2023 (flash-attn 1.0.9's xentropy, below): a torch
	// before 2.1, whose checkpoint recomputes the whole block (the early
	// stop, set_checkpoint_early_stop, came with 2.1's non-reentrant
	// checkpoint; core.Program.RecomputeEnd).
	p.Checkpoint.NoEarlyStop = true
	p.GradAccum = ga
	p.Parallel = core.Parallelism{DP: gpus, FSDP: true, FSDPVersion: 1,
		// Composer wraps no FSDP model in no_sync: every micro-batch
		// reduce-scatters (composer/trainer/dist_strategy.py @v0.16.4,
		// ddp_sync_context returns at once for a model that is not DDP).
		SyncEachBatch: true,
		// backward_prefetch unset by the benchmark script
		// (submit_benchmarks.py @061f2c7 l.87-91, l.348) is Composer's
		// BACKWARD_POST (dist_strategy.py @v0.16.4 l.135).
		BackwardPrefetch: core.PrefetchPost}
	if precision == "bf16-mixed" {
		// fsdp_config mixed_precision DEFAULT: param_dtype the autocast
		// dtype, reduce_dtype float32 (composer/trainer/
		// mosaic_fsdp_utils.py @v0.16.4, get_mixed_precision); PURE
		// reduces in bf16, FSDP1's default.
		p.Parallel.FSDPReduceDType = units.FP32
	}
	// Composer's trainer updates the model's two train metrics on every
	// micro-batch's logits after its backward (core.Overheads.TrainMetrics),
	// and the pretraining yamls clip gradients (algorithms:
	// gradient_clipping, clipping_type norm, clipping_threshold 1.0).
	p.Overheads.TrainMetrics = 2
	p.Overheads.ClipGradNorm = 1
	return p
}

// mosaicRow is one row of the llm-foundry tables: its tokens/s per GPU.
func mosaicRow(table, size string, seq, gpus, mb, ga int64, precision string, ckpt bool, dev string, tps float64, held bool) stepRow {
	var excluded string
	if seq >= 32768 {
		// The benchmark script's default is attn_impl: triton (flash-attn's
		// 2022 Triton kernel; mosaicPlan); at 32k tokens and more attention
		// is most of the step, and which kernel ran is not established.
		excluded = "attn_impl: triton by default, the kernel that ran not established; attention is most of the step at this length"
	}
	return stepRow{
		excluded: excluded,
		name:     fmt.Sprintf("MPT-%s seq %d, %d x %s, mb %d x %d%s", size, seq, gpus, dev, mb, ga, map[bool]string{true: ", AC", false: ""}[ckpt]),
		source:   "mosaicml/llm-foundry scripts/train/benchmarking/README.md @061f2c7, " + table + fmt.Sprintf(", row %s %d %d GPUs: %.0f T/s/GPU", size, seq, gpus, tps),
		heldOut:  held,
		plan:     func() *core.Plan { return mosaicPlan(size, seq, gpus, mb, ga, precision, ckpt, dev) },
		measured: stepFromTPS(float64(seq*gpus*mb*ga), float64(gpus), tps),
	}
}

// stepRows are the published runs.
func stepRows() []stepRow {
	const h100, a100, a10040 = "H100 80GB BF16", "A100 80GB", "A100 40GB"
	rows := []stepRow{
		mosaicRow(h100, "1b", 2048, 8, 14, 1, "bf16-mixed", false, "H100-80GB", 45455, false),
		mosaicRow(h100, "3b", 4096, 8, 5, 6, "bf16-mixed", false, "H100-80GB", 20964, false),
		mosaicRow(h100, "7b", 2048, 8, 6, 1, "bf16-mixed", false, "H100-80GB", 10643, false),
		mosaicRow(h100, "7b", 8192, 8, 8, 2, "bf16-mixed", true, "H100-80GB", 6935, false),
		mosaicRow(h100, "7b", 65536, 8, 1, 2, "bf16-mixed", true, "H100-80GB", 1956, false),
		mosaicRow(h100, "13b", 4096, 8, 10, 3, "bf16-mixed", true, "H100-80GB", 4717, false),
		mosaicRow(h100, "1b", 32768, 8, 1, 4, "bf16-mixed", false, "H100-80GB", 12025, false),
		mosaicRow(h100, "30b", 2048, 8, 3, 21, "bf16-mixed", true, "H100-80GB", 2002, false),
		mosaicRow(a100, "125m", 2048, 8, 40, 2, "bf16-mixed", false, "A100-80GB", 142830, false),
		mosaicRow(a100, "350m", 8192, 8, 8, 2, "bf16-mixed", false, "A100-80GB", 36569, false),
		mosaicRow(a100, "1b", 2048, 8, 14, 4, "bf16-mixed", false, "A100-80GB", 20513, false),
		mosaicRow(a100, "3b", 8192, 8, 3, 6, "bf16-mixed", false, "A100-80GB", 7695, false),
		mosaicRow(a100, "7b", 2048, 8, 6, 2, "bf16-mixed", false, "A100-80GB", 4641, false),
		mosaicRow(a100, "7b", 32768, 8, 2, 2, "bf16-mixed", true, "A100-80GB", 1672, false),
		mosaicRow(a100, "13b", 8192, 8, 5, 3, "bf16-mixed", true, "A100-80GB", 1795, false),
		mosaicRow(a100, "30b", 4096, 8, 1, 21, "bf16-mixed", true, "A100-80GB", 814, false),
		// Held out: the A100 40GB table (bf16 PURE).
		mosaicRow(a10040, "7b", 4096, 8, 6, 4, "bf16", true, "A100-40GB", 3366, true),
		mosaicRow(a10040, "3b", 8192, 8, 1, 8, "bf16", false, "A100-40GB", 7149, true),
		mosaicRow(a10040, "13b", 2048, 32, 14, 1, "bf16", true, "A100-40GB", 1998, true),
	}
	rows = append(rows, megatronRows()...)
	rows = append(rows, llama3Rows()...)
	rows = append(rows, torchtitanRows()...)
	fp16 := bertStepRow(4, "fp16-mixed", 27.46)
	// The fp16 row was -31.5 % until BERT's extended attention mask was
	// lowered (TestBERTExtendedMask): under autocast the fp32 mask promotes
	// the scores, so the mask add, softmax and dropout stream fp32 and the
	// P.V matmul casts after dropout (and eager attention's scale and
	// softmax now read their inputs as well as writing their outputs):
	// fp16 -31.5 -> -20.0 %, fp32 +7.9 -> +13.4 %. What remains has the
	// shape of the V100's GEMM efficiencies (memsh's fp32 GEMMs are slower
	// and its fp16 tensor-core GEMMs faster than the run's; no V100 curve
	// at BERT-large's shapes is published). Ruled out before: autocast's
	// CPU dispatch (TestBERTFP16MissIsNotDispatch: at batch 4 the GPU's
	// work is over seven times memsh's dispatch). Priced since: the HF
	// Trainer's gradient clipping (max_grad_norm 1.0), GradScaler's
	// unscale_ and the in-place zero_grad (sim/timing/gradients.go).
	rows = append(rows, mixtralRow(), bertStepRow(4, "fp32", 57.82), fp16)
	rows = append(rows, torchtuneRows()...)
	return rows
}

// megatronFLOPs is Narayanan et al. 2021 (arXiv:2104.04473) equation 3:
// the FLOPs of one iteration of batch B with full recomputation,
// 96 B s l h^2 (1 + s/(6h) + V/(16 l h)).
func megatronFLOPs(batch, seq, layers, hidden, vocab float64) float64 {
	return 96 * batch * seq * layers * hidden * hidden * (1 + seq/(6*hidden) + vocab/(16*layers*hidden))
}

// megatronRows are Narayanan et al. 2021, Table 1 (weak scaling of GPT on
// Selene's A100-80GB, sequence 2048, vocabulary 51,200): achieved TFLOP/s
// per GPU as the Megatron-LM README prints them (images/
// cases_april2021.png at 6985e58938), written down as the paper's own run
// scripts run them (examples/sc21/run_table_1.sh and CONFIG.sh at
// Megatron-LM 6985e58938, 2021-08-18): the micro-batch (MBS) and the
// data-parallel implementation (--DDP-impl) of each size, every layer
// recomputed (--activations-checkpoint-method uniform), the interleaved
// schedule only where --num-layers-per-virtual-pipeline-stage is set,
// gradient clipping at 1.0 (--clip-grad), and arguments.py's defaults for
// what the scripts leave out: attention and hidden dropout 0.1
// (--attention-dropout, --hidden-dropout). 16-bit weights with fp32
// master weights and Adam state (memsh's "megatron" precision; the scripts
// run --fp16 with a static loss scale), no sequence parallelism (2021),
// the fused softmax (eager attention).
func megatronRows() []stepRow {
	type cfg struct {
		name                     string
		heads, hidden, layers    int64
		tp, pp, gpus, batch, mbs int64
		ddpTorch                 bool  // --DDP-impl torch: PyTorch DDP, its all-reduce overlapped with the backward
		chunks                   int64 // model chunks per stage (layers / (pp x layers per virtual stage)); 1: 1F1B
		tflops                   float64
		heldOut, heavy           bool
	}
	var rows []stepRow
	for _, c := range []cfg{
		{"1.7B", 24, 2304, 24, 1, 1, 32, 512, 16, true, 1, 137, false, false},
		{"18B", 48, 6144, 40, 8, 1, 256, 1024, 8, true, 1, 135, false, false},
		{"145B", 96, 12288, 80, 8, 8, 1536, 2304, 2, false, 2, 148, false, true},
		{"1T", 160, 25600, 128, 8, 64, 3072, 3072, 1, false, 1, 163, true, true},
	} {
		c := c
		dp := c.gpus / (c.tp * c.pp)
		rows = append(rows, stepRow{
			name:    fmt.Sprintf("Megatron GPT %s, TP %d PP %d DP %d x A100", c.name, c.tp, c.pp, dp),
			source:  fmt.Sprintf("Narayanan et al. 2021 (arXiv:2104.04473) Table 1, %s row: %.0f TFLOP/s per GPU (eq. 3 FLOPs); examples/sc21/run_table_1.sh", c.name, c.tflops),
			heldOut: c.heldOut, heavy: c.heavy,
			plan: func() *core.Plan {
				m := withDropout(gptModel(c.hidden, c.layers, c.heads, 51200, 2048, "eager"), 0.1)
				p := testmodels.LlamaPlan(m, c.mbs, 2048, "megatron", "full", "A100-80GB")
				p.GradAccum = c.batch / (dp * c.mbs)
				p.Overheads.ClipGradNorm = 1
				// The runs predate Megatron-LM's asynchronous all-reduce of the
				// input gradient beside the wgrad GEMM (commit cf7efd4f5a,
				// 2021-08-30; arXiv:2104.04473 is of April 2021): every
				// tensor-parallel collective exposed. With --DDP-impl local
				// (the pipelined sizes) the data-parallel gradient all-reduce
				// is exposed too: train_step runs forward_backward_func,
				// then allreduce_gradients() on each model chunk
				// (megatron/training.py ll. 372-380 at a8d172b31e,
				// 2021-04-28); with --DDP-impl torch PyTorch's DDP overlaps
				// it with the last micro-batch's backward. The grad buffers
				// are in the parameters' dtype (fp16, 2 bytes) unless
				// --accumulate-allreduce-grads-in-fp32 is set
				// (model/distributed.py l. 130), which the scripts do not.
				p.Parallel = core.Parallelism{DP: dp, TP: c.tp, PP: c.pp, DistributedOptimizer: false, SyncTPComm: true,
					NoOverlapGradReduce: !c.ddpTorch}
				p.Precision.Grads = units.BF16
				if c.chunks > 1 {
					p.Parallel.Schedule, p.Parallel.VirtualStages = "interleaved", c.chunks
				}
				return p
			},
			measured: megatronFLOPs(float64(c.batch), 2048, float64(c.layers), float64(c.hidden), 51200) / (c.tflops * 1e12 * float64(c.gpus)),
		})
	}
	return rows
}

// withDropout sets dropout p on m's attention (the probabilities and the
// output) and MLP (its output): Megatron's --attention-dropout and
// --hidden-dropout.
func withDropout(m *core.Model, p float64) *core.Model {
	var walk func(l core.Layer)
	walk = func(l core.Layer) {
		switch v := l.(type) {
		case *nn.Attention:
			v.Dropout = p
		case *nn.MLP:
			v.Dropout = p
		}
		for _, ch := range l.Children() {
			walk(ch)
		}
	}
	for _, l := range m.Layers {
		walk(l)
	}
	return m
}

// llama3Rows are the Llama 3 paper (Dubey et al. 2024, "The Llama 3 Herd
// of Models", Table 4): Llama 3 405B on H100, BF16 MFU per GPU (model
// FLOPs over the 989 TFLOP/s peak). llama405BPlan (calib_time_test.go)
// states the assumptions (the paper's 126 layers in its uneven pipeline
// layout); the step time is memsh's model FLOPs over the published MFU.
//
// The plans write Meta's stack as Megatron's recipe (precision
// "megatron"), so they take Megatron's asynchronous tensor-parallel
// backward (sim/timing/tp_overlap.go), which moved them: +3.3 ->
// -4.6 % (dp 128), +1.7 -> -6.2 % (dp 64), held out -0.7 -> -5.4 %.
// Whether Meta's stack overlaps these collectives the paper does not
// say; the rows are left as the rule prices them, not switched off to
// land closer. Being Hopper calibration rows, they moved Hopper's fitted
// Sustain (TestSustainIsFitted: the median of the eight rows' own
// values, 0.739): 0.78 -> 0.74, after which they land at -0.8, -2.3 and
// -0.8 % (held out), the H100 MPT rows 0.4-5 % slower (MPT-13b +6.5 ->
// +11.6 %), the held-out Mixtral row -3.2 -> +1.1 %, and the GPUs
// without a row (the mean of the two generations: V100, RTX 4090,
// B200) 2.5 % slower (BERT-large fp32 +13.4 -> +15.6 %, fp16 -20.0 ->
// -19.5 %, torchtune +17.0 -> +19.5 %).
func llama3Rows() []stepRow {
	var rows []stepRow
	for _, c := range []struct {
		dp, cp, seq int64
		mfu         float64
		heldOut     bool
	}{{128, 1, 8192, 0.41, false}, {64, 1, 8192, 0.43, false}, {8, 16, 131072, 0.38, true}} {
		c := c
		plan := func() *core.Plan {
			p := llama405BPlan(c.dp)
			if c.cp > 1 {
				p.Seq = c.seq
				p.Parallel.CP = c.cp
				p.GradAccum = 16 // "batch size per DP" 16
			}
			return p
		}
		gpus := float64(c.dp * c.cp * 8 * 16)
		rows = append(rows, stepRow{
			name:    fmt.Sprintf("Llama 3 405B seq %d, TP 8 CP %d PP 16 DP %d x H100", c.seq, c.cp, c.dp),
			source:  fmt.Sprintf("Dubey et al. 2024, Table 4: %.0f GPUs, seq %d, BF16 MFU %.0f %%", gpus, c.seq, 100*c.mfu),
			heldOut: c.heldOut, heavy: true, plan: plan,
			measured: -c.mfu, // filled by the test: model FLOPs / (MFU x peak x GPUs)
		})
	}
	return rows
}

// TestStepTimeAgainstPublishedRuns replays every published run and
// reports memsh's step time against it. Done when (issue 20) the median
// error is at most 10 % and none is worse than 25 %.
func TestStepTimeAgainstPublishedRuns(t *testing.T) {
	var errs, held []float64
	var lines []string
	for _, row := range stepRows() {
		if row.heavy && testing.Short() {
			continue
		}
		r, err := Evaluate(row.plan(), core.Options{})
		if err != nil {
			t.Fatalf("%s: %v", row.name, err)
		}
		got, measured := r.Time.StepSeconds, row.measured
		if measured < 0 { // a published MFU of Llama 3 405B: memsh's FLOPs of the model
			measured = got * r.Time.MFU / -row.measured
		}
		e := got/measured - 1
		tag := ""
		switch {
		case row.excluded != "":
			tag = " (not counted: " + row.excluded + ")"
		case row.heldOut:
			tag = " (held out)"
			held = append(held, math.Abs(e))
			errs = append(errs, math.Abs(e))
		default:
			errs = append(errs, math.Abs(e))
		}
		lines = append(lines, fmt.Sprintf("%-58s measured %8.3f s  memsh %8.3f s  %+6.1f %%%s", row.name, measured, got, 100*e, tag))
		if row.miss != "" {
			tag += " (known miss: " + row.miss + ")"
			if math.Abs(e) <= 0.25 {
				t.Errorf("%s: now within 25 %% (%+.1f %%): drop its known-miss note", row.name, 100*e)
			}
		} else if math.Abs(e) > 0.25 && row.excluded == "" {
			t.Errorf("%s: memsh %.3f s, measured %.3f s (%+.1f %%), breakdown %v", row.name, got, measured, 100*e, r.Time.Breakdown)
		}
	}
	med, worst := median(errs), slices.Max(errs)
	t.Logf("step time against %d published runs: median |error| %.1f %%, worst %.1f %%; the %d held-out rows: median %.1f %%, worst %.1f %%\n%s",
		len(errs), 100*med, 100*worst, len(held), 100*median(held), 100*slices.Max(held), strings.Join(lines, "\n"))
	if med > 0.10 {
		t.Errorf("median |error| %.1f %%, want at most 10 %%", 100*med)
	}
}

// torchtitanRows are torchtitan's docs/performance.md (Llama 3 and Llama 2
// on 64 A100-80GB, FSDP2, local batch as given, "WPS" per GPU, 2024):
// bf16 weights gathered for compute over fp32 sharded parameters and
// Adam state (FSDP2's MixedPrecisionPolicy(param_dtype=bf16,
// reduce_dtype=fp32): memsh's "bf16-mixed" with fsdp=True, as the
// torchtitan memory rows run it; not "megatron", whose layers are
// Megatron-Core's fused kernels), torch SDPA's flash kernel, activation
// checkpointing as given ("selective layer" checkpoints every second
// block, torchtitan's selective_ac_option 2).
func torchtitanRows() []stepRow {
	type cfg struct {
		name                                  string
		hidden, layers, heads, kv, ffn, vocab int64
		batch, seq                            int64
		ckpt                                  core.Checkpoint
		wps                                   float64
	}
	var rows []stepRow
	for _, c := range []cfg{
		{"Llama 3 8B", 4096, 32, 32, 8, 14336, 128256, 1, 8192, core.Checkpoint{Mode: "every", Every: 2}, 2904},
		{"Llama 3 70B", 8192, 80, 64, 8, 28672, 128256, 1, 8192, core.Checkpoint{Mode: "full", Every: 1}, 331},
		{"Llama 2 13B", 5120, 40, 40, 40, 13824, 32000, 2, 4096, core.Checkpoint{Mode: "none"}, 2162},
		{"Llama 2 70B", 8192, 80, 64, 8, 28672, 32000, 2, 4096, core.Checkpoint{Mode: "full", Every: 1}, 353},
	} {
		c := c
		rows = append(rows, stepRow{
			name:    fmt.Sprintf("torchtitan %s seq %d, FSDP 64 x A100, mb %d, AC %s", c.name, c.seq, c.batch, c.ckpt.Mode),
			source:  fmt.Sprintf("pytorch/torchtitan docs/performance.md @0413364, %s, local batch %d: %.0f WPS per GPU", c.name, c.batch, c.wps),
			heldOut: true,
			plan: func() *core.Plan {
				m := testmodels.Llama(c.hidden, c.layers, c.heads, c.kv, c.ffn, c.vocab, "sdpa")
				p := testmodels.LlamaPlan(m, c.batch, c.seq, "bf16-mixed", "none", "A100-80GB")
				p.Checkpoint = c.ckpt
				p.Parallel = core.Parallelism{DP: 64, FSDP: true}
				return p
			},
			measured: stepFromTPS(float64(c.batch*c.seq), 1, c.wps),
		})
	}
	return rows
}

// mixtralRow is Megatron-Core's MoE README (megatron/core/transformer/moe/
// README.md @022bcb5): "468 TFLOPS for Mixtral 8X7B bf16 training" with
// MCore v0.9, on the reference mapping of its table (64 H100, sequence
// 4096, TP 1, EP 8, PP 4, VP 8, micro-batch 1, global batch 256, dropless
// all-to-all dispatcher, grouped GEMM, distributed optimizer, overlapped
// gradient reduction and parameter gathers). The step time is Megatron's
// own FLOP count of the run (megatron/training/training.py
// num_floating_point_operations as of v0.9) over 468 TFLOP/s per GPU.
func mixtralRow() stepRow {
	const h, l, heads, groups, ffn, vocab, seq, gbs, gpus = 4096.0, 32.0, 32.0, 8.0, 14336.0, 32000.0, 4096.0, 256.0, 64.0
	flops := 12 * gbs * seq * l * h * h * ((1+groups/heads+seq/h)*1 + ffn/h*2*1.5 + vocab/(2*l*h))
	return stepRow{
		name:    "Mixtral 8x7B seq 4096, TP 1 EP 8 PP 4 DP 16 x H100",
		source:  "NVIDIA/Megatron-LM megatron/core/transformer/moe/README.md @022bcb5: 468 TFLOP/s per GPU (MCore v0.9), reference mapping table",
		heldOut: true, heavy: true,
		plan: func() *core.Plan {
			block := &core.Sequential{Layers: []core.Layer{
				&core.Residual{Layer: &core.Sequential{Layers: []core.Layer{
					&nn.Norm{Name: "input_layernorm", Dim: 4096, RMS: true},
					&nn.Attention{Name: "self_attn", Dim: 4096, Heads: 32, KVHeads: 8, Impl: "flash", Causal: true, Rope: true},
				}}},
				&core.Residual{Layer: &core.Sequential{Layers: []core.Layer{
					&nn.Norm{Name: "post_attention_layernorm", Dim: 4096, RMS: true},
					&nn.MoE{Name: "mlp", Dim: 4096, Hidden: 14336, Experts: 8, TopK: 2, Act: "swiglu"},
				}}},
			}}
			m := &core.Model{Name: "mixtral", Layers: []core.Layer{
				&nn.Embedding{Name: "embed_tokens", Rows: 32000, Dim: 4096},
				&core.Repeat{Name: "layers", Layer: block, N: 32},
				&nn.Norm{Name: "norm", Dim: 4096, RMS: true},
			}, Vocab: 32000, Loss: "cross_entropy"}
			p := testmodels.LlamaPlan(m, 1, 4096, "megatron", "none", "H100-80GB")
			p.GradAccum = 16
			p.Parallel = core.Parallelism{DP: 16, EP: 8, PP: 4, VirtualStages: 8, Schedule: "interleaved", DistributedOptimizer: true}
			return p
		},
		measured: flops / (468e12 * gpus),
	}
}

// bertStepRow is calibration.md B1: Hugging Face's "GPU memory anatomy",
// bert-large-uncased with a 2-label head, batch 4, sequence 512, on one
// V100-SXM2-16GB through the HF Trainer (transformers' for-loop AdamW,
// gradients zeroed in place): 512 samples in runtime seconds, 128 steps.
// Held out: no time-model constant was looked at against it.
func bertStepRow(batch int64, precision string, runtime float64) stepRow {
	return stepRow{
		name:    fmt.Sprintf("BERT-large %s, batch %d x 512, 1 x V100", precision, batch),
		source:  fmt.Sprintf("calibration.md B1 (huggingface/transformers perf_train_gpu_one.mdx): %.2f s for 512 samples", runtime),
		heldOut: true,
		plan: func() *core.Plan {
			m := bertLarge()
			p := testmodels.LlamaPlan(m, batch, 512, precision, "none", "V100-16GB")
			p.Optimizer = core.Optimizer{Kind: core.AdamW, Impl: "for-loop"}
			p.KeepGrads = true
			p.Overheads.ClipGradNorm = 1 // TrainingArguments.max_grad_norm's default (transformers 4.15 training_args.py)
			return p
		},
		measured: runtime / (512 / float64(batch)),
	}
}

// torchtuneRows are torchtune's README "Memory and training speed" table
// (pytorch/torchtune README.md @0031bfb): Llama 3.1 8B, batch 2 of packed
// 2,048-token sequences, torch.compile, tokens/s over an epoch, on one
// RTX A6000. Full fine-tune as 8B_full_single_device.yaml runs it (bf16
// weights and gradients, bitsandbytes PagedAdamW8bit stepped in the
// backward, activation checkpointing); LoRA as 8B_lora_single_device.yaml
// (rank 8 on q, v and the output projection and the MLP, activation
// checkpointing). Only the 4090 full fine-tune is written down: the
// table's LoRA rows and its A6000 rows need 91-107 % of the GPU's dense
// bf16 peak under the recipes' activation checkpointing (about 2 x 10^14
// FLOPs a step), so they ran settings the table does not give.
func torchtuneRows() []stepRow {
	var rows []stepRow
	for _, c := range []struct {
		method, gpu string
		tps         float64
	}{{"full", "RTX-4090", 1650}} {
		c := c
		rows = append(rows, stepRow{
			name:    fmt.Sprintf("torchtune Llama 3.1 8B %s, batch 2 x 2048, 1 x %s", c.method, c.gpu),
			source:  fmt.Sprintf("pytorch/torchtune README.md @0031bfb, Llama 3.1 8B %s 1x %s: %.0f tokens/s", c.method, c.gpu, c.tps),
			heldOut: true,
			plan: func() *core.Plan {
				m := testmodels.Llama(4096, 32, 32, 8, 14336, 128256, "sdpa")
				p := testmodels.LlamaPlan(m, 2, 2048, "bf16", "full", c.gpu)
				p.Overheads.Dispatch = "compiled"
				if c.method == "full" {
					p.Optimizer = core.Optimizer{Kind: core.PagedAdamW8bit, InBackward: true}
				} else {
					p.LoRA = &core.LoRA{Rank: 8, Alpha: 16, Targets: []string{"q", "v", "o", "gate", "up", "down"}}
				}
				return p
			},
			measured: stepFromTPS(2*2048, 1, c.tps),
		})
	}
	return rows
}

// bertLarge is bert-large-uncased with a 2-label classification head, as
// calib_bert_test.go reads it.
func bertLarge() *core.Model {
	data, err := os.ReadFile("testdata/hf/bert-large-uncased.json")
	if err != nil {
		panic(err)
	}
	m, err := hf.FromConfigArch(data, "eager", "BertForSequenceClassification")
	if err != nil {
		panic(err)
	}
	return m
}

// TestBERTFP16MissIsNotDispatch checks the fp16 BERT row's note: at batch
// 4 memsh's CPU dispatch of the forward and backward stays below their
// GPU time even at three times eager's cost per kernel (the note's ~30 µs
// an op), so no dispatch term can slow that step; and memsh charges
// autocast at least the launches its casts add as measured on the CPU
// (tools/oracle/autocast_cpu.py: 5,225 aten ops against 4,340 eager).
func TestBERTFP16MissIsNotDispatch(t *testing.T) {
	const measuredOpsRatio = 5225.0 / 4340
	var kernels [2]float64
	for i, precision := range []string{"fp32", "fp16-mixed"} {
		p := bertStepRow(4, precision, 1).plan()
		prog, err := p.LowerProgram()
		if err != nil {
			t.Fatal(err)
		}
		var gpu, cpu float64
		for _, c := range timing.PriceOps(prog, p) {
			gpu += c.Fwd + c.Bwd
			cpu += c.FwdCPU + c.BwdCPU
			kernels[i] += c.FwdK + c.BwdK
		}
		t.Logf("%s: GPU %.1f ms, CPU dispatch %.1f ms, %.0f kernels", precision, 1e3*gpu, 1e3*cpu, kernels[i])
		if precision == "fp16-mixed" && 3*cpu >= gpu {
			t.Errorf("fp16: 3 x CPU dispatch %.1f ms reaches the GPU's %.1f ms: the row's note no longer holds", 3e3*cpu, 1e3*gpu)
		}
	}
	if r := kernels[1] / kernels[0]; r < measuredOpsRatio {
		t.Errorf("memsh's autocast launches %.2f x eager's, fewer than the %.2f x aten ops measured", r, measuredOpsRatio)
	}
}
