package sim

import (
	"math"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
)

// torchtitan's published benchmarks (pytorch/torchtitan,
// benchmarks/llama3_h100_202412_torchtitan.md, torchtitan 9dec370 with
// torch 1963fc8, December 2024), measured on Grand Teton H100s (96 GB
// HBM2e). "Memory(GiB)" is torchtitan's max_reserved_gib
// (torchtitan/components/metrics.py: torch.cuda.memory_stats()
// "reserved_bytes.all.peak"), so memsh's peak reserved is compared.
// The model is torchtitan's Llama 3.1 (models/llama/__init__.py: the 8B
// has dim 4096, 32 layers, 32 heads, 8 KV heads, FFN 14,336, vocabulary
// 128,256; its output is upcast to fp32 for the loss), trained with AdamW
// over fp32 parameters under FSDP2 with MixedPrecisionPolicy(param_dtype=
// bf16, reduce_dtype=fp32) (train_configs, config_manager.py defaults):
// memsh's bf16-mixed with fsdp=True.

// grandTeton is the GPU of every row: an H100 with 96 GB of HBM2e
// (the benchmark's "Hardware": "Each H100 GPU is equipped with 96GB HBM2e
// with 2.4 TB/sec peak memory bandwidth"). Every measured row but one
// reserves more than an 80 GB H100 holds (79.2 GiB); replayed on one, the
// allocator frees its cache and retries at the limit (PyTorch's
// release_cached_blocks before an OOM) and reserved memory stops there.
func grandTeton() hw.Device {
	dev, _ := hw.LookupDevice("H100-80GB")
	dev.Name, dev.Memory = "H100-96GB (Grand Teton)", 96<<30
	return dev
}

