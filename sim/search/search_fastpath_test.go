package search

import (
	"fmt"
	"math"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/units"
)

// fastPathPlans are layouts of a small Llama and a small MoE covering the
// sharding modes, pipeline schedules, tensor, context and expert
// parallelism, micro-batches and checkpointing.
func fastPathPlans() []*core.Plan {
	llama := testmodels.Llama(1024, 8, 16, 4, 2816, 32000, "flash")
	var out []*core.Plan
	add := func(m *core.Model, par core.Parallelism, mbs, ga int64, prec, ckpt string, gpus, gpn int64) {
		p := testmodels.LlamaPlan(m, mbs, 2048, prec, ckpt, "H100-80GB")
		p.Parallel, p.GradAccum = par, ga
		p.Cluster = hw.Cluster{Nodes: max(gpus/gpn, 1), GPUsPerNode: min(gpn, gpus)}
		out = append(out, p)
	}
	add(llama, core.Parallelism{}, 1, 1, "bf16-mixed", "none", 1, 8)
	add(llama, core.Parallelism{}, 2, 4, "bf16-mixed", "full", 1, 8)
	add(llama, core.Parallelism{DP: 8}, 1, 2, "bf16-mixed", "selective", 8, 8)
	add(llama, core.Parallelism{DP: 16, Zero: 1}, 2, 1, "bf16-mixed", "none", 16, 8)
	add(llama, core.Parallelism{DP: 4, TP: 2, Zero: 2, SequenceParallel: true}, 1, 4, "bf16-mixed", "full", 8, 8)
	add(llama, core.Parallelism{DP: 8, Zero: 3}, 1, 2, "bf16-mixed", "full", 8, 8)
	add(llama, core.Parallelism{DP: 4, TP: 4, FSDP: true}, 1, 2, "bf16-mixed", "none", 16, 8)
	add(llama, core.Parallelism{DP: 2, TP: 4, CP: 2, SequenceParallel: true}, 1, 1, "megatron", "none", 16, 8)
	add(llama, core.Parallelism{DP: 2, TP: 2, PP: 2, DistributedOptimizer: true, SequenceParallel: true}, 1, 8, "megatron", "none", 8, 4)
	add(llama, core.Parallelism{DP: 4, TP: 2, PP: 4, DistributedOptimizer: true, SequenceParallel: true}, 1, 4, "megatron", "full", 32, 8)
	add(llama, core.Parallelism{DP: 2, TP: 1, PP: 4, Zero: 1}, 2, 2, "bf16-mixed", "selective", 8, 8)
	add(llama, core.Parallelism{DP: 2, TP: 2, PP: 2, Schedule: "interleaved", VirtualStages: 2, DistributedOptimizer: true}, 1, 8, "megatron", "none", 8, 8)
	add(llama, core.Parallelism{DP: 1, TP: 8, PP: 4, Schedule: "interleaved", VirtualStages: 2, SequenceParallel: true}, 1, 8, "megatron", "full", 32, 8)
	add(llama, core.Parallelism{DP: 8, TP: 16, SequenceParallel: true}, 1, 1, "megatron", "none", 128, 8)
	add(llama, core.Parallelism{DP: 2, PP: 2, FSDP: true}, 1, 4, "bf16-mixed", "full", 4, 8)
	add(llama, core.Parallelism{DP: 4, TP: 2, CP: 2, PP: 2, Schedule: "interleaved", VirtualStages: 2, Zero: 1}, 2, 4, "bf16-mixed", "selective", 32, 8)
	// The modes of issue 18 the search explores: HSDP, Ulysses, the
	// embedding and loss slots of an uneven pipeline (8 blocks on 5 stages).
	add(llama, core.Parallelism{DP: 16, DPReplicate: 2, FSDP: true}, 1, 2, "bf16-mixed", "none", 16, 8)
	add(llama, core.Parallelism{DP: 4, TP: 2, CP: 2, CPMode: "ulysses", SequenceParallel: true, Zero: 1}, 1, 2, "bf16-mixed", "full", 16, 8)
	add(llama, core.Parallelism{DP: 4, CP: 2, CPMode: "allgather", FSDP: true}, 1, 2, "bf16-mixed", "full", 8, 8)
	add(llama, core.Parallelism{DP: 2, PP: 5, EmbeddingSlot: true, LossSlot: true, Zero: 1}, 1, 10, "bf16-mixed", "none", 10, 10)
	// The whole space of issue 26: torchtitan's per-op checkpointing,
	// torchtitan's uneven split (8 blocks on 3 stages: 2, 3, 3), the slots
	// with four chunks per stage (14 blocks and 2 slots on pp=2 x v=4),
	// HSDP with a replica count other than the nodes'.
	add(llama, core.Parallelism{DP: 8}, 1, 2, "bf16-mixed", "op", 8, 8)
	// Autocast on a pipeline (DDP): a stage's blocks take the dtype of the
	// activation it receives, so a stage's block is profiled on a stage.
	add(llama, core.Parallelism{DP: 8, PP: 2}, 1, 4, "bf16-mixed", "none", 16, 8)
	add(llama, core.Parallelism{DP: 2, TP: 2, PP: 2, Zero: 1, SequenceParallel: true}, 2, 4, "bf16-mixed", "op", 8, 8)
	add(llama, core.Parallelism{DP: 2, PP: 3, StageSplit: "torchtitan", Zero: 1}, 1, 6, "bf16-mixed", "full", 6, 6)
	add(testmodels.Llama(1024, 14, 16, 4, 2816, 32000, "flash"), core.Parallelism{DP: 2, PP: 2, Schedule: "interleaved", VirtualStages: 4, EmbeddingSlot: true, LossSlot: true, DistributedOptimizer: true}, 1, 4, "megatron", "none", 4, 4)
	add(llama, core.Parallelism{DP: 16, DPReplicate: 8, FSDP: true}, 1, 2, "bf16-mixed", "full", 16, 8)
	// Slots whose middle stages are the slowest (14 blocks on pp=4: 3, 4,
	// 4, 3): the bubble counts every stage but one of them.
	add(testmodels.Llama(1024, 14, 16, 4, 2816, 32000, "flash"), core.Parallelism{DP: 2, PP: 4, EmbeddingSlot: true, LossSlot: true, DistributedOptimizer: true}, 1, 8, "megatron", "none", 8, 8)

	// Blocks that differ (a dense block, then MoE blocks, as DeepSeek's
	// first layers): no block unit, a pipeline's chunks lowered whole.
	dense := decoderBlock512(&nn.MLP{Dim: 512, Hidden: 2048, Act: "swiglu"})
	sparse := decoderBlock512(&nn.MoE{Dim: 512, Hidden: 1024, Experts: 8, TopK: 2, Act: "swiglu"})
	mixed := &core.Model{Name: "mixed", Layers: []core.Layer{
		&nn.Embedding{Name: "embed_tokens", Rows: 32000, Dim: 512},
		&core.Repeat{Name: "layers", Blocks: []core.Layer{dense, sparse, sparse, sparse}},
		&nn.Norm{Name: "norm", Dim: 512, RMS: true},
	}, Vocab: 32000, Loss: "cross_entropy"}
	add(mixed, core.Parallelism{DP: 8, EP: 2}, 1, 2, "bf16-mixed", "none", 8, 8)
	add(mixed, core.Parallelism{DP: 4, PP: 2, EP: 2, DistributedOptimizer: true}, 1, 4, "megatron", "full", 8, 8)
	add(mixed, core.Parallelism{DP: 2, PP: 3, StageSplit: "torchtitan", DistributedOptimizer: true}, 1, 6, "megatron", "none", 6, 6)

	moe := smallMoE()
	add(moe, core.Parallelism{DP: 8, EP: 4}, 1, 2, "bf16-mixed", "none", 8, 8)
	add(moe, core.Parallelism{DP: 8, EP: 8, TP: 2, Zero: 1, SequenceParallel: true}, 1, 1, "bf16-mixed", "full", 16, 8)
	add(moe, core.Parallelism{DP: 4, EP: 2, PP: 2, DistributedOptimizer: true}, 1, 4, "megatron", "none", 8, 8)
	// Whole experts on every tensor-parallel rank (expert_tp=1): each
	// rank routes its own sequence-parallel tokens; with and without
	// expert parallelism, on a pipeline, under FSDP and ZeRO-3.
	add(moe, core.Parallelism{DP: 8, EP: 4, TP: 2, ETP: 1, SequenceParallel: true, Zero: 1}, 1, 2, "bf16-mixed", "selective", 16, 8)
	add(moe, core.Parallelism{DP: 4, TP: 2, ETP: 1, SequenceParallel: true, FSDP: true}, 1, 2, "bf16-mixed", "none", 8, 8)
	add(moe, core.Parallelism{DP: 2, EP: 2, TP: 2, ETP: 1, PP: 2, SequenceParallel: true, DistributedOptimizer: true}, 1, 4, "megatron", "full", 8, 8)
	add(moe, core.Parallelism{DP: 4, EP: 2, TP: 4, ETP: 1, SequenceParallel: true, Zero: 3}, 2, 1, "bf16-mixed", "op", 16, 8)
	add(mixed, core.Parallelism{DP: 2, EP: 2, TP: 2, ETP: 1, PP: 2, SequenceParallel: true, DistributedOptimizer: true}, 1, 4, "megatron", "none", 8, 8)
	// ZeRO-Offload (offload(optimizer="cpu")) at stages 1-3: the
	// partition's PCIe copies instead of the GPU's step; the dense and
	// expert groups partitioned apart.
	offload := func() { out[len(out)-1].Offload = &core.Offload{Optimizer: "cpu"} }
	add(llama, core.Parallelism{DP: 8, Zero: 1}, 1, 2, "bf16-mixed", "none", 8, 8)
	offload()
	add(llama, core.Parallelism{DP: 6, TP: 2, Zero: 2, SequenceParallel: true}, 2, 2, "bf16-mixed", "full", 12, 4)
	offload()
	add(llama, core.Parallelism{DP: 16, Zero: 3}, 1, 1, "bf16-mixed", "selective", 16, 8)
	offload()
	add(moe, core.Parallelism{DP: 8, EP: 4, TP: 2, ETP: 1, SequenceParallel: true, Zero: 2}, 1, 2, "bf16-mixed", "none", 16, 8)
	offload()
	add(moe, core.Parallelism{DP: 6, EP: 2, Zero: 3}, 1, 1, "bf16-mixed", "full", 6, 6)
	offload()
	// ZeRO-Offload with overlap_comm (carried from a base plan) and
	// gradient accumulation: the fp32 and accumulation copies ride the
	// reduction stream behind each micro-step's backward.
	// A 1.7B model, so that a rank's partition spans several of
	// reduce_bucket_size's buckets.
	wide := testmodels.Llama(4096, 8, 32, 8, 14336, 32000, "flash")
	add(wide, core.Parallelism{DP: 2, Zero: 2, OverlapComm: true}, 1, 4, "bf16-mixed", "full", 2, 8)
	offload()
	add(wide, core.Parallelism{DP: 2, TP: 2, Zero: 1, OverlapComm: true, SequenceParallel: true}, 1, 3, "bf16-mixed", "none", 4, 8)
	offload()
	add(wide, core.Parallelism{DP: 2, Zero: 2, OverlapComm: true}, 2, 1, "bf16-mixed", "full", 2, 8)
	offload()
	// Composer's train metrics on each micro-batch's logits (a setting the
	// search carries): on one GPU, and on the last stage of a pipeline.
	metrics := func() { out[len(out)-1].Overheads.TrainMetrics = 2 }
	add(llama, core.Parallelism{DP: 8}, 1, 2, "bf16-mixed", "none", 8, 8)
	metrics()
	add(llama, core.Parallelism{DP: 2, PP: 2, Zero: 1}, 1, 4, "bf16-mixed", "full", 4, 8)
	metrics()
	return append(out, carriedPlans()...)
}

