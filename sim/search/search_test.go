package search

import (
	"os"
	"reflect"

	"context"
	"fmt"
	"math"
	"runtime"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
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
	dense := &core.Sequential{Layers: []core.Layer{
		&core.Residual{Layer: &core.Sequential{Layers: []core.Layer{
			&nn.Norm{Name: "input_layernorm", Dim: 512, RMS: true},
			&nn.Attention{Name: "self_attn", Dim: 512, Heads: 8, KVHeads: 8, Impl: "flash", Causal: true, Rope: true},
		}}},
		&core.Residual{Layer: &core.Sequential{Layers: []core.Layer{
			&nn.Norm{Name: "post_attention_layernorm", Dim: 512, RMS: true},
			&nn.MLP{Dim: 512, Hidden: 2048, Act: "swiglu"},
		}}},
	}}
	sparse := &core.Sequential{Layers: []core.Layer{
		&core.Residual{Layer: &core.Sequential{Layers: []core.Layer{
			&nn.Norm{Name: "input_layernorm", Dim: 512, RMS: true},
			&nn.Attention{Name: "self_attn", Dim: 512, Heads: 8, KVHeads: 8, Impl: "flash", Causal: true, Rope: true},
		}}},
		&core.Residual{Layer: &core.Sequential{Layers: []core.Layer{
			&nn.Norm{Name: "post_attention_layernorm", Dim: 512, RMS: true},
			&nn.MoE{Dim: 512, Hidden: 1024, Experts: 8, TopK: 2, Act: "swiglu"},
		}}},
	}}
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
	return append(out, carriedPlans()...)
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
	add(llama, core.Parallelism{DP: 2, TP: 4, SequenceParallel: true, DistributedOptimizer: true}, 1, 2, "megatron", "none", 8, 8, f8(core.Float8{Scaling: "te-delayed"}))
	add(llama, core.Parallelism{DP: 2, TP: 2, PP: 2, SequenceParallel: true, DistributedOptimizer: true}, 1, 4, "megatron", "none", 8, 8, f8(core.Float8{Scaling: "te-tensorwise"}))
	add(llama, core.Parallelism{DP: 8, DistributedOptimizer: true}, 1, 2, "megatron", "full", 8, 8, f8(core.Float8{Scaling: "te-delayed", AmaxHistory: 1024}))
	return out
}

