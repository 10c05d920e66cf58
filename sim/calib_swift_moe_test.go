package sim

import (
	"math"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/units"
)

// TestMegatronSwiftCalibration replays Megatron-SWIFT's full-parameter
// SFT runs (github.com/modelscope/ms-swift, docs/source_en/Instruction/
// Megatron-SWIFT-Training.md "Benchmark", and the figures at the top of
// examples/train/megatron/base_to_chat.sh and moe/moe.sh; the
// Qwen3-30B-A3B row from examples/train/megatron/qwen3_moe.sh at
// ad907793e, copied into docs/source_en/BestPractices/
// Qwen3-Best-Practice.md at 0f31a5a9e: calib_swift_moe_sources_test.go
// dates every row). Every run: A800-80GB (an A100-80GB with NVLink
// capped at 400 GB/s both ways), bf16 with Megatron's
// distributed optimizer (ms-swift's default use_distributed_optimizer),
// packed padding-free rows of max_length 8192, micro-batch 1, global
// batch 16, flash attention; MoE blocks as grouped GEMMs with the
// alltoall dispatcher (ms-swift's defaults). The memory is what
// nvidia-smi shows per GPU (the scripts' "GiB"), against memsh's device
// figure of the fullest rank; the step is s/it.
//
// The experts' tensor parallelism is the layout's tp: none of the scripts
// sets it, ms-swift had no expert_tensor_parallel_size argument at these
// commits (swift/megatron/argument/megatron_args.py at 0f31a5a9e and
// ea23c5e9d; a9ffe72bb added one, "Defaults to None, which inherits the
// value of --tensor_model_parallel_size"), and Megatron-LM sets
// args.expert_tensor_parallel_size = args.tensor_model_parallel_size when
// it is None (megatron/training/arguments.py at core_v0.12.0 l.358). So
// the tp 2 rows run expert tp 2: each rank holds half of every local
// expert's hidden size, the dispatcher all-gathers the received rows over
// the expert tp pair and reduce-scatters the outputs, and the expert grid
// (tp=etp fastest, then ep) strides ep by 2: Qwen3-30B-A3B's ep 8 spans
// both nodes, Qwen1.5-MoE's ep 4 the node; the expert-data-parallel group
// is one rank in both (16 / (2 x 8), 8 / (2 x 4)). memsh ran them at
// expert tp 1 before: tp 2 ep 4 65 GiB / 3 s measured, memsh 59.7 GiB ->
// 53.5 GiB, 2.06 -> 2.22 s; Qwen3-30B-A3B 60 GiB / 9.6 s measured,
// 52.6 -> 42.9 GiB, 3.07 -> 5.48 s (the all-to-all over the network, at
// memsh's default A100 fabric: the cluster's is not stated, below).
//
// The software: ms-swift's Megatron docs at ea23c5e9d, 0f31a5a9e and
// c3f3ca4a4 recommend PyTorch 2.5 / 2.6 and name the image
// modelscope:ubuntu22.04-cuda12.4.0-py31x-torch2.6.0-...; both releases'
// wheels require nvidia-nccl-cu12==2.21.5 (the dense figure's doc at
// 9d297f99a names none; 2.5 and 2.6 were the releases of its time). NCCL
// before 2.22 connects every communicator's ring and tree when it is made
// (no NCCL_RUNTIME_CONNECT): runtime "cuda-2.6" with nccl_connect "eager".
// With Megatron's communicators (replay/nccl_megatron.go: the world group
// of the distributed optimizer's gradient norm, the dispatcher's tp_ep and
// etp groups, the aux loss's tp_cp group, each its own communicator) that
// is 2.4 GiB (dense: tp, dp, world) to 5.6 GiB (tp 2 ep 4: tp, dp, ep,
// world, tp_ep, etp, tp_cp) of NCCL buffers: dense 57.9 -> 59.2 GiB
// (-10.9 -> -8.9 %), MoE pp 2 39.9 -> 42.6 and 58.3 -> 60.9 GiB, tp 2 ep 4
// 53.5 -> 57.1 GiB, Qwen3-30B-A3B 42.9 -> 46.5 GiB.
//
// Megatron overlaps the data-parallel gradient reduction and parameter
// gather only with --overlap_grad_reduce / --overlap_param_gather (both
// False by default in ms-swift's MegatronArguments and in Megatron-LM);
// moe.sh sets them, base_to_chat.sh (at 9d297f99a, the figure's commit)
// and the Qwen3 script (at 0f31a5a9e) do not: those rows run with
// overlap_grad_reduce=False, overlap_param_gather=False (dense step
// +18.2 -> +19.0 %, Qwen3-30B-A3B -60.4 -> -55.3 % before the expert
// grid below).
//
// Megatron's column-parallel linears run their backward's tensor-parallel
// collectives beside the other GEMM (sim/timing/tp_overlap.go; core_r0.12
// and core_r0.13 have it): dense step 10.62 -> 9.62 s (+17.5 -> +6.4 %);
// the held-back tp 2 ep 4 row moved away, 2.26 -> 2.16 s (-24.8 ->
// -27.9 %: its gap is elsewhere, unknown), Qwen3-30B-A3B 4.49 -> 4.45 s.
// Megatron-Core's fused linear_qkv and linear_fc1 re-gather their input
// once each (core/tp.go, recordInputComm), not once per q, k, v, gate and
// up: dense step 9.62 -> 9.32 s (+6.4 -> +3.1 %), Qwen3-30B-A3B 4.45 ->
// 4.43 s, tp 2 ep 4 unchanged (2.16 s).
//
// The dense row is the control: Megatron's states and activations as
// memsh lays them out land on it (-8.9 %). The MoE rows land on time for
// Qwen1.5-MoE at tp 1 and not on memory: memsh finds 42.6 GiB where the
// script says 57 GiB, and for Qwen3-30B-A3B 46.5 GiB against 60 GiB and
// a step of 4.5 s against 9.6 s. No term with a named cause closes these gaps
// (the replay's states, checkpointed layer inputs, the recomputed MoE
// layer, NCCL's ep buffers and the loss are all there, and the same
// accounting lands on the dense row); they are recorded here, not fitted
// (issue 19, left open). Ruled out so far:
//   - the experts' optimizer states: Megatron shards them over the
//     expert-data-parallel group (world / (pp x ep x expert_tp): 1 on
//     every row here), as the replay does; its fullest
//     Qwen1.5-MoE rank holds 2.67 B parameters (bf16 4.97 GiB, fp32 grads
//     9.94 GiB), fp32 master 1.93 B (7.2 GiB) and Adam 14.4 GiB: 36.5 GiB
//     of states, 2.0 GiB of activations;
//   - moe.sh's PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, modelled
//     on its row: 0.4 GiB less (less fragmentation);
//   - any sharding rule for the optimizer states: with none at all (18 B
//     a parameter on all 2.67 B) the fullest Qwen1.5-MoE rank would hold
//     44.8 GiB of states, still 10 GiB short of 57 less memsh's 3.5 GiB
//     of activations, temporaries, context and NCCL buffers;
//   - the figure's other settings (c3f3ca4a4: moe_permute_fusion,
//     moe_router_dtype fp32, moe_shared_expert_overlap,
//     moe_aux_loss_coeff 0.01, cross_entropy_loss_fusion;
//     TransformerEngine release_v2.3, Megatron-LM core_r0.13.0): none
//     holds more than a layer's routed rows (8192 x top-4 x 2048 bf16 =
//     128 MiB) at a time.
//
// Where the gap sits: the same model without recompute comes closer
// (the two held-back rows, moe.sh at ea23c5e9d: pp 2 -13.3 %, tp 2
// -4.1 % on memory), and from that pp 2 run to the figure's, full
// recompute (with the 13/11 split and the overlap flags) saves 16 GiB
// measured and 23 GiB in memsh. Nothing in Megatron-LM core_v0.13.0
// (the figure's; core_r0.12.0 for the older runs and Qwen3) escapes the
// recompute:
// CheckpointFunction runs each layer under no_grad and saves only its
// inputs; the alltoall dispatcher keeps, between forward and backward,
// only [tokens, experts]-sized attributes (probs, routing_map, the
// permutation map: about 4 MiB a layer); the shared expert's overlap
// buffers (shared_experts.py) are dropped as they are used.
//
// The routed experts are now lowered as Megatron-Core 0.13 runs them
// (nn/moe_megatron.go: the fused SwiGLU keeps its input, not silu(gate)
// too; the probs are applied in it, and the unpermute keeps no copy of
// the experts' outputs): 216 MiB less a Qwen1.5-MoE layer (8192 tokens,
// 32768 routed rows), which moved the held-back pp 2 row from -6.7 to
// -13.3 % (68.1 -> 63.3 GiB) and tp 2 from -0.4 to -4.1 %. That row ran
// core_r0.12.0, whose unpermute still weighted and kept the outputs
// (128 MiB a layer, 3 GiB over the first stage's 24 layer-microbatches);
// and memsh still lowers the norms and the shared expert eagerly, where
// Transformer Engine's RMSNorm keeps the bf16 input, not an fp32 copy
// and the normalized input (64 MiB less a norm), and the shared expert's
// fused SwiGLU does not keep silu(gate) (88 MiB): 5 GiB more over those
// 24. With Megatron's own saved tensors the row would be about 61 GiB
// against 73: 12 GiB short, against 17 GiB in the full-recompute row.
// Most of the missing memory thus does not depend on recompute and is
// not in the MoE layer's saved tensors: the one MoE row measured as max
// allocated memory (Megatron-Bridge's Qwen3-30B-A3B, ep 16,
// calib_bridge_moe_test.go) lands within 2.2 % once the norms are fused
// too (branch moe2-te-kernels), while these rows are nvidia-smi's
// (reserved memory, the CUDA context, NCCL and anything else in the
// process). With the norms and every SwiGLU fused (that branch), the
// tp 2 rows, the dense control's included, miss 5-7 GiB, the pp 2 rows
// 12-17 GiB.
//
// The Qwen3-30B-A3B run (0f31a5a9e) differs: no moe_permute_fusion (the
// unfused permute), no moe_router_dtype (the router in bf16), no
// overlap flags, eval_iters 50 every 200 steps and save_interval 200
// (whether ms-swift's s/it counts them is not stated). Megatron's
// expert grid (parallel_state.py at core_v0.12.0, RankGenerator(tp=etp,
// ep, dp=edp)) puts expert tp fastest, then ep; with expert tp 1 ep 8
// would sit on eight consecutive ranks inside a node (memsh had it so:
// 3.07 s, -68 %), but the run's expert tp is 2 (above).
//
// Megatron's dispatcher as the runs had it (nn/moe_megatron.go): under
// expert tp 2 each rank routes its own sequence-parallel tokens and
// all-gathers the received rows over the expert tp pair after the ep
// all-to-all (memsh had gathered the layer input first, sending twice the
// rows through the all-to-all), and with more than one local expert
// sort_chunks_by_idxs copies the received rows into local-expert order
// and back (each copy reads and writes them, forward and backward:
// timing/moe.go). Steps: pp 2 full recompute 2.82 -> 2.89 s, pp 2 no
// recompute 2.33 -> 2.37 s, tp 2 ep 4 2.22 -> 2.26 s, Qwen3-30B-A3B 5.48
// -> 4.49 s (its all-to-all over the network halves: 3.2 -> 1.6 s). Not
// priced: the dispatcher's host sync (_maybe_dtoh_and_synchronize at
// "before_ep_alltoall", core_v0.13.0: the split sizes copied to the CPU
// before the all-to-all) in each MoE layer's forward and recompute. It
// costs the time the CPU takes from it to the next long kernel, the
// all-to-all it launches at once: tens of microseconds against 2-5 ms of
// GPU work a layer here, not the tp 2 ep 4 row's missing 0.7 s.
//
// The Qwen3-30B-A3B all-to-all crosses the nodes (expert tp 2, above):
// 1.6 s of its 4.5 s step at memsh's A100 default of one 200 Gb/s NIC per
// GPU (timing.InterNodeGBps). The best practice says "Alibaba Cloud DLC
// ... two nodes equipped with 8x 80GiB A800 GPUs each" and nothing of the
// network (nor do ms-swift#4030 and QwenLM/Qwen3#1278, where the same run
// is posted); a slower fabric would close some of the gap, and no rate is
// assumed to fit it. Read again (December 2026): the doc links Alibaba's
// DLC environment variables page and ms-swift's multi-node examples,
// neither of which names a NIC; PAI's RDMA page
// (help.aliyun.com/.../pai/use-a-custom-image) lists the Lingjun A800
// specifications (ml.gu7xf.*-gu108) with their NCCL variables and no
// bandwidth. Nothing found states it, so the test prints the step over the
// plausible fabrics (per GPU and direction, memsh's all-to-all of one NIC
// share a GPU, as NCCL runs it: sjeaugey in NVIDIA/nccl-tests#130 and
// #267): 4 x 100 Gb/s a node 9.31 s (-3.0 %), 4 x 200 Gb/s 6.06 s
// (-36.9 %), 8 x 200 Gb/s (memsh's default) 4.43 s (-53.8 %), 8 x 400
// Gb/s 3.63 s (-62.2 %). The row lands only on the slowest of them.
//
// Megatron's start and first step (replay/lazy_states.go,
// shard_megatron.go): the model's own parameter tensors freed once DDP
// moves them into its buffer, an fp32 main shard per parameter (one per
// expert of a grouped weight), and Adam's moments made lazily by the
// first optimizer.step(), after a forward and backward that left their
// blocks in the cache, so that the second step's activations need new
// segments. nvidia-smi keeps the most reserved over both steps (go test
// ./sim -run TestMegatronSwiftCalibration -v): dense 59.2 -> 61.6 GiB
// (-8.9 -> -5.3 %), pp 2 no recompute 60.9 -> 63.2 (-16.5 -> -13.4 %),
// tp 2 ep 4 56.4 -> 57.7 (-13.2 -> -11.3 %), Qwen3-30B-A3B 46.5 -> 48.3
// (-22.6 -> -19.5 %); the figure's pp 2 row runs with expandable_segments,
// whose one growing range leaves nothing of the kind: 42.6 GiB either way.
// The lazy moments alone (flat) gave 60.4 / 60.9 / 57.0 / 48.0 GiB, one
// tensor per shard 60.6 / 62.6 / 57.4 / 48.2, the freed model tensors the
// rest. The Megatron-Bridge row is max allocated, which this leaves as it
// was (+2.2 %).
//
// The loss's own communicator (parallel(loss_dp_group=True),
// replay/nccl_megatron.go): before Megatron-Core 0.13 the loss is
// all-reduced over DATA_PARALLEL_GROUP, which Megatron makes apart from
// the gradients' DATA_PARALLEL_GROUP_WITH_CP even at cp 1: pretrain_gpt.py's
// loss_func (l.213 at core_v0.12.0, l.198 at core_v0.11.0; the dense
// row's ms-swift at 9d297f99a runs it: swift/megatron/train/utils.py
// "from pretrain_gpt import loss_func"), ms-swift's own loss_func at
// ea23c5e9d and 0f31a5a9e ("if not megatron_core_013", trainer.py l.322)
// and the token count of calculate_per_token_loss (ms-swift's default;
// finalize_model_grads.py l.327). One more ring and tree under NCCL 2.21's
// eager connection, 576 MiB: dense 61.6 -> 62.1 GiB (-5.3 -> -4.4 %), pp 2
// no recompute 63.2 -> 63.8 (-13.4 -> -12.7 %), tp 2 ep 4 57.7 -> 58.2
// (-11.3 -> -10.4 %), Qwen3-30B-A3B 48.3 -> 48.9 (-19.5 -> -18.5 %). The
// figure's pp 2 row ran core_r0.13.0, whose finalize_model_grads reduces
// over the group with context parallelism (l.356) and whose ms-swift
// (c3f3ca4a4) skips its own all-reduce: no such group there.
//
// Megatron-Core core_r0.12.0's unpermute (parallel(unpermute_probs=True),
// nn/moe_megatron.go): the routing weights applied to the experts'
// outputs in the unpermute, which keeps them for the weights' gradient
// (token_dispatcher.py token_unpermutation -> moe_utils.py unpermute
// with probs), where 0.13 applies them in the SwiGLU. The rows that ran
// core_r0.12.0 set it: 8192 x top-4 x 2048 bf16 = 128 MiB a layer and
// in-flight micro-batch, pp 2 no recompute 63.8 -> 66.6 GiB (-12.7 ->
// -8.7 %), tp 2 ep 4 58.2 -> 59.8 (-10.4 -> -8.0 %): both within 10 %
// and asserted now; Qwen3-30B-A3B (full recompute: one layer's outputs
// at a time) 48.9 GiB either way.
//
// Megatron's model-parallel communicator (replay/nccl_megatron.go): every
// train_step all-reduces update_successful and the gradient norm over
// MODEL_PARALLEL_GROUP, the tp x pp ranks, a group of its own
// (megatron/training/training.py l.1271-1274 at core_v0.12.0, l.1427-1430
// at core_v0.13.0; ms-swift's train_step wraps Megatron's), which memsh
// had counted only without the distributed optimizer. One more ring and
// tree under NCCL 2.21's eager connection, 576 MiB on every row here
// (tp 4; pp 2; tp 2): dense 62.1 -> 62.7 GiB (-4.4 -> -3.6 %), pp 2 full
// recompute 42.6 -> 43.2 (-25.3 -> -24.3 %), pp 2 no recompute 66.6 ->
// 67.2 (-8.7 -> -8.0 %), tp 2 ep 4 59.8 -> 60.3 (-8.0 -> -7.2 %),
// Qwen3-30B-A3B 48.9 -> 49.4 (-18.5 -> -17.6 %); the Bridge row (tp = pp
// = 1: a group of one rank, no buffers) is unchanged.
//
// Qwen2-MoE's shared-expert gate under Megatron (nn/moe.go lowerShared):
// SharedExpertMLP computes it from the sequence-sharded layer input
// (shared_experts.py at core_v0.12.0 and core_v0.13.0, F.linear(
// hidden_states, self.gate_weight)), which the router keeps already;
// memsh had gathered the input over tp first and kept the gathered copy,
// 8192 x 2048 bf16 = 32 MiB a layer. tp 2 ep 4 only (the other rows have
// tp 1 or no shared expert): 60.3 -> 59.6 GiB (-7.2 -> -8.3 %), 2.16 ->
// 2.13 s (one all-gather less a layer).
//
// --moe_shared_expert_overlap, which every MoE script here sets
// (parallel(shared_expert_overlap=True), nn/moe.go lowerShared): the
// shared expert's fc1 is a plain TE linear (parallel_mode None) over an
// explicit all-gather, so under sequence parallelism it keeps the
// gathered input, not the shard (shared_experts.py __init__ and
// pre_forward_comm at core_v0.12.0): 32 MiB a layer on the tp 2 row, 59.6
// -> 60.3 GiB (-8.3 -> -7.2 %); the tp 1 rows keep the layer input either
// way, Qwen3 has no shared expert. The shared expert also runs on a
// stream of its own (SharedExpertMLP.stream, replay/streams.go): its
// tensors, forward and backward, and its own two cuBLAS workspaces come
// from that stream's pools. Its saved tensors peak with the rest at the
// end of the forward, so the stream moves reserved memory only by what the
// two pools cannot lend each other: pp 2 full recompute 43.2 -> 43.7 GiB
// (-24.3 -> -23.3 %: the last stage's stream caches 0.5 GiB), pp 2 no
// recompute 67.2 -> 66.4 (-8.0 -> -9.0 %: the compute stream's pools,
// without the shared expert's blocks, fragment less, 2.6 -> 1.7 GiB),
// tp 2 ep 4 60.3 -> 60.2 (-7.2 -> -7.5 %).
//
// NCCL's send/recv buffers from NCCL's source (replay/nccl_p2p.go, issue
// 28): the pipeline's and ring attention's peers in an A100 node hold a
// full 12 MiB connection on each of 16 channels, not 8 x NCCL_BUFFSIZE;
// an all-to-all spanning nodes gives every peer NCCL_NCHANNELS_PER_NET_PEER's
// 2 channels and its remote peers two shared 32 MiB pools; NCCL 2.21's
// eager init makes the p2p send pool on every communicator (init.cc
// ncclProxyMsgSharedInit, 16 x 16 x 512 KiB = 128 MiB here). Before ->
// after the pool: dense 62.7 -> 63.3 GiB (-3.6 -> -2.6 %), pp 2 full
// recompute 43.9 -> 44.6 (-23.1 -> -21.7 %), pp 2 no recompute 68.2 ->
// 69.1 (-6.5 -> -5.3 %), tp 2 ep 4 61.1 -> 62.3 (-5.9 -> -4.2 %),
// Qwen3-30B-A3B (two nodes) 48.3 -> 48.9 (-19.6 -> -18.5 %); the channel
// counts had moved pp 2 +0.2 GiB and Qwen3-30B-A3B -1.1 GiB.
//
// --moe_router_dtype fp32 (parallel(router_dtype="fp32")): moe.sh sets it
// at ea23c5e9d and c3f3ca4a4, and it is ms-swift's default there
// (MegatronArguments moe_router_dtype = 'fp32', swift/megatron/argument/
// megatron_args.py l.154 at ea23c5e9d, l.204 at c3f3ca4a4); the Qwen3
// run's ms-swift (0f31a5a9e, l.151) defaults to None and its script sets
// none: bf16 there, as Megatron-LM's own default (--moe-router-dtype
// default=None, megatron/training/arguments.py l.2506 at core_v0.12.0).
// What fp32 changes, by the sources (Megatron-LM core_v0.12.0 d580efc68
// and core_v0.13.0 c550cf6c4, megatron/core/transformer/moe/):
//   - router.py l.66-71 (TopKRouter.gating): F.linear(input.to(fp32),
//     weight.to(fp32)): an fp32 GEMM that keeps an fp32 copy of the
//     layer's tokens for the weight gradient (8192 x 2048 x 4 = 64 MiB a
//     layer at tp 1, 32 MiB under sequence parallelism at tp 2);
//   - moe_utils.py l.500-506 (topk_softmax_with_capacity): the probs
//     .type_as(logits), fp32;
//   - token_dispatcher.py l.624-629 at core_v0.12.0 (token_unpermutation),
//     l.734-738 at core_v0.13.0 (combine_preprocess): "The precision of TP
//     reduce_scatter should be the same as the router_dtype": under expert
//     tp the experts' outputs are cast to fp32, reduce-scattered, cast
//     back; the backward all-gathers their gradient in fp32 too;
//   - not the all-to-all: it carries the reduce-scattered rows after
//     .to(hidden_states.dtype), bf16; nor the experts' output under 0.13,
//     whose weighted_swiglu returns res.to(dtype) (megatron/core/fusions/
//     fused_bias_swiglu.py l.45-48); nor 0.12's unpermute under
//     --moe_permute_fusion (every fp32 run here), Transformer Engine's
//     moe_unpermute writing the input's dtype (triton/permutation.py
//     unpermute_with_mask_map at v2.3). The unfused unpermute would
//     promote the routed rows to fp32 (moe_utils.py l.349-355), which
//     memsh does not model.
//
// Moves (go test ./sim -run TestMegatronSwiftCalibration -v): tp 2 ep 4
// 2.13 -> 2.36 s (-28.9 -> -21.2 %: 0.09 s the fp32 reduce-scatters and
// all-gathers, 0.11 s their casts, 0.02 s the fp32 router GEMM), 60.2 ->
// 61.1 GiB (-7.5 -> -5.9 %); pp 2 no recompute 2.37 -> 2.40 s (-5.3 ->
// -4.1 %), 66.4 -> 68.1 GiB (-9.0 -> -6.7 %); pp 2 full recompute 2.89
// -> 2.93 s (-2.1 -> -0.6 %), 43.7 GiB either way; Qwen3-30B-A3B and the
// dense row unchanged. A group of casts alone then streamed its bytes
// twice in the backward, which is one cast of the gradient back
// (timing/ops.go bwdFactor): tp 2 ep 4 2.36 -> 2.33 s (-22.5 %).
//
// The rest of the tp 2 ep 4 gap (0.67 s), checked against core_v0.12.0:
//   - the expert-tp all-gather and reduce-scatter pass the split sizes
//     (output_splits_tp), so mappings.py takes its uneven path
//     (torch.distributed.all_gather into a list, l.144-151;
//     torch.distributed.reduce_scatter from one, l.187-197), which
//     PyTorch's ProcessGroupNCCL runs, for lists of unequal sizes, as
//     coalesced broadcasts (reduces), one rooted at each rank: at tp 2
//     each link carries the same bytes as the all-gather memsh prices;
//     no cost named;
//   - with tp x cp > 1 the aux loss all-reduces tokens_per_expert over
//     that group every layer's forward (moe_utils.py l.56, router.py
//     l.292): 60 integers, a latency-bound collective of tens of
//     microseconds, a few ms a step; not priced (moe() has no aux-loss
//     setting);
//   - the expert GEMMs at tp 2 have pp 2's rows (about 2,184 an expert)
//     and half its width (fc1 1,408 columns, fc2 704 deep): 15 experts
//     x 6 GEMMs of 30-60 us a layer and micro-batch; memsh prices every
//     GEMM at one rate per GPU (no A100 table by shape, issue 20), so an
//     efficiency that falls with the width would hit tp 2 harder; no
//     public figure to price it;
//   - the host: each MoE layer's forward syncs with the GPU
//     (_maybe_dtoh_and_synchronize, token_dispatcher.py l.529 and l.707)
//     and memsh's forward of a layer is 5.3 ms of GPU work against
//     0.28 ms of CPU dispatch at its 10 us a kernel, so the sync exposes
//     little in memsh's terms. A CPU cost per layer micro-batch of the
//     size Megatron-Bridge's runs show (docs/time.md, "Megatron-Core's
//     MoE layers on the CPU") would weigh on tp 2 (24 layers a rank,
//     half the tokens each) more than on pp 2 (12 layers, twice the
//     work each), the pattern of these rows. Now priced (December 2026,
//     issue 19, nn/moe_megatron_host.go): the router and the dispatcher
//     dispatch 186 aten ops before the sync, 13 after it and 89 in the
//     backward at core_v0.12.0 (counted on a CPU run of Megatron-Core,
//     tools/oracle/megatron_moe_host.py), at memsh's 12.4 µs an aten op
//     (timing/host_ops.go, the H200's host): 2.39 -> 2.45 s (-20.4 ->
//     -18.4 %), asserted now; the pp 2 rows, twice the GPU work a layer,
//     stay GPU-bound (3.02 -> 3.03 s, 2.48 s either way).
//
// Groups of one rank (replay/nccl_megatron.go, nccl.go ncclOneRank):
// Megatron runs collectives on some without asking their size, so
// PyTorch makes their communicators: the expert-data-parallel group of
// one on every MoE row (DDP's expert buffers), the tensor-parallel group
// at tp 1 (get_batch's broadcast, the vocab-parallel loss: the pp 2 rows)
// and the pipeline group at pp 1 (the aux-loss tracker: the tp 2 rows and
// Qwen3). NCCL 2.21 connects nothing for one rank but sets up its 32
// channels' structures and, eagerly, the send pool: 196 + 64 MiB each,
// two on every MoE row. Before -> after: pp 2 full recompute 50.4 -> 50.9
// GiB (-11.6 -> -10.7 %), no recompute 74.1 -> 74.6 (+1.5 -> +2.2 %),
// tp 2 ep 4 65.7 -> 66.2 (+1.1 -> +1.9 %), Qwen3-30B-A3B 52.3 -> 52.8
// (-12.9 -> -12.0 %), Moonlight tp 2 55.5 -> 56.1 (-0.8 -> +0.1 %), pp 2
// 57.1 -> 57.6 (-4.8 -> -3.9 %); the dense row (tp 4, no experts) keeps
// 64.9 GiB.
//
// What was checked and measured for the two full-recompute rows' missing
// memory (issue 19): calib_swift_moe_recompute_test.go, with what
// ProcessGroupNCCL's record_stream holds (replay/nccl_record.go).
//
// The router's expert bias (replay/nccl_megatron.go, tp_dp_cp): ms-swift
// sets --moe_router_enable_expert_bias for DeepSeek-V3-type models with a
// sigmoid router (swift/megatron/model/gpt/config.py at 9052fc057 and
// cecf735f1), and finalize_model_grads all-reduces the tokens per expert
// over TENSOR_AND_DATA_PARALLEL_GROUP_WITH_CP, a communicator of its own
// (core_v0.12.0 l.300, core_v0.13.0 l.328): 704 MiB eager, Moonlight
// 48.6 -> 49.3 and 50.0 -> 50.7 GiB. NCCL's init memory per
// communicator (replay/nccl.go ncclInitMem, 100 MiB on these A100s):
// dense -2.6 -> -1.9 %, pp 2 full recompute -21.7 -> -20.7, no
// recompute -5.3 -> -4.4, tp 2 ep 4 -4.2 -> -2.9, Qwen3-30B-A3B -18.5 ->
// -17.1, Moonlight -12.0 -> -10.3 and -15.5 -> -14.4 %. The figures are
// read as nvidia-smi's: ms-swift's Megatron trainer logs no memory of its
// own at these commits (no max_memory_reserved or mem_get_info call in
// swift/megatron), Megatron-LM's report_memory and tensorboard give max
// reserved, and "7 * 73GiB" (moe.sh at ea23c5e9d) counts GPUs one by one,
// as nvidia-smi lists them (as max reserved, memsh's would be 3-5 GiB lower).

