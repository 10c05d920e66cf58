package sim

import (
	"bytes"
	"math"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/replay"
	"github.com/memsh/memsh/sim/units"
)

// TestMegatronDeepSeekV3RecomputeCalibration replays the DeepSeek-V3 run
// of Megatron-LM PR #6429 (github.com/NVIDIA/Megatron-LM/pull/6429,
// "[Main] Recompute EP A2A overlap activations per layer segment", the
// description of 2026-08-11, open; its code at refs/pull/6429/head
// 6f0b9751): Megatron-Core's own full recompute of a DeepSeek-V3-shaped
// MoE model, the control for the Megatron-SWIFT full-recompute rows
// (calib_swift_moe_test.go, issue 19). "64×H100 (8 nodes). DeepSeek-V3
// shape at 14 layers with the real 256-expert MoE and MTP 1, TP1 / PP4 /
// EP16, pipeline layout Ett|(tt|)*6mL, alltoall dispatcher, seq 2048,
// MBS 1, GBS 256 (16 microbatches), BF16, 30 iterations with the first 5
// dropped"; recompute is recompute_granularity=full, recompute_method=
// uniform, recompute_num_layers=1. Its arm C, "non-overlap baseline —
// overlap off, recompute on": peak allocated 60,154 MB, peak reserved
// 62,570 MB, device memory used 68,973 MB (3,044 ms an iteration). The
// same run without recompute is the dev-branch PR's (#6311, "Recompute EP
// A2A overlap activations per layer instead of per model chunk", the same
// recipe): "no overlap, no recompute", peak allocated 68,704 MB ("Full
// recompute ... returns 8.5 GB").
//
// The figures are Megatron's report_memory line (megatron/training/utils/
// common_utils.py at the PR's head): max_memory_allocated,
// max_memory_reserved and torch.cuda.device_memory_used() (NVML's used
// memory, nvidia-smi's), each divided by 1024 x 1024: MiB. The line is
// printed once per pipeline stage (data-parallel rank 0 of each); the PR
// does not say whose it quotes. The last stage is the one whose figure
// drops by what full recompute saves (8,550 MiB measured; memsh 8,466 on
// the last stage, 13,758 on stage 2, 18,160 on stage 0, whose 11 chunk
// micro-batches in flight keep the most), and the one Megatron's
// tensorboard and wandb writers sit on (global rank world_size-1,
// megatron/training/global_vars.py); the allocated peaks are also
// checked against memsh's fullest stage, which either reading lands.
//
// The recipe: "the DeepSeek-V3 benchmark recipe" (#6311: "the benchmark
// recipe this was transcribed from"), read here as Megatron-MoE-ModelZoo's
// model_configs/benchmarking/DeepSeek-V3.yaml (yanring/Megatron-MoE-
// ModelZoo at e865051; the PRs name no file): DeepSeek-V3's widths (hidden 7168,
// MLA with q_lora 1536, kv_lora 512, qk 128 + 64 rope, v 128; experts of
// 2048, top-8, one shared), the DeepSeek-V3 tokenizer (129,280, a
// multiple of 3232), untied embeddings, the distributed optimizer with
// overlapped gradient reduction and parameter gather, fp32 main gradients
// (no --grad-reduce-in-bf16: memsh's "megatron" precision), the router in
// fp32, grouped GEMM, PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True and
// NCCL_NVLS_ENABLE=0 in its ENV_VARS. Not stated, assumed: the first 3 of
// the 14 layers dense (--moe-layer-freq ([0]*3+[1]*11), DeepSeek-V3's
// first_k_dense_replace and the ModelZoo's 14-layer proxy's list: the
// recipe's 61-entry list cannot run 14 layers), the MTP layer an MoE
// layer, and the allocator and NCCL settings of the recipe (the run
// transcribed it: --tp-comm-overlap, which its launcher adds for bf16,
// cannot run at tp 1). tp 1 leaves dp 16, expert dp 64 / (4 x 16) = 1.
// The layout puts 8 model chunks on pp 4 (v 2): E+2, 2, 2, 2, 2, 2, 2
// layers, then the MTP module and the loss alone on the last chunk, with
// its own copy of the embedding (the last stage is mtp_process).
//
// memsh against the figures (MiB; go test ./sim -run
// TestMegatronDeepSeekV3RecomputeCalibration -v):
//
//	                        measured   memsh last stage   fullest stage
//	full recompute  alloc     60,154   58,517  -2.7 %     the same
//	                reserved  62,570   58,762  -6.1 %
//	                used      68,973   62,845  -8.9 %
//	no recompute    alloc     68,704   66,984  -2.5 %     70,140 +2.1 % (stage 2)
//	recompute's saving         8,550    8,466  -1.0 %
//
// Transformer Engine's cuBLAS workspace of the layers' bf16 GEMMs
// (core/megatron_te.go, 32 MiB, less PyTorch's 1 MiB cuBLASLt
// workspace those GEMMs do not make) moved every figure by 32 MiB:
// 58,485 / 58,722 / 62,805 and 66,952 / 70,108 before. TE's grouped
// GEMMs' own workspaces (a stream each) are not counted in bf16.
//
// The groups of one rank Megatron still runs collectives on (tp 1's
// get_batch broadcast and vocab-parallel loss, the expert-data-parallel
// group of one: replay/nccl_megatron.go), each NCCL's init on 32 channels,
// 196 MiB: used 62,413 -> 62,805 MiB (-9.5 -> -8.9 %); before them the
// H100's context on the current stack (runtime "cuda": the H200's measured
// 766.8 MiB for 500, sim/hw/catalog.go gh100Context) had moved it 62,146 ->
// 62,413 (-9.9 -> -9.5 %).
//
// The recipe sets --cross-entropy-loss-fusion (native): its backward
// clones the loss's fp32 softmax (core/fused_ce.go), 1,010 MiB more on the
// last stage (57,475 -> 58,485 allocated, 57,722 -> 58,722 reserved,
// 61,146 -> 62,146 used; -4.5 / -7.7 / -11.3 % before).
//
// Before the MTP module's head was tied to the output layer on a
// pipelined last stage (core/pipeline.go; TestDeepSeekMTPPipelineSharesHead)
// memsh counted the head twice there: 0.93 B parameters, 5.8 GiB of
// states, +5.5 and +4.7 % on allocated.
//
// What this says of the SWIFT rows: on allocated memory memsh misses
// Megatron-Core's own full-recompute run by no more than its run without
// recompute (-2.8 against -2.6 %), and the memory full recompute saves
// lands within 1 %: nothing that Megatron-Core keeps alive through full
// recompute of MLA and MoE layers (CheckpointFunction's inputs, the
// dispatcher's routing maps, the last stage's loss) is missing from the
// replay. The miss that grows is outside allocated memory: the device's
// used memory is 8,819 MiB over the allocated peak measured, 3,928 in
// memsh (the reserve over allocated 2,416 against 237, the memory outside
// the allocator 6,403 against 3,691: the CUDA context's 766.8, the H200's
// measured figure the H100 takes on the current stack (-9.9 % on used
// with the 500 MiB before, -9.5 % with it), NCCL's
// buffers connected lazily, NCCL 2.22's default, and 900 MiB its nine
// communicators hold from their init, replay/nccl.go ncclInitMem). Named, not fitted:
// NCCL connected eagerly (NCCL_RUNTIME_CONNECT=0 or an older NCCL) would
// add 3,680 MiB; without expandable_segments the reserve over allocated
// is 2,231 MiB; neither is stated by the run. Ruled out: routed rows
// that change from micro-batch to micro-batch (expert_spread,
// TestMegatronDeepSeekV3ExpertSpread below) keep the reserve under 502
// MiB a stage with the recipe's expandable_segments.
//
// The communicators of the run's Megatron-LM (6f0b9751, replay/
// nccl_megatron.go; before them used was 59,286 MiB, -14.0 %): the last
// stage keeps the MTP module's copy of the embedding, whose gradient
// finalize_model_grads all-reduces with the first stage's over
// EMBEDDING_GROUP (two ranks 48 apart, across nodes: ring and tree, 16
// channels x 3 x 12 MiB = 576 MiB, on stages 0 and 3), and the recipe's
// --moe-router-enable-expert-bias all-reduces the tokens per expert over
// TENSOR_AND_DATA_PARALLEL_GROUP_WITH_CP (16 ranks, two nodes: a ring,
// 192 MiB): 60,054 MiB, -12.9 %. The distributed optimizer's gradient
// norm runs over a world group of its own at this version (INTRA_
// DISTRIBUTED_OPTIMIZER_INSTANCE_GROUP, from Megatron-Core 0.14:
// grad_norm_group) beside the default group (pretrain's start-time
// all-reduce, the timers): one more 192 MiB ring, 60,246 MiB, -12.7 %.
// What each communicator holds from its init, connected or not (NCCL's
// per-channel device structures, each a 2 MiB cuMem allocation: (3 x 16
// + 2) x 2 MiB = 100 MiB across nodes, replay/nccl.go): 61,146 MiB,
// -11.3 %.
// The run's dispatcher is alltoall (the PR
// says so; the recipe's launcher defaults to DeepEP, whose NVSHMEM
// buffers would sit outside the allocator), and its init_process_group
// passes no device_id (megatron/training/initialize.py l.342-359 at
// 6f0b9751): PyTorch makes each communicator at its first collective. The Megatron-SWIFT rows
// quote nvidia-smi only, so their gap may sit there as much as in what
// recompute keeps.
//
// Not modelled, logged: the PR's arms A and B, with
// --overlap-moe-expert-parallel-comm (its combined 1F1B runs one
// micro-batch's forward beside another's backward, and B replays a layer
// segment before its backward). The step is logged, not asserted.
func TestMegatronDeepSeekV3RecomputeCalibration(t *testing.T) {
	const mib = 1 << 20
	type figures struct{ alloc, reserved, used float64 } // MiB; 0: not published
	runs := map[string]*replay.Report{}
	for _, row := range []struct {
		name, recompute string
		src, step       string
		measured        figures
		band            figures // |memsh/measured - 1| at the last stage: the gap rounded up
	}{
		{name: "full recompute (arm C)", recompute: "full", src: "NVIDIA/Megatron-LM#6429",
			step:     "3.044 s an iteration, 185.2 TFLOP/s a GPU",
			measured: figures{60154, 62570, 68973}, band: figures{0.03, 0.07, 0.09}},
		{name: "no recompute", recompute: "none", src: "NVIDIA/Megatron-LM#6311",
			step:     "225.1 TFLOP/s a GPU against 184.2 with full recompute",
			measured: figures{alloc: 68704}, band: figures{alloc: 0.03}},
	} {
		r := evalPlan(t, dsv3ProxyPlan(t, row.recompute, true, "lazy"))
		runs[row.recompute] = r
		if len(r.Ranks) != 4 {
			t.Fatalf("%s: %d stages replayed, want 4", row.name, len(r.Ranks))
		}
		last, full := r.Ranks[3], fullestStage(r)
		got := figures{float64(last.PeakAllocated) / mib, float64(last.PeakReserved) / mib, float64(last.DeviceUsed) / mib}
		for _, f := range []struct {
			what           string
			got, want, tol float64
		}{
			{"max allocated", got.alloc, row.measured.alloc, row.band.alloc},
			{"max reserved", got.reserved, row.measured.reserved, row.band.reserved},
			{"device memory used", got.used, row.measured.used, row.band.used},
			{"max allocated, fullest stage", float64(full.PeakAllocated) / mib, row.measured.alloc, row.band.alloc},
		} {
			if f.want == 0 {
				continue
			}
			e := f.got/f.want - 1
			t.Logf("%s, %s: %.0f MiB (measured %.0f, %s, %+.1f %%)", row.name, f.what, f.got, f.want, row.src, 100*e)
			if math.Abs(e) > f.tol {
				t.Errorf("%s: %s %.0f MiB, measured %.0f (%+.1f %%, band %.0f %%)", row.name, f.what, f.got, f.want, 100*e, 100*f.tol)
			}
		}
		for i, s := range r.Ranks {
			t.Logf("  stage %d: %.0f / %.0f / %.0f MiB allocated / reserved / used", i,
				float64(s.PeakAllocated)/mib, float64(s.PeakReserved)/mib, float64(s.DeviceUsed)/mib)
		}
		t.Logf("  step %.2f s (measured: %s; not asserted)", r.Time.StepSeconds, row.step)
	}
	// What full recompute saves on the last stage: 68,704 - 60,154 MiB.
	saved := float64(runs["none"].Ranks[3].PeakAllocated-runs["full"].Ranks[3].PeakAllocated) / mib
	if e := saved/8550 - 1; math.Abs(e) > 0.02 {
		t.Errorf("full recompute saves %.0f MiB on the last stage, measured 8,550 (%+.1f %%, band 2 %%)", saved, 100*e)
	}
	t.Logf("full recompute saves %.0f MiB on the last stage (measured 8,550 MiB); stage 0 %.0f, stage 2 %.0f", saved,
		float64(runs["none"].Ranks[0].PeakAllocated-runs["full"].Ranks[0].PeakAllocated)/mib,
		float64(runs["none"].Ranks[2].PeakAllocated-runs["full"].Ranks[2].PeakAllocated)/mib)
	// The settings the run does not state, named beside the gap above.
	for _, v := range []struct {
		name       string
		expandable bool
		connect    string
	}{{"NCCL connected eagerly", true, "eager"}, {"without expandable_segments", false, "lazy"}} {
		s := evalPlan(t, dsv3ProxyPlan(t, "full", v.expandable, v.connect)).Ranks[3]
		t.Logf("full recompute %s: %.0f / %.0f / %.0f MiB allocated / reserved / used (not asserted)", v.name,
			float64(s.PeakAllocated)/mib, float64(s.PeakReserved)/mib, float64(s.DeviceUsed)/mib)
	}
	t.Log("not modelled: arms A and B of #6429 (--overlap-moe-expert-parallel-comm): 70,279 / 75,594 / 79,677 and 60,378 / 68,392 / 74,803 MiB")
}