// smallMoE is a four-block MoE (8 experts, top-2) small enough to replay
// every layout of a space.
func smallMoE() *core.Model {
	return &core.Model{Name: "moe", Layers: []core.Layer{
		&nn.Embedding{Name: "embed_tokens", Rows: 32000, Dim: 512},
		&core.Repeat{Name: "layers", N: 4, Layer: decoderBlock512(&nn.MoE{Dim: 512, Hidden: 1024, Experts: 8, TopK: 2, Act: "swiglu"})},
		&nn.Norm{Name: "norm", Dim: 512, RMS: true},
	}, Vocab: 32000, Loss: "cross_entropy"}
}

// decoderBlock512 is a Llama-style decoder block of width 512 (8 heads,
// flash attention, RMS norms) with mlp as its feed-forward part.
func decoderBlock512(mlp core.Layer) *core.Sequential {
	return &core.Sequential{Layers: []core.Layer{
		&core.Residual{Layer: &core.Sequential{Layers: []core.Layer{
			&nn.Norm{Name: "input_layernorm", Dim: 512, RMS: true},
			&nn.Attention{Name: "self_attn", Dim: 512, Heads: 8, KVHeads: 8, Impl: "flash", Causal: true, Rope: true},
		}}},
		&core.Residual{Layer: &core.Sequential{Layers: []core.Layer{
			&nn.Norm{Name: "post_attention_layernorm", Dim: 512, RMS: true},
			mlp,
		}}},
	}}
}