func TestMegatronSwiftCalibration(t *testing.T) {
	prec, rt, a800 := megatronSwiftSetting(t)
	// The rows whose memory or step is not asserted to the goal may not
	// drift either: their gaps, as docs/models.md states them, rounded up
	// to the next whole percent (memory, step; 0: asserted to the goal or
	// not stated), so that a change that widens one fails. The step gaps
	// widened 0.8 points (core.Plan.StepImpl: Megatron's FusedAdam).
	heldBack := map[string][2]float64{
		"Qwen1.5-MoE-A2.7B, pp 2, ep 4, dp 4":        {0.11, 0},
		"Qwen3-30B-A3B, tp 2, ep 8, dp 8, two nodes": {0.13, 0.55},
		"Moonlight-16B-A3B, pp 2, ep 4, dp 4":        {0, 0.57},
	}
	for _, row := range megatronSwiftRows(t) {
		p := row.plan(t, prec, rt, a800)
		r := evalPlan(t, p)
		got := fullestGiB(r)
		memErr := got/row.gib - 1
		if row.secs == 0 {
			t.Logf("%s: %.1f GiB (measured %.0f, %+.1f %%), %.2f s (no step time stated)", row.name, got, row.gib, 100*memErr, r.Time.StepSeconds)
		}
		timeErr := r.Time.StepSeconds/row.secs - 1
		if row.secs > 0 {
			t.Logf("%s: %.1f GiB (measured %.0f, %+.1f %%), %.2f s (measured %.2f, %+.1f %%)", row.name, got, row.gib, 100*memErr, r.Time.StepSeconds, row.secs, 100*timeErr)
		}
		if row.memGap == "" && math.Abs(memErr) > 0.10 {
			t.Errorf("%s: %.1f GiB, measured %.0f GiB (%+.1f %%, goal 10 %%)", row.name, got, row.gib, 100*memErr)
		}
		if row.timeGap == "" && row.secs > 0 && math.Abs(timeErr) > 0.20 {
			t.Errorf("%s: %.2f s, measured %.2f s (%+.1f %%, goal 20 %%)", row.name, r.Time.StepSeconds, row.secs, 100*timeErr)
		}
		if row.nodes > 1 {
			// The network between the two nodes is not stated (above): the
			// step over the plausible fabrics, per GPU and direction.
			for _, f := range []struct {
				name string
				gbps float64
			}{{"4 x 100 Gb/s a node", 50.0 / 8}, {"4 x 200 Gb/s a node", 100.0 / 8}, {"8 x 200 Gb/s a node (memsh's A100 default)", 25}, {"8 x 400 Gb/s a node", 50}} {
				q := *p
				q.Cluster.InterGBps = f.gbps
				rq := evalPlan(t, &q)
				t.Logf("  over %s (%.2f GB/s a GPU): %.2f s (%+.1f %%)", f.name, f.gbps, rq.Time.StepSeconds, 100*(rq.Time.StepSeconds/row.secs-1))
			}
		}
		if row.bf16Router {
			q := *p
			q.Parallel.RouterDType = units.InvalidDType
			q.Parallel.NoPermuteFusion = true // 3.4 had no permute-fusion argument: Megatron's default, off
			rq := evalPlan(t, &q)
			g := fullestGiB(rq)
			t.Logf("  with the router in bf16 and the unfused permute (ms-swift 3.4.0.dev0, core_r0.11.0): %.1f GiB (%+.1f %%), %.2f s (%+.1f %%)",
				g, 100*(g/row.gib-1), rq.Time.StepSeconds, 100*(rq.Time.StepSeconds/row.secs-1))
		}
		if b, ok := heldBack[row.name]; ok {
			delete(heldBack, row.name)
			if b[0] > 0 && math.Abs(memErr) > b[0] {
				t.Errorf("%s: %.1f GiB, measured %.0f GiB (%+.1f %%): the held-back gap widened past %.0f %%", row.name, got, row.gib, 100*memErr, 100*b[0])
			}
			if b[1] > 0 && math.Abs(timeErr) > b[1] {
				t.Errorf("%s: %.2f s, measured %.2f s (%+.1f %%): the held-back gap widened past %.0f %%", row.name, r.Time.StepSeconds, row.secs, 100*timeErr, 100*b[1])
			}
		}
		if row.memGap != "" {
			t.Logf("  memory not asserted: %s", row.memGap)
		}
		if row.timeGap != "" {
			t.Logf("  step not asserted: %s", row.timeGap)
		}
	}
	for name := range heldBack {
		t.Errorf("held-back row %q is not in the table", name)
	}
}