// TestTorchtitanFSDPOverCP is Table 2: Llama 3.1 8B on 8 GPUs, local
// batch 1, full activation checkpointing, FSDP over dp_shard x cp
// (parallelize_llama.py: the "dp_shard_cp" mesh), sequences growing with
// cp so that every rank holds 32,768 tokens, with torch.compile and Float8
// linears as the table states ("FSDP + CP + torch.compile + Float8":
// each TransformerBlock compiled; torchao's dynamic tensorwise scaling,
// the output layer left in bf16, no fp8 all-gather: float8.py and
// config_manager.py defaults at 9dec370). Sharding over dp alone put the
// 131,072-token row at 111 GiB (+32 %).
//
// Attention is SDPA after repeat_kv (models/llama/model.py at 9dec370,
// ll. 201-209: keys and values are repeated to all 32 heads before
// F.scaled_dot_product_attention), context parallelism torch's
// context_parallel() with its all-gather rotater (cp_mode="allgather"),
// which gathers those repeated keys and values: cp x 32,768 tokens x 32
// heads x 128 x 2 B, twice (K and V), 4 GiB a layer at cp 8.
//
// Every row allocates the same at its peak (69.2 GiB, the loss's
// backward, where the fp32 logits of 32,768 tokens, 15.7 GiB, and their
// gradient are live): the rows differ only in how the allocator caches.
// The table's "Memory(GiB)" is reserved memory, max_reserved_gib
// (torchtitan/metrics.py at 9dec370: memory_stats()
// "reserved_bytes.all.peak", the peak reset after each log, so a steady
// step's), the figure compared here.
//
// Expandable segments: torchtitan's launcher for a host of 8 GPUs,
// run_llama_train.sh, sets PYTORCH_CUDA_ALLOC_CONF="expandable_segments:
// True" at 9dec370 (since a5e57e4, 2024-10-22), so the 8-GPU rows of
// Tables 1 and 2 replay with them (the multi-node launcher,
// multinode_trainer.slurm, does not set them: Tables 3-6 replay without).
// Without them every row grows with cp, +7.9, +4.4, +5.4 and +7.2 % (cp
// = 1, 2, 4, 8; +4.2, +4.7, +5.7, +7.0 % without compile and Float8)
// where the table is flat (83.9-84.5 GiB): each layer's gathered keys and
// values (none at cp 1, 1 GiB a layer at cp 2 to 4 GiB at cp 8), the
// fp32 merge buffers and the recomputed blocks' temporaries cut segments
// that the loss's 15.7 GiB logits cannot reuse, so the loss's backward
// caches new ones (fragmentation at the peak 15.2 GiB at cp 8).
// With expandable segments the free ranges of one segment serve the
// logits: -0.8, -1.2, -1.0 and -1.6 % (83.2 GiB each; cp 1 was +3.1 %,
// 86.5 GiB, with the steady step replayed alone, before the first step
// was replayed ahead of it: replay/lazy_states.go). FSDP2's all-gather
// and reduce-scatter streams have pools of their own (6.2 GiB cached at
// every cp). context_parallel()'s buffers are separate tensors
// (sim/nn/ring_attention.go). Until this test replayed the rows on the
// benchmark's 96 GB H100 they came out 8-9 % under: on an 80 GB H100 the
// allocator met its 79.2 GiB limit and freed its cache.
func TestTorchtitanFSDPOverCP(t *testing.T) {
	m := testmodels.Llama(4096, 32, 32, 8, 14336, 128256, "sdpa")
	for _, row := range []struct {
		dp, cp, seq int64
		gib         float64
	}{
		{8, 1, 32768, 83.9},
		{4, 2, 65536, 84.2},
		{2, 4, 131072, 84.0},
		{1, 8, 262144, 84.5},
	} {
		p := testmodels.LlamaPlan(m, 1, row.seq, "bf16-mixed", "full", "H100-80GB")
		p.Device = grandTeton()
		p.Parallel = core.Parallelism{DP: row.dp, CP: row.cp, FSDP: true, CPMode: "allgather"}
		p.Compile = core.Compile{Blocks: true}
		p.Float8 = core.Float8{Scaling: "tensorwise"}
		p.ExpandableSegments = true // run_llama_train.sh at 9dec370
		r := evalPlan(t, p)
		got := float64(r.PeakReserved) / (1 << 30)
		d := (got - row.gib) / row.gib
		if math.Abs(d) > 0.05 {
			t.Errorf("FSDP %d, CP %d, seq %d: %.1f GiB reserved, measured %.1f GiB (%+.1f %%)", row.dp, row.cp, row.seq, got, row.gib, 100*d)
		}
		t.Logf("FSDP %d, CP %d, seq %d: %.1f GiB reserved, measured %.1f GiB (%+.1f %%)", row.dp, row.cp, row.seq, got, row.gib, 100*d)
	}
}