// fastPathOf validates p and gives its block profile, its stage shape
// and the fast path's estimate (what Run ranks and bounds by).
func fastPathOf(t *testing.T, p *core.Plan) (*profile, *stageShape, fastEstimate) {
	t.Helper()
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	pr, err := newProfile(p, partsFor(p.Parallel))
	if err != nil {
		t.Fatal(err)
	}
	sh, err := pr.shape(p.Parallel)
	if err != nil {
		t.Fatal(err)
	}
	return pr, sh, pr.estimate(p, sh, nonTorchBytes(p))
}

func relDiff(a, b float64) float64 {
	if a == b {
		return 0
	}
	return math.Abs(a-b) / math.Max(math.Abs(a), math.Abs(b))
}

// The fast path (block profiles) gives the replay's step time, MFU, HFU
// and tokens/s, and a memory bound never above what the replay reports.
func TestSearchFastPathEqualsReplay(t *testing.T) {
	for i, p := range fastPathPlans() {
		t.Run(fmt.Sprintf("%d:%s", i, p.Parallel), func(t *testing.T) {
			pr, sh, fe := fastPathOf(t, p)
			if s := pr.stepSeconds(p, sh); s != fe.time.StepSeconds { // what Run ranks by
				t.Errorf("stepSeconds %.17g, stepTime %.17g", s, fe.time.StepSeconds)
			}
			for _, tp := range []bool{false, true} {
				if b := pr.stepBound(p, sh, tp); b > fe.time.StepSeconds || b <= 0 {
					t.Errorf("step time bound (tensor-parallel collectives %v) %.17g of %.17g", tp, b, fe.time.StepSeconds)
				}
			}
			// Run bounds the step time from the stages' compute alone
			// (fillCompute), the stages' ct as fill sums them.
			bare, err := pr.shape(p.Parallel)
			if err != nil {
				t.Fatal(err)
			}
			bare.fillCompute(pr)
			if len(bare.compute) != len(sh.stages) || bare.stages != nil && !pr.mixed {
				t.Fatalf("%d stages' compute of %d stages", len(bare.compute), len(sh.stages))
			}
			for k := range sh.stages {
				if bare.compute[k] != sh.stages[k].ct {
					t.Errorf("stage kind %d: compute alone %+v, summed with the stage %+v", k, bare.compute[k], sh.stages[k].ct)
				}
			}
			// The bound sums model states chunk by chunk; the states of
			// each stage's summed parameters are the same bytes.
			q := p
			if d, ok := p.DeepspeedPrecision(); ok {
				q = d
			}
			var states int64
			for k := range sh.stages {
				states = max(states, minStates(q, distMode(q), sh.stages[k].params)+nonTorchBytes(p))
			}
			if states != fe.minStates {
				t.Errorf("model states: by chunk %d, of the stages' parameters %d", fe.minStates, states)
			}
			r, err := sim.Evaluate(p, core.Options{})
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				what       string
				fast, full float64
			}{
				{"step_time", fe.time.StepSeconds, r.Time.StepSeconds},
				{"mfu", fe.time.MFU, r.Time.MFU},
				{"hfu", fe.time.HFU, r.Time.HFU},
				{"tokens_per_s", fe.time.TokensPerS, r.Time.TokensPerS},
			} {
				if relDiff(c.fast, c.full) > 1e-9 {
					t.Errorf("%s: fast path %.12g, replay %.12g\nfast %v\nfull %v", c.what, c.fast, c.full, fe.time.Breakdown, r.Time.Breakdown)
				}
			}
			if p.Offload != nil { // the copies and the CPU step are timed, and equal the replay's (above)
				var host, cpuStep float64
				for _, s := range r.Time.Breakdown {
					switch s.Name {
					case "offload":
						host = s.Seconds
					case "cpu_optimizer":
						cpuStep = s.Seconds
					}
				}
				if host <= 0 || cpuStep <= 0 || r.HostMemory == 0 {
					t.Errorf("ZeRO-Offload: %g s of host copies, %g s of CPU step, %d B of host memory", host, cpuStep, r.HostMemory)
				}
			}
			worst := r.DeviceUsed
			for _, rr := range r.Ranks {
				worst = max(worst, rr.DeviceUsed)
			}
			if fe.minDevice > worst || fe.minStates > fe.minDevice {
				t.Errorf("memory bound: states %d, states+activations %d, replay device used %d", fe.minStates, fe.minDevice, worst)
			}
			if fe.minDevice < worst/2 {
				t.Logf("loose memory bound: %d of %d", fe.minDevice, worst)
			}
		})
	}
}

