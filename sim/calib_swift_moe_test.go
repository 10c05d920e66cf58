package sim

import (
	"math"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/nn"
)

// groupedExperts makes every MoE block under l run as Megatron's grouped
// GEMM (--moe_grouped_gemm true: TEGroupedMLP).
func groupedExperts(l core.Layer) {
	if m, ok := l.(*nn.MoE); ok {
		m.Impl = nn.MoEGrouped
	}
	for _, c := range l.Children() {
		groupedExperts(c)
	}
}

// qwen25_14B is Qwen/Qwen2.5-14B's config.json, the fields memsh reads.
const qwen25_14B = `{"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 5120,
 "intermediate_size": 13824, "num_hidden_layers": 48, "num_attention_heads": 40, "num_key_value_heads": 8,
 "vocab_size": 152064, "tie_word_embeddings": false, "rms_norm_eps": 1e-05, "hidden_act": "silu",
 "max_position_embeddings": 131072, "rope_theta": 1000000.0}`

// TestMegatronSwiftCalibration replays Megatron-SWIFT's full-parameter
// SFT runs (github.com/modelscope/ms-swift, docs/source_en/Instruction/
// Megatron-SWIFT-Training.md "Benchmark", and the figures at the top of
// examples/train/megatron/base_to_chat.sh and moe/moe.sh; the
// Qwen3-30B-A3B row from docs/source_en/BestPractices/Qwen3-Best-Practice.md,
// "Megatron-SWIFT", its script there). Every run: A800-80GB (an A100-80GB
// with NVLink capped at 400 GB/s both ways), bf16 with Megatron's
// distributed optimizer (ms-swift's default use_distributed_optimizer),
// packed padding-free rows of max_length 8192, micro-batch 1, global
// batch 16, flash attention; MoE blocks as grouped GEMMs with the
// alltoall dispatcher (ms-swift's defaults), expert_tp 1. The memory is
// what nvidia-smi shows per GPU (the scripts' "GiB"), against memsh's
// device figure of the fullest rank; the step is s/it.
//
// The dense row is the control: Megatron's states and activations as
// memsh lays them out land on it. The MoE rows land on time for
// Qwen1.5-MoE and not on memory: memsh finds 40.2 GiB where the script
// says 57 GiB, and for Qwen3-30B-A3B 52.7 GiB against 60 GiB and a step
// of 3.8 s against 9.6 s. No term with a named cause closes these gaps
// (the replay's states, checkpointed layer inputs, the recomputed MoE
// layer, NCCL's ep buffers and the loss are all there, and the same
// accounting lands on the dense row); they are recorded here, not fitted
// (issue 19, left open). Ruled out so far:
//   - the experts' optimizer states: Megatron shards them over the
//     expert-data-parallel group (world / (pp x ep x expert_tp): 1 for
//     Qwen1.5-MoE, 2 for Qwen3-30B-A3B), as the replay does; its fullest
//     Qwen1.5-MoE rank holds 2.67 B parameters (bf16 4.97 GiB, fp32 grads
//     9.94 GiB), fp32 master 1.93 B (7.2 GiB) and Adam 14.4 GiB: 36.5 GiB
//     of states, 2.0 GiB of activations;
//   - moe.sh's PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, modelled
//     on its row: 40.2 GiB instead of 40.6 (less fragmentation);
//   - an older moe.sh (selective recompute, no last-stage split) gave
//     "pp2ep4: 7 * 73GiB, 2.5s/it; tp2ep4: 8 * 65GiB, 3s/it": another
//     run, not this row's.
//
// Not checked: memory the checkpoint load (finetune, --load of the mcore
// weights) leaves reserved, NCCL communicators beyond the ones modelled,
// and for Qwen3-30B-A3B the two nodes' network (Alibaba Cloud DLC, not
// stated), which the step's gradient reduce-scatters over dp cross.
func TestMegatronSwiftCalibration(t *testing.T) {
	a800, err := hw.LookupDevice("A100-80GB")
	if err != nil {
		t.Fatal(err)
	}
	a800.LinkGBps = 200 // NVIDIA A800 SXM4 datasheet: NVLink 400 GB/s (both directions)
	prec, _ := core.LookupPrecision("megatron")
	rt, _ := core.LookupRuntime("cuda")
	for _, row := range []struct {
		name       string
		config     []byte
		par        core.Parallelism
		nodes      int64
		recompute  string
		gib, secs  float64 // measured: nvidia-smi GiB per GPU, s/it
		expandable bool    // the script sets PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
		memGap     string  // why the memory is not asserted ("" = asserted within 10 %)
		timeGap    string  // likewise for the step within 20 %
	}{
		// base_to_chat.sh "8 * 65GiB"; the benchmark table: 9.04 s/it,
		// 8*64GB. Selective recompute of core_attn: under flash attention
		// it keeps nothing less, memsh's "none".
		{name: "Qwen2.5-14B, tp 4, dp 2", config: []byte(qwen25_14B),
			par:   core.Parallelism{DP: 2, TP: 4, SequenceParallel: true, DistributedOptimizer: true},
			nodes: 1, recompute: "none", gib: 65, secs: 9.04},
		// moe/moe.sh "8 * 57GiB, 2.95s/it": pp 2 (the last stage 11 of 24
		// layers), ep 4, dp 4, full recompute of every layer.
		{name: "Qwen1.5-MoE-A2.7B, pp 2, ep 4, dp 4", config: readHF(t, "qwen1.5-moe-a2.7b.json"),
			par:   core.Parallelism{DP: 4, PP: 2, EP: 4, ETP: 1, DistributedOptimizer: true, LastStageLayers: 11},
			nodes: 1, recompute: "full", gib: 57, secs: 2.95, expandable: true,
			memGap: "memsh 29 % below, cause unknown"},
		// Qwen3 best practice, two nodes: tp 2 with sequence parallelism,
		// ep 8, dp 8, full recompute.
		{name: "Qwen3-30B-A3B, tp 2, ep 8, dp 8, two nodes", config: readHF(t, "qwen3-30b-a3b.json"),
			par:   core.Parallelism{DP: 8, TP: 2, SequenceParallel: true, EP: 8, ETP: 1, DistributedOptimizer: true},
			nodes: 2, recompute: "full", gib: 60, secs: 9.6,
			memGap: "memsh 12 % below, cause unknown", timeGap: "memsh 60 % below, cause unknown"},
	} {
		m, err := hf.FromConfig(row.config, "flash")
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range m.Layers {
			groupedExperts(l)
		}
		ck, _ := core.ParseCheckpoint(row.recompute)
		micro := 16 / row.par.DP
		row.par.MicroBatches = micro
		p := &core.Plan{Model: m, Batch: 1, Seq: 8192, GradAccum: micro, Members: 1, Precision: prec, Runtime: rt,
			Optimizer: core.Optimizer{Kind: core.AdamW}, Checkpoint: ck, Device: a800, Phase: core.Train,
			Parallel: row.par, Cluster: hw.Cluster{Nodes: row.nodes, GPUsPerNode: 8}}
		p.Overheads.Dispatch = "fused"
		p.ExpandableSegments = row.expandable
		r := evalPlan(t, p)
		used := r.DeviceUsed
		for _, s := range r.Ranks {
			used = max(used, s.DeviceUsed)
		}
		got := float64(used) / (1 << 30)
		memErr, timeErr := got/row.gib-1, r.Time.StepSeconds/row.secs-1
		t.Logf("%s: %.1f GiB (measured %.0f, %+.1f %%), %.2f s (measured %.2f, %+.1f %%)", row.name, got, row.gib, 100*memErr, r.Time.StepSeconds, row.secs, 100*timeErr)
		if row.memGap == "" && math.Abs(memErr) > 0.10 {
			t.Errorf("%s: %.1f GiB, measured %.0f GiB (%+.1f %%, goal 10 %%)", row.name, got, row.gib, 100*memErr)
		}
		if row.timeGap == "" && math.Abs(timeErr) > 0.20 {
			t.Errorf("%s: %.2f s, measured %.2f s (%+.1f %%, goal 20 %%)", row.name, r.Time.StepSeconds, row.secs, 100*timeErr)
		}
		if row.memGap != "" {
			t.Logf("  memory not asserted: %s", row.memGap)
		}
		if row.timeGap != "" {
			t.Logf("  step not asserted: %s", row.timeGap)
		}
	}
}