// dsv3ProxyPlan is PR #6429's DeepSeek-V3 run at 14 layers (above) with
// recompute "full" or "none", the allocator's expandable segments and
// NCCL's connection mode.
func dsv3ProxyPlan(t *testing.T, recompute string, expandable bool, connect string) *core.Plan {
	t.Helper()
	cfg := bytes.Replace(readHF(t, "deepseek-v3.json"), []byte(`"num_hidden_layers": 61`), []byte(`"num_hidden_layers": 14`), 1)
	m, err := hf.FromConfigOptions(cfg, hf.Options{Attn: "flash", MTP: true, Transformers: megatronTransformers})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range m.Layers {
		groupedExperts(l)
	}
	h100, err := hw.LookupDevice("H100-80GB")
	if err != nil {
		t.Fatal(err)
	}
	prec, _ := core.LookupPrecision("megatron")
	rt, _ := core.LookupRuntime("cuda")
	ck, err := core.ParseCheckpoint(recompute)
	if err != nil {
		t.Fatal(err)
	}
	const gbs, dp = 256, 16
	p := &core.Plan{Model: m, Batch: 1, Seq: 2048, GradAccum: gbs / dp, Members: 1, Precision: prec, Runtime: rt,
		Optimizer: core.Optimizer{Kind: core.AdamW}, Checkpoint: ck, Device: h100, Phase: core.Train,
		Parallel: core.Parallelism{DP: dp, PP: 4, VirtualStages: 2, EP: 16, ETP: 1, DistributedOptimizer: true, GradNormGroup: true,
			MicroBatches: gbs / dp, StageLayers: []int64{2, 2, 2, 2, 2, 2, 2, 0}, RouterDType: units.FP32,
			LossParallel: core.MegatronFusedCE}, // the recipe's --cross-entropy-loss-fusion, native
		Cluster: hw.Cluster{Nodes: 8, GPUsPerNode: 8}}
	p.DataloaderMask = core.DataloaderMaskOff // the recipe's --no-create-attention-mask-in-dataloader
	p.Overheads.Dispatch = "fused"
	p.ExpandableSegments = expandable
	p.RuntimeMemory.NCCLNVLS = "off"
	p.RuntimeMemory.NCCLConnect = connect
	return p
}