// TestTorchtitan2D is Table 4: Llama 3.1 70B (dim 8,192, 80 layers, 64
// heads, 8 KV heads, FFN 28,672) on 256 GPUs, FSDP 32 x TP 8 with
// sequence parallelism, local batch 16 of 8,192 tokens (train_configs/
// llama3_70b.toml), full activation checkpointing. With tp torchtitan
// computes the loss under torch's loss_parallel() (parallelize_llama.py:
// the output layer's logits stay sharded over the vocabulary, Shard(-1);
// train.py: cross_entropy(pred.flatten(0, 1).float(), ...) inside
// loss_parallel()), whose eager DTensor code keeps several fp32 tensors of
// the 131,072 x 16,032 logits shard (7.8 GiB each) alive at once
// (sim/core/loss_parallel.go). Read as Megatron's in-place cross-entropy
// the row came out at 43.4 GiB (-40 %). The tensor parallelism is
// DTensor's (tp_runtime="torch"): the output layer saves its all-gathered
// input (2 GiB, not 0.25): peak allocated +1.75 GiB, reserved unmoved (the
// allocator's cache held it).
//
// The table's second row is the same run with async TP (2D + AsyncTP,
// 67.6 GiB; parallel(async_tp=True), core/async_tp.go): torch's
// micro-pipeline TP allocates the gathered inputs, outputs and partials
// on the compute stream as DTensor's collectives do, its symmetric-memory
// workspace outside the allocator (512 MiB here, two [16, 1024, 8192]
// bf16 chunks: in device_used, not in the reserved figure), and on its
// backend stream only the GEMMs' workspaces (two cuBLAS, two cuBLASLt:
// +66 MiB reserved). So memsh has it at 63.6 GiB, -5.9 %, while the run
// measured 4.3 GiB less than without it: whatever vanilla TP held that
// async TP does not is among what memsh does not see in the first row.
// Not that: ProcessGroupNCCL's record_stream on the collectives' tensors
// (torchtitan's init_distributed sets TORCH_NCCL_AVOID_RECORD_STREAMS=1,
// torchtitan/utils.py at 9dec370, so they are held until wait() instead);
// nor DTensor's chunk-and-cat copies around a collective along the
// sequence (torch 2.6.0 _functional_collectives.py: all_gather_tensor and
// reduce_scatter_tensor with gather_dim or scatter_dim 1 copy the whole
// tensor, which the fused ops do not), replayed as workspaces of each
// sequence-parallel all-gather and reduce-scatter: the row did not move
// (its reserve peaks in the loss's backward, where no block runs).
//
// The run also used torch.compile and Float8 linears ("2D parallelism
// (FSDP + TP) + torch.compile + Float8"). Each TransformerBlock compiled
// (compile=True here) leaves the peak where it was, the loss's backward
// (57.7 GiB allocated either way), and changes what the recomputed blocks
// cut from the cache. Float8 under tensor parallelism is torchao's
// Float8ColwiseParallel, Float8RowwiseParallel and PrepareFloat8ModuleInput
// (core/float8_tp.go, torchao eab345c as the benchmark ran it): each
// block's input cast to fp8 before its sequence-parallel all-gather, so
// the gathered input the recomputed attention and MLP save is 1 GiB
// rather than 2, and the fp8 weight copies beside it. The 70B preset
// (train_configs/llama3_70b.toml at 9dec370) sets no
// enable_fsdp_float8_all_gather, so the weights gather in bf16 (with it
// the row is -8.9 %).
//
// Against 71.9 GiB (these variants measured while memsh still prefetched
// in the forward, below): bf16 linears -6.3 % compiled (-7.2 % eager); with
// Float8 -8.6 % compiled (-6.5 % eager). Float8 is not the gap: modelled
// as torchao runs it, the recomputed blocks hold less and the reserve
// falls by 1.6 GiB. Ruled out besides, read against the sources and
// replayed as they run (the rest, 6.2 GiB, is not explained): the loss at
// the peak (torch/distributed/tensor/parallel/loss.py: three fp32
// temporaries of the logits shard beside the saved log-probabilities in
// the fused backward, (grad_input + exp(x)) * grad_output; train.py at
// 9dec370 deletes the bf16 logits, del pred, before the backward);
// FSDP2's side streams (0.7 and 1.1 GiB cached); the first step replayed
// before the steady one or not (the eager bf16 row was -4.5 % with the
// steady step alone, replay/lazy_states.go; which layout the measured run
// had is not established). The bounds are the gaps rounded up, so a change
// that widens them fails.
//
// Both rows were 3.1 and 3.3 points closer (-8.6 and -2.7 %) while memsh
// prefetched FSDP2's next unit in the forward. FSDP2 issues a unit's
// all-gather in its own pre-forward (torch 2.15 _fsdp_param_group.py:
// implicit prefetching overlaps the GPU's work, not the allocations; only
// set_modules_to_forward_prefetch, which torchtitan does not call,
// allocates earlier), as the differential test against torch's FSDP2
// measures (TestFSDPLiveAgainstTorch: with the prefetch the full-checkpoint
// forward peaks were +9.4 and +4.8 % of torch's, without it -2.5 and
// -1.0 %). The extra gathered block had been hiding part of the gap.
func TestTorchtitan2D(t *testing.T) {
	m := testmodels.Llama(8192, 80, 64, 8, 28672, 128256, "flash")
	for _, row := range []struct {
		name      string
		async     bool
		gib, band float64
	}{
		{"2D", false, 71.9, 0.12},
		{"2D + AsyncTP", true, 67.6, 0.06},
	} {
		p := testmodels.LlamaPlan(m, 16, 8192, "bf16-mixed", "full", "H100-80GB")
		p.Device = grandTeton()
		p.Parallel = core.Parallelism{DP: 32, TP: 8, SequenceParallel: true, FSDP: true, LossParallel: "torch", TPRuntime: "torch", AsyncTP: row.async}
		p.Compile = core.Compile{Blocks: true}
		p.Float8 = core.Float8{Scaling: "tensorwise"} // Float8ColwiseParallel, Float8RowwiseParallel
		r := evalPlan(t, p)
		got := float64(r.PeakReserved) / (1 << 30)
		d := (got - row.gib) / row.gib
		t.Logf("Table 4, %s: %.2f GiB reserved, measured %.1f GiB (%+.2f %%)", row.name, got, row.gib, 100*d)
		if math.Abs(d) > row.band { // the gap rounded up
			t.Errorf("Table 4, %s: %.1f GiB reserved, measured %.1f GiB (%+.1f %%)", row.name, got, row.gib, 100*d)
		}
	}
}