// smallMoE is a four-block MoE (8 experts, top-2) small enough to replay
// every layout of a space.
func smallMoE() *core.Model {
	return &core.Model{Name: "moe", Layers: []core.Layer{
		&nn.Embedding{Name: "embed_tokens", Rows: 32000, Dim: 512},
		&core.Repeat{Name: "layers", N: 4, Layer: &core.Sequential{Layers: []core.Layer{
			&core.Residual{Layer: &core.Sequential{Layers: []core.Layer{
				&nn.Norm{Name: "input_layernorm", Dim: 512, RMS: true},
				&nn.Attention{Name: "self_attn", Dim: 512, Heads: 8, KVHeads: 8, Impl: "flash", Causal: true, Rope: true},
			}}},
			&core.Residual{Layer: &core.Sequential{Layers: []core.Layer{
				&nn.Norm{Name: "post_attention_layernorm", Dim: 512, RMS: true},
				&nn.MoE{Dim: 512, Hidden: 1024, Experts: 8, TopK: 2, Act: "swiglu"},
			}}},
		}}},
		&nn.Norm{Name: "norm", Dim: 512, RMS: true},
	}, Vocab: 32000, Loss: "cross_entropy"}
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
			fe := pr.estimate(p, sh, nonTorchBytes(p))
			if s := pr.stepSeconds(p, sh); s != fe.time.StepSeconds { // what Run ranks by
				t.Errorf("stepSeconds %.17g, stepTime %.17g", s, fe.time.StepSeconds)
			}
			if b := pr.stepBound(p, sh); b > fe.time.StepSeconds || b <= 0 {
				t.Errorf("step time bound %.17g of %.17g", b, fe.time.StepSeconds)
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

// llama3_70B is Llama-3-70B (80 layers, hidden 8192, 64 heads, 8 kv heads,
// FFN 28672, vocabulary 128,256).
func llama3_70B() *core.Model { return testmodels.Llama(8192, 80, 64, 8, 28672, 128256, "flash") }

// search70B is the issue's interactive case: Llama-3-70B on 1,024 H100s
// (128 nodes of 8), sequences of 8,192 tokens, 1,024 sequences (8M
// tokens) per step, Megatron's precision, over the default layout space.
func search70B(workers int) (*Result, error) {
	base := testmodels.LlamaPlan(llama3_70B(), 1, 8192, "megatron", "none", "H100-80GB")
	return Run(context.Background(), base, Space{GPUs: 1024, GlobalBatch: 1024, Top: 10, Workers: workers})
}

// BenchmarkSearchLlama70B1024 searches the full layout space of
// Llama-3-70B on 1,024 H100s; plans/s/core counts the layouts of the space
// over the time and the cores (GOMAXPROCS) used.
func BenchmarkSearchLlama70B1024(b *testing.B) {
	workers := runtime.GOMAXPROCS(0)
	var res *Result
	for i := 0; i < b.N; i++ {
		var err error
		if res, err = search70B(workers); err != nil {
			b.Fatal(err)
		}
	}
	perOp := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(float64(res.Stats.Layouts+res.Stats.Invalid)/perOp/float64(workers), "plans/s/core")
	b.ReportMetric(float64(res.Stats.Replayed), "replays")
	b.ReportMetric(float64(res.Stats.StageDominated), "stage-dominated")
}

// The interactive case: every row fits, rows are fastest first, the
// best layouts keep tensor parallelism inside a node, and the front
// trades time for memory. (The whole space is examples/search_70b.star's,
// held by its golden; this test narrows checkpointing and the cp mode to
// keep CI short.)
func TestSearchLlama70B1024(t *testing.T) {
	if testing.Short() {
		t.Skip("searches the layout space of a 70B model")
	}
	base := testmodels.LlamaPlan(llama3_70B(), 1, 8192, "megatron", "none", "H100-80GB")
	res, err := Run(context.Background(), base, Space{GPUs: 1024, GlobalBatch: 1024, Top: 10, Workers: 2,
		Checkpoint: []string{"none", "full"}, CPModes: []string{"ring"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 10 || res.Stats.Layouts < 10000 || len(res.Front) < 10 {
		t.Fatalf("rows %d, front %d, stats %+v", len(res.Rows), len(res.Front), res.Stats)
	}
	// The front runs from the fastest layout to ever smaller ones, and
	// the fastest is on it.
	if res.Front[0].Report != res.Rows[0].Report {
		t.Errorf("the fastest layout is not the front's first")
	}
	for i := 1; i < len(res.Front); i++ {
		a, b := res.Front[i-1].Report, res.Front[i].Report
		if !(b.Time.StepSeconds > a.Time.StepSeconds && DeviceMemory(b) < DeviceMemory(a)) {
			t.Errorf("front %d (%.4g s, %d B) does not trade time for memory against %d (%.4g s, %d B)", i,
				b.Time.StepSeconds, DeviceMemory(b), i-1, a.Time.StepSeconds, DeviceMemory(a))
		}
	}
	for i, row := range res.Rows {
		r := row.Report
		if !r.Fits {
			t.Errorf("row %d does not fit", i)
		}
		if i > 0 && r.Time.StepSeconds < res.Rows[i-1].Report.Time.StepSeconds {
			t.Errorf("row %d is faster than row %d", i, i-1)
		}
		if tp := row.Plan.Parallel.Norm().TP; tp > 8 {
			t.Errorf("row %d: tp=%d crosses nodes", i, tp)
		}
		if r.Time.MFU < 0.25 || r.Time.MFU > 0.6 {
			t.Errorf("row %d: MFU %.3f outside the 25-60 %% band of a healthy large run", i, r.Time.MFU)
		}
	}
}

// llama3_405B is Llama 3.1 405B (126 layers, hidden 16,384, 128 heads, 8
// kv heads, FFN 53,248, vocabulary 128,256).
func llama3_405B() *core.Model {
	return testmodels.Llama(16384, 126, 128, 8, 53248, 128256, "flash")
}

// The Llama 3 paper's layout (Dubey et al. 2024, "The Llama 3 Herd of
// Models", Table 4): 16,384 H100s, sequences of 8,192 tokens, 16M tokens
// (2,048 sequences) per step, tp 8, pp 16, cp 1, dp 128, 400 TFLOP/s per
// GPU, BF16 MFU 41 %; one layer fewer on the first and the last stage
// (126 layers on 16 stages of 8, Megatron's embedding and loss slots).
// Searched around it (tp 4 or 8, pp 8 or 16, cp 1 or 2, micro-batch 1,
// every checkpoint policy, schedule and sharding), a layout with the
// paper's tensor and pipeline degrees is among the five fastest that fit
// (issue 26: "near the top"), and its MFU is within 5 points of the
// paper's. Since memsh lowers Megatron's fused norms and SwiGLU (less
// memory a stage), tp 8, pp 8, cp 2 interleaved fits and is 1.4 % faster
// (6.556 against 6.649 s); the step difference is logged, not bounded:
// the paper chose its layout for more than the step time. (memsh puts the paper's exact layout,
// cp 1 and no recompute, at 79-88 GiB a GPU, 102-114 GiB with the eager
// layers: the paper does not say how it fit 80 GB.)
func TestSearchLlama405BPaperLayout(t *testing.T) {
	if testing.Short() {
		t.Skip("searches 405B layouts on 16,384 GPUs")
	}
	base := testmodels.LlamaPlan(llama3_405B(), 1, 8192, "megatron", "none", "H100-80GB")
	res, err := Run(context.Background(), base, Space{GPUs: 16384, GlobalBatch: 2048, TP: []int64{4, 8}, PP: []int64{8, 16},
		CP: []int64{1, 2}, MicroBatch: []int64{1}, Top: 5, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) == 0 {
		t.Fatalf("no layout fits: %+v", res.Stats)
	}
	fastest := res.Rows[0].Report.Time.StepSeconds
	var paper *Row
	for i := range res.Rows {
		par := res.Rows[i].Plan.Parallel.Norm()
		if par.TP == 8 && par.PP == 16 && par.EmbeddingSlot && par.LossSlot {
			paper = &res.Rows[i]
			break
		}
	}
	if paper == nil {
		t.Fatalf("no layout with the paper's tp 8 and pp 16 (a layer fewer on the first and last stage) among the %d fastest; the fastest is %s", len(res.Rows), res.Rows[0].Plan.Parallel.Norm())
	}
	par, step := paper.Plan.Parallel.Norm(), paper.Report.Time.StepSeconds
	t.Logf("fastest %s, %.3f s; the paper's degrees %s, %.3f s", res.Rows[0].Plan.Parallel.Norm(), fastest, par, step)
	if mfu := paper.Report.Time.MFU; math.Abs(mfu-0.41) > 0.05 {
		t.Errorf("%s: MFU %.3f, the paper's 0.41", par, mfu)
	}
}

// BenchmarkSearchLlama405B16384 searches the whole layout space of Llama
// 3.1 405B on 16,384 H100s, 2,048 sequences of 8,192 tokens a step.
func BenchmarkSearchLlama405B16384(b *testing.B) {
	workers := runtime.GOMAXPROCS(0)
	base := testmodels.LlamaPlan(llama3_405B(), 1, 8192, "megatron", "none", "H100-80GB")
	var res *Result
	for i := 0; i < b.N; i++ {
		var err error
		if res, err = Run(context.Background(), base, Space{GPUs: 16384, GlobalBatch: 2048, Top: 10, Workers: workers}); err != nil {
			b.Fatal(err)
		}
	}
	perOp := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(float64(res.Stats.Layouts+res.Stats.Invalid), "layouts")
	b.ReportMetric(float64(res.Stats.Layouts+res.Stats.Invalid)/perOp/float64(workers), "plans/s/core")
	b.ReportMetric(float64(res.Stats.Replayed), "replays")
}

// BenchmarkEvaluateLlama70B3D replays one layout as search replays its
// rows: Llama-3-70B, TP 8 x PP 4 x DP 32 with the distributed optimizer,
// 8 micro-batches of one 8,192-token sequence (four stage replays).
func BenchmarkEvaluateLlama70B3D(b *testing.B) {
	p := testmodels.LlamaPlan(llama3_70B(), 1, 8192, "megatron", "none", "H100-80GB")
	p.GradAccum = 8
	p.Parallel = core.Parallelism{DP: 32, TP: 8, PP: 4, SequenceParallel: true, DistributedOptimizer: true}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := sim.Evaluate(p, core.Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSearchEstimate is the fast path alone: the estimate and memory
// bound of one layout from its profile (the same layout as above).
func BenchmarkSearchEstimate(b *testing.B) {
	p := testmodels.LlamaPlan(llama3_70B(), 1, 8192, "megatron", "none", "H100-80GB")
	p.GradAccum = 8
	p.Parallel = core.Parallelism{DP: 32, TP: 8, PP: 4, SequenceParallel: true, DistributedOptimizer: true}
	pr, err := newProfile(p, partsFor(p.Parallel))
	if err != nil {
		b.Fatal(err)
	}
	sh, err := pr.shape(p.Parallel)
	if err != nil {
		b.Fatal(err)
	}
	nonTorch := nonTorchBytes(p)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		pr.estimate(p, sh, nonTorch)
	}
}

// A model without a repeat() has no blocks to profile: the whole model is
// one unit, and there is no pipeline to search.
func TestSearchWithoutRepeat(t *testing.T) {
	m := &core.Model{Name: "flat", Layers: []core.Layer{
		&nn.Embedding{Name: "embed", Rows: 1000, Dim: 64},
		&nn.MLP{Dim: 64, Hidden: 256, Act: "gelu"},
	}, Vocab: 1000, Loss: "cross_entropy"}
	base := testmodels.LlamaPlan(m, 1, 128, "bf16-mixed", "none", "A100-80GB")
	res, err := Run(context.Background(), base, Space{GPUs: 8, GlobalBatch: 16, Top: 3, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 3 {
		t.Fatalf("%d rows, stats %+v", len(res.Rows), res.Stats)
	}
	for _, row := range res.Rows {
		if row.Plan.Parallel.Norm().PP != 1 {
			t.Errorf("pipeline without blocks: %v", row.Plan.Parallel)
		}
		pr, err := newProfile(row.Plan, partsFor(row.Plan.Parallel))
		if err != nil {
			t.Fatal(err)
		}
		sh, err := pr.shape(row.Plan.Parallel)
		if err != nil {
			t.Fatal(err)
		}
		fe := pr.estimate(row.Plan, sh, nonTorchBytes(row.Plan))
		if relDiff(fe.time.StepSeconds, row.Report.Time.StepSeconds) > 1e-9 {
			t.Errorf("%v: fast %.9g, replay %.9g", row.Plan.Parallel, fe.time.StepSeconds, row.Report.Time.StepSeconds)
		}
	}
}

// TestSearchExploresIssue18Modes: with sharding=["hsdp"] and both
// context-parallel modes the search enumerates HSDP layouts (sharded
// inside a node of 4, replicated across the 4 nodes), Ulysses layouts,
// and, for 8 blocks on pp=5, Megatron's embedding and loss slots; every
// row it returns is a full replay of its plan.
func TestSearchExploresIssue18Modes(t *testing.T) {
	base := testmodels.LlamaPlan(testmodels.Llama(1024, 8, 16, 4, 2816, 32000, "flash"), 1, 2048, "bf16-mixed", "none", "H100-80GB")
	space := Space{GPUs: 20, GPUsPerNode: 4, GlobalBatch: 40, TP: []int64{1}, PP: []int64{1, 5}, CP: []int64{1, 2},
		Sharding: []string{"fsdp", "hsdp"}, CPModes: []string{"ring", "ulysses"}, MicroBatch: []int64{1}, Checkpoint: []string{"full"},
		Virtual: []int64{1}, Workers: 2}
	res, err := Run(context.Background(), base, space)
	if err != nil {
		t.Fatal(err)
	}
	var hsdp, ulysses, slots bool
	for _, r := range res.Rows {
		par := r.Plan.Parallel
		hsdp = hsdp || (r.Sharding == "hsdp" && par.DPReplicate*4 == par.DP*par.CP)
		ulysses = ulysses || par.CPMode == "ulysses"
		slots = slots || (par.PP == 5 && par.EmbeddingSlot && par.LossSlot)
		if r.Sharding == "hsdp" && (par.DPReplicate <= 1 || par.DPReplicate >= par.DP*par.CP || par.DP%par.DPReplicate != 0) {
			t.Errorf("%s: HSDP with %d replicas of dp x cp = %d ranks", par, par.DPReplicate, par.DP*par.CP)
		}
	}
	if !hsdp || !ulysses || !slots {
		t.Errorf("rows with HSDP sharded over a node's 4 ranks %v, Ulysses %v, embedding and loss slots %v; want all (%d rows)", hsdp, ulysses, slots, len(res.Rows))
	}
}

// The search places DeepSeek-V3 (61 layers of MLA, 58 of them MoE with
// 256 experts) over expert parallelism: pipelines whose stages take the
// embedding and the loss as a block each (9 x 7 = 61 + 2), experts spread
// over 32 or 64 ranks.
func TestSearchDeepSeekV3ExpertParallel(t *testing.T) {
	data, err := os.ReadFile("../testdata/hf/deepseek-v3.json")
	if err != nil {
		t.Fatal(err)
	}
	m, err := hf.FromConfig(data, "flash")
	if err != nil {
		t.Fatal(err)
	}
	p := testmodels.LlamaPlan(m, 1, 4096, "megatron", "full", "H100-80GB")
	res, err := Run(context.Background(), p, Space{GPUs: 2304, GlobalBatch: 4096, TP: []int64{1}, PP: []int64{9},
		EP: []int64{32, 64}, MicroBatch: []int64{1}, Checkpoint: []string{"full"}, Virtual: []int64{1}, Top: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) == 0 {
		t.Fatalf("no layout fits: %+v", res.Stats)
	}
	for _, row := range res.Rows {
		if row.Plan.Parallel.EP < 32 || !row.Report.Fits {
			t.Errorf("row %+v: want a fitting layout with ep >= 32", row.Plan.Parallel)
		}
	}
}

// A stage's units summed in one pass (stageUnits, what fill does) are
// the chain of adds that defines them, figure for figure and list for
// list: chunk by chunk, each chunk its base plus its blocks; the stages
// of one profile summed in one room keep lists of their own (compared
// once all are summed), and a shape filled again in that room is the
// shape filled alone.
func TestStageUnitsEqualChainedSums(t *testing.T) {
	stages := 0
	for i, p := range fastPathPlans() {
		if p.Parallel.Norm().PP <= 1 {
			continue
		}
		pr, err := newProfile(p, stageUnits)
		if err != nil {
			t.Fatal(err)
		}
		if pr.mixed {
			continue
		}
		sh, err := pr.shape(p.Parallel)
		if err != nil {
			t.Fatal(err)
		}
		room := &stageRoom{}
		looked := &stageRoom{of: pr} // as a room that found two collectives alike: mergeComm's lookups
		got := make([]unitSums, len(sh.chunks))
		for k, cks := range sh.chunks {
			got[k] = pr.stageUnits(cks, room)
		}
		if room.sums == nil {
			t.Errorf("%d:%s: the collectives were not numbered", i, p.Parallel)
		}
		for k, cks := range sh.chunks {
			var want unitSums
			for _, ck := range cks {
				want = want.add(pr.chunk(ck), 1)
			}
			if !reflect.DeepEqual(got[k], want) {
				t.Errorf("%d:%s stage kind %d: one pass\n%+v\nchained\n%+v", i, p.Parallel, k, got[k], want)
			}
			if l := pr.stageUnits(cks, looked); !reflect.DeepEqual(l, want) {
				t.Errorf("%d:%s stage kind %d: looked up\n%+v\nchained\n%+v", i, p.Parallel, k, l, want)
			}
			stages++
		}
		alone, err := pr.shape(p.Parallel)
		if err != nil {
			t.Fatal(err)
		}
		alone.fill(pr)
		sh.fillIn(pr, room) // the room has summed these stages
		if !reflect.DeepEqual(sh.stages, alone.stages) || !reflect.DeepEqual(sh.stages, got) {
			t.Errorf("%d:%s: a shape filled in a used room differs from one filled alone", i, p.Parallel)
		}
	}
	if stages < 20 {
		t.Errorf("%d stage kinds compared: the plans lost their pipelines", stages)
	}
}

// heldFor counts each chunk's forwards in flight as a walk over them
// does (forward j runs the stage's chunk (j mod pp*v) div pp).
func TestHeldForCountsForwards(t *testing.T) {
	for pp := int64(1); pp <= 7; pp++ {
		for v := int64(1); v <= 4; v++ {
			saved := make([]int64, pp*v)
			for g := range saved {
				saved[g] = int64(1+g) * 1000003 // distinct, so a miscounted chunk shows
			}
			for s := int64(0); s < pp; s++ {
				for n := int64(0); n <= 3*pp*v+2; n++ {
					var want int64
					for j := range n {
						want += saved[(j%(pp*v))/pp*pp+s]
					}
					if got := heldFor(saved, pp, v, s, n); got != want {
						t.Errorf("pp %d v %d stage %d, %d in flight: %d, walked %d", pp, v, s, n, got, want)
					}
				}
			}
		}
	}
}