// fullestStage is the stage with the highest allocated peak.
func fullestStage(r *replay.Report) *replay.Report {
	best := r.Ranks[0]
	for _, s := range r.Ranks[1:] {
		if s.PeakAllocated > best.PeakAllocated {
			best = s
		}
	}
	return best
}

// TestMegatronDeepSeekV3ExpertSpread replays PR #6429's full-recompute
// run (above) with the routed rows of every MoE layer drawn anew for each
// micro-batch copy and step (parallel(expert_spread=s), replay/
// routing.go): the hypothesis that the reserve over allocated, 2,416 MiB
// measured and 237 in memsh, is the caching allocator meeting routed
// buffers of changing sizes. Under the run's expandable_segments the
// reserve over allocated stays within 155-502 MiB on every stage at
// s = 0.1, 0.2 and 0.4 (the last stage's 237 falls to 155-173): the one
// growing range tiles the changing sizes, as the H200 measurement of
// tools/oracle/moe_frag.py found for packed rows of changing length
// (0.71 GiB over allocated under expandable_segments, 0.83 with fixed
// shapes without: sim/testdata/cuda_h200/moe_frag.jsonl). Without
// expandable_segments (not the run's setting) the same draws add 0.3-1.4
// GiB a stage (the last 2,232 -> 2,497-2,828 MiB). So the variation does
// not make #6429's reserve; it is asserted to stay under half the
// measured gap on every stage. Not replayed: more than the first and the
// steady step (the H200's routed run without expandable_segments grew
// its reserve at steps 1, 2, 3 and 13 of 15; with them, packed, it grew
// 0.35 GiB over 15 steps). The step time is the lowered rows': unchanged.
func TestMegatronDeepSeekV3ExpertSpread(t *testing.T) {
	const mib = 1 << 20
	const measured = 62570 - 60154 // max reserved less max allocated, arm C
	over := func(r *replay.Report) []float64 {
		var o []float64
		for _, s := range r.Ranks {
			o = append(o, float64(s.PeakReserved-s.PeakAllocated)/mib)
		}
		return o
	}
	for _, expandable := range []bool{true, false} {
		base := evalPlan(t, dsv3ProxyPlan(t, "full", expandable, "lazy"))
		o0 := over(base)
		t.Logf("expandable_segments=%v, expert_spread=0: reserved over allocated %.0f MiB by stage (measured %d on the run's)", expandable, o0, measured)
		for _, s := range []float64{0.1, 0.2, 0.4} {
			p := dsv3ProxyPlan(t, "full", expandable, "lazy")
			p.Parallel.ExpertSpread = s
			r := evalPlan(t, p)
			o := over(r)
			t.Logf("expandable_segments=%v, expert_spread=%g: %.0f MiB by stage", expandable, s, o)
			if r.Time.StepSeconds != base.Time.StepSeconds {
				t.Errorf("expert_spread=%g: step %.4f s, %.4f s without: the time model prices the lowered rows", s, r.Time.StepSeconds, base.Time.StepSeconds)
			}
			grew := 0.0
			for i := range o {
				grew += o[i] - o0[i]
				if expandable && o[i] > measured/2 {
					t.Errorf("expert_spread=%g, stage %d: %.0f MiB reserved over allocated, past half the measured %d: the variation may explain the gap after all", s, i, o[i], measured)
				}
			}
			if !expandable && grew <= 0 {
				t.Errorf("expert_spread=%g without expandable_segments: the stages' reserve over allocated moved %+.0f MiB, want more (a freed routed block too small for the next)", s, grew)
			}
		}
	}
}