// TestTorchtitan405BPipeline is Tables 5 and 6: Llama 3.1 405B (126
// layers, dim 16,384, FFN 53,248, 128 heads, 8 KV heads) on 512 GPUs, TP
// 8 with sequence parallelism and loss parallelism, PP 8, FSDP over the
// rest (dp x cp = 8), full activation checkpointing, torch.compile, Float8
// and async TP. Pipeline as torchtitan 9dec370 builds it
// (parallelisms/pipelining_utils.py): the stages' layers from
// generate_split_points (stage_layers="torchtitan": 15, 16 x 6, 15 on 8
// stages; 7, 8 x 14, 7 on 16 interleaved chunks), as many micro-batches as
// stages (pipeline_parallel_microbatches defaults to the pp degree), FSDP2
// with reshard_after_forward=False and no gradient sync before the last
// micro-batch (replay/fsdp_pipeline.go). Table 5: local batch 32 of 8,192
// tokens, micro-batches of 4; Table 6: local batch 8, one sequence of
// seq/cp tokens per micro-batch on each rank. "Memory" is the maximum over
// all GPUs (footnote 1), memsh's fullest stage.
//
// Attention is torchtitan's F.scaled_dot_product_attention after
// repeat_kv ("sdpa"), the loss torch's loss_parallel() (loss_parallel=
// "torch"), context parallelism torch's context_parallel() with its
// all-gather rotater (cp_mode="allgather": every layer gathers the keys and
// values of all cp ranks), the stages torch.distributed.pipelining's
// (pp_runtime="torch", sim/core/pipeline_torch.go): receive buffers for
// every micro-batch, each micro-batch's output kept until the step ends,
// each received activation's gradient too, and on the last stage the
// logits of all eight micro-batches (0.98 GiB each) kept and concatenated
// by step() before it returns.
//
// FSDP2 under the pipeline: each chunk is its own fully_shard root, and
// torch's schedules pass last_backward on each chunk's own m-th backward
// (Schedule1F1B's last micro-batch; PipelineScheduleMulti's
// backward_counter per stage), where backward_maybe_with_nosync runs the
// chunk's post_backward: resharded, its unsharded fp32 gradients
// reduce-scattered into sharded ones (on FSDP2's reduce-scatter stream)
// and dropped (replay/fsdp_pipeline.go). Those accumulators exist only
// from the chunk's first backward to its last. On the interleaved
// schedule's last rank chunk 15 runs all its backwards while chunk 7's
// eight forwards wait (PipelineScheduleMulti's order): chunk 7's 12 GiB of
// gradients do not exist yet when chunk 15's do, nor chunk 15's once
// chunk 7's exist. Holding every chunk's gradients through the step and
// never reduce-scattering them, memsh had the rows at -10.6, +15.2, -2.0,
// -2.9, -3.5 and -10.3 %; with the chunks' post_backward -7.0, +2.8, +1.9,
// +1.0, +0.3 and -6.9 % (the sharded gradients, 3 GiB a stage, now cached
// on the reduce-scatter stream raise the 1F1B rows). Tensor parallelism is
// DTensor's (tp_runtime="torch"): the output layer's ColwiseParallel saves
// its all-gathered input, 1 GiB a micro-batch where Megatron's linear
// saves 0.125 GiB and gathers it again in the backward: -6.5, +2.8, +2.5,
// +2.7, +0.3 and -6.9 % (inside the recomputed blocks the attention's and
// the MLP's gathered inputs are saved too). The last stage is the fullest
// of every row: it holds the eight logits (pp_runtime="torch") and, at the
// end of the step, asks for their 7.8 GiB concatenation. The next, 4.7-10.1
// GiB under it with Float8 (below), is stage 2, seven micro-batches in
// flight (at cp 8 stage 1).
//
// Table 6 grows with cp (75.3 to 84.9 GiB), most of it at cp 8 (+7.8
// GiB over cp 4). context_parallel()'s buffers live within one layer's
// attention, not at the last stage's loss: with bf16 weights throughout
// memsh grew by 1.9 GiB only. The jump is the fp8 all-gather's: at cp 8
// dp_shard is 1 and torchtitan turns it off (below), so the stage holds
// its weights unsharded in bf16, 5.6 GiB more; memsh now grows by 7.9
// GiB, 7.5 of them at cp 8. Table 5's 1F1B row and Table 6's cp=1 row
// push the same 32,768 tokens per micro-batch through the same layout
// (4 x 8,192 and 1 x 32,768) and measured 82.5 and 75.3 GiB; memsh gives
// both one figure.
//
// Float8 as the runs had it: torchao's tensor-parallel float8 linears
// (core/float8_tp.go: the blocks' inputs cast to fp8 before the
// sequence-parallel all-gather, the fp8 input and weight saved), and
// torchtitan's 405B preset (train_configs/llama3_405b.toml at 9dec370)
// turns on enable_fsdp_float8_all_gather, which torchtitan's float8.py
// applies only when dp_shard > 1 (enable_fsdp_float8_all_gather =
// parallel_dims.dp_shard_enabled and ...): every row but Table 6's cp 8
// (dp_shard 1, FSDP over cp alone) all-gathers the linears' weights in
// fp8, and with reshard_after_forward=False a stage holds them unsharded
// at one byte a weight through the micro-batches, not two (5.6 GiB less
// on a 16-layer stage). Modelled so, every row falls: -13.9, -6.2, -5.6,
// -6.1, -7.2 and -6.9 %, where with bf16 linears it was -6.7, +3.2,
// +2.2, +1.3, -0.2 and -7.0 % (each TransformerBlock compiled, as the
// tables ran; -7.0, +2.9, +1.9, +1.0, +0.3 and -6.9 % eager). The bf16 rows' agreement
// was in part the fp8 weights memsh did not model; the runs hold memory
// memsh does not see, most in Table 5's 1F1B row (11.4 GiB), which pushes
// the same tokens through the same layout as Table 6's cp 1 and measured
// 7.2 GiB more.
//
// Async TP, which Tables 5 and 6 ran (llama3_405b.toml at 9dec370:
// enable_async_tensor_parallel = true; parallel(async_tp=True),
// core/async_tp.go), is modelled and is not that memory. Read in torch
// 2.6.0 (torch/distributed/_symmetric_memory/__init__.py), its fused ops
// allocate the gathered inputs, outputs and partials on the compute
// stream, the sizes DTensor's collectives allocate; their chunks' GEMMs on
// the backend stream write into those outputs, so that stream's pools
// hold only the GEMMs' cuBLAS and cuBLASLt workspaces (+66 MiB reserved:
// -13.9, -6.2, -5.6, -6.1, -7.2 and -6.9 % became -13.8, -6.2, -5.5,
// -6.0, -7.1 and -6.9 %); its symmetric-memory workspace (256 MiB, two
// [4, 1024, 16384] bf16 chunks of a reduce-scatter) is mapped by the
// driver, outside torchtitan's figure (memory_stats()'s reserved bytes).
// Table 4 measured async TP at 4.3 GiB less than without it, not more.
// Bounds below are the gaps rounded up, so a change that widens them
// fails.
func TestTorchtitan405BPipeline(t *testing.T) {
	if testing.Short() {
		t.Skip("replays 8 pipeline stages of a 405B model")
	}
	m := testmodels.Llama(16384, 126, 128, 8, 53248, 128256, "sdpa")
	for _, row := range []struct {
		name           string
		dp, cp, mb     int64
		seq            int64
		schedule       string
		v              int64
		gib, tolerance float64
	}{
		{"Table 5, 1F1B", 8, 1, 4, 8192, "1f1b", 1, 82.5, 0.14},
		{"Table 5, interleaved 1F1B", 8, 1, 4, 8192, "interleaved", 2, 72.7, 0.07},
		{"Table 6, FSDP 8 CP 1", 8, 1, 1, 32768, "1f1b", 1, 75.3, 0.06},
		{"Table 6, FSDP 4 CP 2", 4, 2, 1, 65536, "1f1b", 1, 75.9, 0.06},
		{"Table 6, FSDP 2 CP 4", 2, 4, 1, 131072, "1f1b", 1, 77.1, 0.08},
		{"Table 6, FSDP 1 CP 8", 1, 8, 1, 262144, "1f1b", 1, 84.9, 0.07},
	} {
		p := testmodels.LlamaPlan(m, row.mb, row.seq, "bf16-mixed", "full", "H100-80GB")
		p.Device = grandTeton()
		p.GradAccum = 8
		p.Parallel = core.Parallelism{DP: row.dp, CP: row.cp, TP: 8, PP: 8, SequenceParallel: true, FSDP: true,
			Schedule: row.schedule, VirtualStages: row.v, StageSplit: "torchtitan", LossParallel: "torch", CPMode: "allgather", PPRuntime: "torch", TPRuntime: "torch",
			AsyncTP: true} // llama3_405b.toml: enable_async_tensor_parallel = true
		p.Compile = core.Compile{Blocks: true}
		// torchao's float8 linears under tp; the 405B preset's fp8
		// all-gather where dp_shard > 1 (torchtitan's float8.py)
		p.Float8 = core.Float8{Scaling: "tensorwise", AllGather: row.dp > 1}
		r := evalPlan(t, p)
		got := float64(r.PeakReserved) / (1 << 30)
		d := (got - row.gib) / row.gib
		if math.Abs(d) > row.tolerance {
			t.Errorf("%s: %.1f GiB reserved, measured %.1f GiB (%+.1f %%)", row.name, got, row.gib, 100*d)
		}
		t.Logf("%s: %.2f GiB reserved, measured %.1f GiB (%+.2f %%)", row.name, got, row.gib, 100*d)
	}
}