// swiftRow is a row of TestMegatronSwiftCalibration.
type swiftRow struct {
	name       string
	config     []byte
	par        core.Parallelism
	nodes      int64
	recompute  string
	gib, secs  float64 // measured: nvidia-smi GiB per GPU, s/it (0: not stated)
	expandable bool    // the script sets PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
	bf16Router bool    // also print the row with the router in bf16 and the permute unfused (April's reading, above)
	memGap     string  // why the memory is not asserted ("" = asserted within 10 %)
	timeGap    string  // likewise for the step within 20 %
}

// megatronSwiftRows are TestMegatronSwiftCalibration's rows.
func megatronSwiftRows(t *testing.T) []swiftRow {
	return []swiftRow{

		// base_to_chat.sh "8 * 65GiB"; the benchmark table: 9.04 s/it,
		// 8*64GB. No overlap flags. --recompute_granularity selective
		// (ms-swift's recompute_modules core_attn): Megatron-Core
		// checkpoints the core attention whatever its backend
		// (attention.py at core_v0.12.0 l.137-140, l.623:
		// checkpoint_core_attention), flash attention included. Under
		// flash it keeps hardly less (q, k and v instead of flash's
		// inputs and its softmax statistics) but runs each layer's
		// attention forward again in the backward. Until session 48 this
		// row and the two held-back Qwen1.5-MoE rows below replayed "none"
		// (older comments here call those two "no recompute"): the same
		// memory within 0.02 GiB, the step without that recompute (9.57
		// s here, now 10.08; measured 9.04).
		{name: "Qwen2.5-14B, tp 4, dp 2", config: readHF(t, "qwen2.5-14b.json"), // Qwen/Qwen2.5-14B's config.json, the fields memsh reads
			par: core.Parallelism{DP: 2, TP: 4, SequenceParallel: true, DistributedOptimizer: true,
				NoOverlapGradReduce: true, NoOverlapParamGather: true, LossDPGroup: true},
			nodes: 1, recompute: "selective", gib: 65, secs: 9.04,
			// memsh 4 % below (TE's fused norms and SwiGLU, NCCL 2.21's eager
			// buffers, Megatron's first step, the loss's and the model-parallel
			// communicators): 2.3 GiB more on the card, cause unknown (the MoE
			// rows miss as much or more).
		},
		// moe/moe.sh "8 * 57GiB, 2.95s/it": pp 2 (the last stage 11 of 24
		// layers), ep 4, dp 4, full recompute of every layer.
		{name: "Qwen1.5-MoE-A2.7B, pp 2, ep 4, dp 4", config: readHF(t, "qwen1.5-moe-a2.7b.json"),
			par:   core.Parallelism{DP: 4, PP: 2, EP: 4, ETP: 1, DistributedOptimizer: true, LastStageLayers: 11, SharedExpertOverlap: true, RouterDType: units.FP32},
			nodes: 1, recompute: "full", gib: 57, secs: 2.95, expandable: true,
			memGap: "memsh 11 % below, cause unknown (4.6 GiB of it was the fused loss's backward, 0.6 GiB NCCL's record_stream, 0.5 GiB the one-rank communicators)"},
		// Held back: the same model's runs with selective recompute
		// (core_attn under flash attention, as the 14B's above), moe.sh at
		// ea23c5e9d: "pp2ep4: 7 * 73GiB, 2.5s/it" (an even 12/12 split)
		// and "tp2ep4: 8 * 65GiB, 3s/it"; no overlap flags, no
		// expandable_segments; Megatron-Core core_r0.12.0 (its loss group,
		// its unpermute: unpermute_probs).
		{name: "Qwen1.5-MoE-A2.7B, pp 2, ep 4, dp 4, selective recompute", config: readHF(t, "qwen1.5-moe-a2.7b.json"),
			par: core.Parallelism{DP: 4, PP: 2, EP: 4, ETP: 1, DistributedOptimizer: true,
				NoOverlapGradReduce: true, NoOverlapParamGather: true, LossDPGroup: true, UnpermuteProbs: true, SharedExpertOverlap: true, RouterDType: units.FP32},
			nodes: 1, recompute: "selective", gib: 73, secs: 2.5},
		{name: "Qwen1.5-MoE-A2.7B, tp 2, ep 4, dp 4, selective recompute", config: readHF(t, "qwen1.5-moe-a2.7b.json"),
			par: core.Parallelism{DP: 4, TP: 2, SequenceParallel: true, EP: 4, ETP: 2, DistributedOptimizer: true,
				NoOverlapGradReduce: true, NoOverlapParamGather: true, LossDPGroup: true, UnpermuteProbs: true, SharedExpertOverlap: true, RouterDType: units.FP32},
			nodes: 1, recompute: "selective", gib: 65, secs: 3, bf16Router: true},
		// qwen3_moe.sh at ad907793e (ms-swift 3.4.0.dev0, Megatron-LM
		// core_r0.11.0), two nodes: tp 2 with sequence parallelism, ep 8,
		// dp 8, full recompute, no overlap flags.
		{name: "Qwen3-30B-A3B, tp 2, ep 8, dp 8, two nodes", config: readHF(t, "qwen3-30b-a3b.json"),
			par: core.Parallelism{DP: 8, TP: 2, SequenceParallel: true, EP: 8, ETP: 2, DistributedOptimizer: true,
				NoOverlapGradReduce: true, NoOverlapParamGather: true, LossDPGroup: true, UnpermuteProbs: true, SharedExpertOverlap: true, NoPermuteFusion: true},
			nodes: 2, recompute: "full", gib: 60, secs: 9.6,
			memGap:  "memsh 12 % below (12.0), cause unknown",
			timeGap: "memsh 54 % below: the expert all-to-all crosses a network the source does not describe (see above)"},
		// Held back: moe/deepseek_v3.sh on Moonlight-16B-A3B-Instruct
		// (DeepSeek-V3's layers: MLA, 64 routed experts top-6 and two
		// shared), full recompute, permute fusion, no overlap flags;
		// calib_swift_moe_sources_test.go dates them. The tp 2 figure was
		// written at 9052fc057, whose script sets no PYTORCH_CUDA_ALLOC_CONF;
		// expandable_segments came at 5df8180fd ("Update split_dataset_ratio",
		// one line added to 40 scripts, no figure changed): the tp 2 run had
		// none (53.1 -> 55.5 GiB, -5.2 -> -0.8 %); the pp 2 figure
		// (cecf735f1) came after it.
		{name: "Moonlight-16B-A3B, tp 2, ep 4, dp 4", config: readHF(t, "moonlight-16b-a3b-instruct.json"),
			par: core.Parallelism{DP: 4, TP: 2, SequenceParallel: true, EP: 4, ETP: 2, DistributedOptimizer: true,
				NoOverlapGradReduce: true, NoOverlapParamGather: true, LossDPGroup: true, UnpermuteProbs: true, SharedExpertOverlap: true},
			nodes: 1, recompute: "full", gib: 56, expandable: false},
		{name: "Moonlight-16B-A3B, pp 2, ep 4, dp 4", config: readHF(t, "moonlight-16b-a3b-instruct.json"),
			par: core.Parallelism{DP: 4, PP: 2, EP: 4, ETP: 1, DistributedOptimizer: true, LastStageLayers: 13,
				NoOverlapGradReduce: true, NoOverlapParamGather: true, SharedExpertOverlap: true, RouterDType: units.FP32},
			nodes: 1, recompute: "full", gib: 60, secs: 9, expandable: true,
			timeGap: "memsh 57 % below: about 80 ms of each layer micro-batch missing, in Moonlight's layers (the Qwen1.5-MoE pp 2 row of the same harness lands); batch, recompute, bubble, optimizer and the padded attention's FLOPs checked (calib_swift_moonlight_step_test.go)"},
	}
}