// carriedPlans are layouts of plans with settings a search carries from
// its base plan into every layout (space_base.go): Megatron's flags
// (router_dtype, unpermute_probs, shared_expert_overlap, tp_comm_overlap,
// loss_dp_group, overlap_grad_reduce=False), LoRA, frozen modules,
// torch.compile, FSDP's policy and the cluster's host.
func carriedPlans() []*core.Plan {
	llama := testmodels.Llama(1024, 8, 16, 4, 2816, 32000, "flash")
	moe := topKSoftmaxMoE() // a router whose dtype router_dtype sets
	var out []*core.Plan
	add := func(m *core.Model, par core.Parallelism, mbs, ga int64, prec, ckpt string, gpus, gpn int64, set func(p *core.Plan)) {
		p := testmodels.LlamaPlan(m, mbs, 2048, prec, ckpt, "H100-80GB")
		p.Parallel, p.GradAccum = par, ga
		p.Cluster = hw.Cluster{Nodes: max(gpus/gpn, 1), GPUsPerNode: min(gpn, gpus)}
		set(p)
		out = append(out, p)
	}
	fp32Router := func(p *core.Plan) { p.Parallel.RouterDType = units.FP32 }
	add(moe, core.Parallelism{DP: 8, EP: 4, DistributedOptimizer: true}, 1, 2, "megatron", "none", 8, 8, fp32Router)
	add(moe, core.Parallelism{DP: 4, EP: 2, TP: 2, SequenceParallel: true, DistributedOptimizer: true}, 1, 2, "megatron", "selective", 8, 8, func(p *core.Plan) {
		p.Parallel.RouterDType, p.Parallel.UnpermuteProbs, p.Parallel.TPCommOverlap = units.FP32, true, true
	})
	add(moe, core.Parallelism{DP: 2, EP: 2, TP: 2, ETP: 1, PP: 2, SequenceParallel: true, DistributedOptimizer: true}, 1, 4, "megatron", "full", 8, 8, func(p *core.Plan) {
		p.Parallel.RouterDType, p.Parallel.LossDPGroup = units.FP64, true
	})
	add(llama, core.Parallelism{DP: 2, TP: 4, SequenceParallel: true, DistributedOptimizer: true}, 1, 4, "megatron", "none", 8, 8, func(p *core.Plan) {
		p.Parallel.TPCommOverlap, p.Parallel.NoOverlapGradReduce = true, true
	})
	add(llama, core.Parallelism{DP: 2, TP: 2, PP: 2, SequenceParallel: true, DistributedOptimizer: true}, 1, 4, "megatron", "selective", 8, 8, func(p *core.Plan) {
		p.Parallel.TPCommOverlap, p.Parallel.LossDPGroup = true, true
	})
	lora := func(p *core.Plan) { p.LoRA = &core.LoRA{Rank: 16, Alpha: 32, Targets: []string{"all-linear"}} }
	add(llama, core.Parallelism{}, 2, 1, "bf16-mixed", "none", 1, 8, lora)
	add(llama, core.Parallelism{DP: 8}, 1, 2, "bf16-mixed", "full", 8, 8, lora)
	add(llama, core.Parallelism{DP: 8, Zero: 3}, 1, 1, "bf16-mixed", "selective", 8, 8, lora)
	add(llama, core.Parallelism{DP: 4, TP: 2, FSDP: true, SequenceParallel: true}, 1, 2, "bf16-mixed", "none", 8, 8, lora)
	add(llama, core.Parallelism{DP: 2, PP: 2, Zero: 1}, 1, 4, "bf16-mixed", "none", 4, 8, lora)
	add(llama, core.Parallelism{DP: 8, Zero: 1}, 1, 1, "bf16-mixed", "none", 8, 8, func(p *core.Plan) { p.Freeze = []string{"embed_tokens"} })
	compile := func(p *core.Plan) { p.Compile = core.Compile{Blocks: true, Loss: true} }
	add(llama, core.Parallelism{}, 1, 2, "bf16-mixed", "none", 1, 8, compile)
	add(llama, core.Parallelism{DP: 4, TP: 2, SequenceParallel: true, FSDP: true}, 1, 2, "bf16-mixed", "selective", 8, 8, compile)
	add(llama, core.Parallelism{DP: 2, PP: 2, Zero: 1}, 1, 4, "bf16-mixed", "full", 4, 8, compile)
	add(llama, core.Parallelism{DP: 8, FSDP: true}, 1, 2, "bf16-mixed", "none", 8, 8, func(p *core.Plan) {
		p.Parallel.FSDPParamDType, p.Parallel.FSDPReduceDType = units.BF16, units.FP32
		p.Precision, _ = core.LookupPrecision("fp32")
	})
	add(llama, core.Parallelism{DP: 8, Zero: 2}, 1, 2, "bf16-mixed", "none", 8, 8, func(p *core.Plan) {
		p.Offload = &core.Offload{Optimizer: "cpu"}
		p.Cluster.HostGBps = 200
	})
	// FSDP's options (FSDP1, no resharding, resharding to 2 ranks), torch's
	// pipeline, DTensor's tensor parallelism and loss, Megatron's
	// synchronous tensor-parallel collectives and shared-expert overlap,
	// expert load, dispatch and clipping, gradients kept, expandable
	// segments, Liger's kernels, NCCL's buffers.
	add(llama, core.Parallelism{DP: 8, FSDP: true, FSDPVersion: 1}, 1, 2, "bf16-mixed", "none", 8, 8, func(p *core.Plan) {})
	add(llama, core.Parallelism{DP: 8, FSDP: true, NoReshard: true}, 1, 2, "bf16-mixed", "selective", 8, 8, func(p *core.Plan) {})
	add(llama, core.Parallelism{DP: 8, FSDP: true, ReshardTo: 2}, 2, 1, "bf16-mixed", "none", 8, 8, func(p *core.Plan) {})
	add(llama, core.Parallelism{DP: 2, PP: 2, PPRuntime: "torch", Zero: 1}, 1, 4, "bf16-mixed", "none", 4, 8, func(p *core.Plan) {})
	add(llama, core.Parallelism{DP: 2, TP: 2, PP: 2, PPRuntime: "torch", SequenceParallel: true}, 1, 8, "bf16-mixed", "full", 8, 8, func(p *core.Plan) {})
	add(llama, core.Parallelism{DP: 4, TP: 2, SequenceParallel: true, TPRuntime: "torch", LossParallel: "torch", FSDP: true}, 1, 2, "bf16-mixed", "none", 8, 8, func(p *core.Plan) {})
	add(llama, core.Parallelism{DP: 2, TP: 4, SequenceParallel: true, SyncTPComm: true, DistributedOptimizer: true}, 1, 2, "megatron", "none", 8, 8, func(p *core.Plan) {})
	shared := smallMoE()
	walkModel(shared, func(l core.Layer) {
		if x, ok := l.(*nn.MoE); ok {
			x.SharedExperts, x.Impl = 1, nn.MoEGrouped
		}
	})
	add(shared, core.Parallelism{DP: 4, EP: 2, TP: 2, SequenceParallel: true, DistributedOptimizer: true, SharedExpertOverlap: true}, 1, 2, "megatron", "none", 8, 8, func(p *core.Plan) {})
	add(moe, core.Parallelism{DP: 8, EP: 4, ExpertLoad: 1.5, Zero: 1}, 1, 2, "bf16-mixed", "none", 8, 8, func(p *core.Plan) {})
	add(moe, core.Parallelism{DP: 8, EP: 2, ExpertWorst: true, Zero: 1}, 1, 1, "bf16-mixed", "none", 8, 8, func(p *core.Plan) {})
	add(llama, core.Parallelism{DP: 8}, 1, 2, "bf16-mixed", "none", 8, 8, func(p *core.Plan) {
		p.Overheads = core.Overheads{Dispatch: "compiled", StepSeconds: 0.01, ClipGradNorm: 1}
		p.KeepGrads, p.ExpandableSegments, p.LigerKernels = true, true, true
		p.RuntimeMemory.NCCLBuffSize = 8 << 20
	})
	add(llama, core.Parallelism{DP: 4, TP: 2, SequenceParallel: true, Zero: 3}, 1, 2, "bf16-mixed", "full", 8, 8, func(p *core.Plan) {
		p.Overheads = core.Overheads{Dispatch: "cuda_graphs", ClipGradNorm: 1}
	})
	qlora := func(q string, storage units.DType) func(p *core.Plan) {
		return func(p *core.Plan) {
			p.Quant, p.QuantStorage = q, storage
			p.LoRA = &core.LoRA{Rank: 16, Alpha: 32, Targets: []string{"all-linear"}}
		}
	}
	add(llama, core.Parallelism{}, 2, 1, "bf16-mixed", "none", 1, 8, qlora("nf4", units.InvalidDType))
	add(llama, core.Parallelism{DP: 8}, 1, 2, "bf16-mixed", "full", 8, 8, qlora("nf4-dq", units.InvalidDType))
	add(llama, core.Parallelism{DP: 8, Zero: 2}, 1, 2, "fp16-mixed", "none", 8, 8, qlora("int8", units.InvalidDType))
	add(llama, core.Parallelism{DP: 8, Zero: 3}, 1, 2, "bf16-mixed", "none", 8, 8, qlora("nf4", units.BF16))
	add(llama, core.Parallelism{DP: 8, FSDP: true, FSDPVersion: 1}, 1, 2, "bf16", "none", 8, 8, qlora("nf4", units.BF16))
	add(llama, core.Parallelism{DP: 8, FSDP: true}, 1, 2, "bf16-mixed", "selective", 8, 8, qlora("torchao-nf4", units.InvalidDType))
	add(llama, core.Parallelism{DP: 2, PP: 2, Zero: 1}, 1, 4, "bf16-mixed", "none", 4, 8, qlora("nf4", units.InvalidDType))
	// torchtune's chunked loss and Liger's fused linear cross-entropy
	// (neither with tensor parallelism: the plan rejects those layouts).
	chunks := func(p *core.Plan) { p.LossChunks = 8 }
	add(llama, core.Parallelism{}, 2, 1, "bf16-mixed", "none", 1, 8, chunks)
	add(llama, core.Parallelism{DP: 8, FSDP: true}, 1, 2, "bf16-mixed", "selective", 8, 8, chunks)
	add(llama, core.Parallelism{DP: 2, PP: 2, Zero: 1}, 1, 4, "bf16-mixed", "full", 4, 8, chunks)
	fused := func(p *core.Plan) { p.FusedLoss, p.LigerKernels = "liger", true }
	add(llama, core.Parallelism{DP: 8, Zero: 3}, 1, 2, "bf16-mixed", "none", 8, 8, fused)
	add(llama, core.Parallelism{DP: 8, Zero: 1}, 2, 1, "bf16-mixed", "full", 8, 8, fused)
	add(llama, core.Parallelism{DP: 2, PP: 2, FSDP: true}, 1, 4, "bf16-mixed", "none", 4, 8, func(p *core.Plan) { p.FusedLoss = "liger-0.4.0" })
	// torchao's float8 linears (tensorwise with FSDP2's fp8 all-gather,
	// rowwise) and Transformer Engine's recipes (fp8_param_gather, whose
	// fp8 primary weights the search does not bound, is refused).
	f8 := func(f core.Float8) func(p *core.Plan) { return func(p *core.Plan) { p.Float8 = f } }
	add(llama, core.Parallelism{}, 1, 2, "bf16-mixed", "none", 1, 8, f8(core.Float8{Scaling: "tensorwise"}))
	add(llama, core.Parallelism{DP: 8, FSDP: true}, 1, 2, "bf16-mixed", "selective", 8, 8, f8(core.Float8{Scaling: "tensorwise", AllGather: true}))
	add(llama, core.Parallelism{DP: 8, Zero: 1}, 1, 2, "bf16-mixed", "full", 8, 8, f8(core.Float8{Scaling: "rowwise"}))
	// torchao's float8 under DTensor tensor parallelism (core/float8_tp.go)
	add(llama, core.Parallelism{DP: 4, TP: 2, SequenceParallel: true, FSDP: true, TPRuntime: "torch"}, 1, 2, "bf16-mixed", "full", 8, 8, f8(core.Float8{Scaling: "tensorwise", AllGather: true}))
	add(llama, core.Parallelism{DP: 2, TP: 2, PP: 2, SequenceParallel: true, FSDP: true, TPRuntime: "torch"}, 1, 4, "bf16-mixed", "none", 8, 8, f8(core.Float8{Scaling: "tensorwise"}))
	add(llama, core.Parallelism{DP: 2, TP: 4, SequenceParallel: true, DistributedOptimizer: true}, 1, 2, "megatron", "none", 8, 8, f8(core.Float8{Scaling: "te-delayed"}))
	add(llama, core.Parallelism{DP: 2, TP: 2, PP: 2, SequenceParallel: true, DistributedOptimizer: true}, 1, 4, "megatron", "none", 8, 8, f8(core.Float8{Scaling: "te-tensorwise"}))
	add(llama, core.Parallelism{DP: 8, DistributedOptimizer: true}, 1, 2, "megatron", "full", 8, 8, f8(core.Float8{Scaling: "te-delayed", AmaxHistory: 1024}))
	return out
}