// titanRow is one row of Tables 1 and 3 (the source above): Llama 3.1
// 8B, local batch 2 x 8192 tokens, FSDP2 over gpus GPUs, per-op selective
// activation checkpointing (train_configs/llama3_8b.toml: mode =
// 'selective', selective_ac_option = 'op'), SDPA (the flash kernel on
// H100), with or without torch.compile (training.compile: each
// TransformerBlock compiled, the loss not; parallelize_llama.py
// apply_compile).
type titanRow struct {
	source  string
	gpus    int64
	compile bool
	gib     float64 // measured peak reserved, GiB
}

// expandable says the row's launcher set expandable segments: torchtitan's
// run_llama_train.sh (one host, 8 GPUs) sets PYTORCH_CUDA_ALLOC_CONF=
// "expandable_segments:True" at 9dec370, multinode_trainer.slurm does not.
func (r titanRow) expandable() bool { return r.gpus <= 8 }

// titanPlan is the plan of a torchtitan Llama 3.1 8B row.
func titanPlan(row titanRow) *core.Plan {
	m := testmodels.Llama(4096, 32, 32, 8, 14336, 128256, "sdpa")
	dev := grandTeton()
	prec, _ := core.LookupPrecision("bf16-mixed")
	// torch's nightly of December 2024 (torchao's rows: 2.7.0a0): SDPA
	// ran flash-attn 2's kernel, cuDNN's deprioritized (pytorch#138522)
	// until 2.9 preferred it on Hopper (pytorch#162073, then only with
	// cuDNN 9.15.1 or later); "cuda-2.6" is that runtime.
	rt, _ := core.LookupRuntime("cuda-2.6")
	ck, _ := core.ParseCheckpoint("op")
	return &core.Plan{Model: m, Batch: 2, Seq: 8192, GradAccum: 1, Members: 1, Precision: prec,
		Optimizer: core.Optimizer{Kind: core.AdamW}, Checkpoint: ck, Device: dev, Runtime: rt, Phase: core.Train,
		Parallel: core.Parallelism{DP: row.gpus, FSDP: true}, Compile: core.Compile{Blocks: row.compile},
		ExpandableSegments: row.expandable()}
}