// plan is the row's plan as the calibration replays it.
func (row swiftRow) plan(t *testing.T, prec core.Precision, rt core.Runtime, dev hw.Device) *core.Plan {
	m, err := hf.FromConfigOptions(row.config, hf.Options{Attn: "flash", Transformers: megatronTransformers})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range m.Layers {
		groupedExperts(l)
	}
	ck, _ := core.ParseCheckpoint(row.recompute)
	micro := 16 / row.par.DP
	row.par.MicroBatches = micro
	row.par.LossParallel = core.MegatronFusedCE // every script sets --cross_entropy_loss_fusion
	p := &core.Plan{Model: m, Batch: 1, Seq: 8192, GradAccum: micro, Members: 1, Precision: prec, Runtime: rt,
		Optimizer: core.Optimizer{Kind: core.AdamW}, Checkpoint: ck, Device: dev, Phase: core.Train,
		Parallel: row.par, Cluster: hw.Cluster{Nodes: row.nodes, GPUsPerNode: 8}}
	p.Overheads.Dispatch = "fused"
	// the runs clipped: ms-swift's clip_grad, 1.0 (megatron_args.py l.545),
	// which no script sets otherwise (importers/clip.go megatronClip)
	p.Overheads.ClipGradNorm = 1
	p.DataloaderMask = core.DataloaderMaskOff // packed padding-free rows: cu_seqlens, no [batch, 1, seq, seq] mask
	p.ExpandableSegments = row.expandable
	p.RuntimeMemory.NCCLConnect = "eager"
	return p
}

// megatronSwiftSetting is every row's precision, runtime and device: an
// A800 (an A100-80GB with NVLink capped, NVIDIA A800 SXM4 datasheet:
// 400 GB/s both directions) under torch 2.6.
func megatronSwiftSetting(t *testing.T) (core.Precision, core.Runtime, hw.Device) {
	a800, err := hw.LookupDevice("A100-80GB")
	if err != nil {
		t.Fatal(err)
	}
	a800.LinkGBps = 200
	prec, _ := core.LookupPrecision("megatron")
	rt, _ := core.LookupRuntime("cuda-2.6")
	return prec, rt, a800
}