// TestTorchtitanOpCheckpointRows: the FSDP and FSDP + torch.compile rows
// of Tables 1 and 3, with torchtitan's per-op selective checkpointing.
// Before the op policy memsh read "selective" as Megatron's and put the
// eager 8-GPU row at 143.4 GiB reserved (+74 %). Under compile each block
// keeps only the kept outputs its backward reads (down_proj's goes: 4 GiB
// over 32 blocks).
//
// Errors now: 8 GPUs -4.7 % eager, -3.1 % compiled (with expandable
// segments, as run_llama_train.sh launches a host of 8 GPUs; without them
// -1.3 and -0.7 %); 128 GPUs -0.4 % and +0.0 % (+0.4 and +0.7 % with the
// steady step replayed alone, before the first step was replayed ahead of
// it). compile's saving is 5.4 and 5.0 GiB measured, 3.9 and 4.7 GiB here. Before the caching allocator
// had a pool per stream the rows without expandable segments were
// -8.5, -8.3, -3.2 and -3.1 %: the gap that scaled with 1/GPUs (7.0 GiB at
// 8 GPUs, 2.1 GiB at 128) was FSDP2's side streams. Their segments never
// serve the compute stream and stay cached from step to step: the
// reduce-scatter stream's holds the sharded fp32 gradients (3.8 GiB at 8
// GPUs, 0.25 GiB at 128), the all-gather copy-in stream's the root's and
// one block's all-gather outputs (2.4 GiB at any scale).
func TestTorchtitanOpCheckpointRows(t *testing.T) {
	for _, row := range []titanRow{
		{"Table 1, FSDP", 8, false, 82.4},
		{"Table 1, FSDP + torch.compile", 8, true, 77.0},
		{"Table 3, FSDP", 128, false, 67.0},
		{"Table 3, FSDP + torch.compile", 128, true, 62.0},
	} {
		rep := evalPlan(t, titanPlan(row))
		got := float64(rep.PeakReserved) / (1 << 30)
		d := (got - row.gib) / row.gib
		t.Logf("%s (%d GPUs): memsh %.1f GiB reserved, measured %.1f GiB (%+.1f %%)", row.source, row.gpus, got, row.gib, 100*d)
		if math.Abs(d) > 0.05 { // issue 28's bar
			t.Errorf("%s (%d GPUs): %.1f GiB reserved, measured %.1f GiB (%+.1f %%)", row.source, row.gpus, got, row.gib, 100*d)
		}
	}
}
