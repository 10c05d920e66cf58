package sim

import (
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/replay"
)

// Where TestMegatronSwiftCalibration's figures come from (December 2026,
// issue 19; `git log -S` on each figure in ms-swift's history):
//   - Qwen3-30B-A3B's "Megatron-LM: 9.6s/it; 16 * 60GiB" first appears at
//     ad907793e (2025-04-29, "Support Qwen3 series") on
//     examples/train/megatron/qwen3_moe.sh, the same script; 0f31a5a9e
//     (2025-06-19) copied both into the best practice. The run is ms-swift
//     3.4.0.dev0, whose init_megatron_env clones Megatron-LM core_r0.11.0,
//     on the torch 2.6 image its docs name (NCCL 2.21.5). The row's
//     settings hold at core_v0.11.0 as at 0.12: expert tp defaults to tp
//     (megatron/training/arguments.py l.266-267), the expert grid is
//     RankGenerator(tp=etp, ep, dp) (parallel_state.py l.697), the router
//     runs in the input's dtype (moe/router.py l.62; neither Megatron 0.11
//     nor ms-swift 3.4 has a router dtype argument), the dispatcher gathers
//     the received rows over expert tp after the all-to-all and
//     reduce-scatters before the return one (token_dispatcher.py
//     l.521-532, l.607-618), its unpermute weights the outputs by the probs
//     (unpermute_probs; moe_utils.py l.322), ms-swift 3.4 runs
//     pretrain_gpt's loss_func (swift/megatron/train/utils.py l.151), which
//     all-reduces over DATA_PARALLEL_GROUP (pretrain_gpt.py l.198:
//     loss_dp_group), train_step reduces update_successful over the
//     model-parallel group (training.py l.821) and load_checkpoint ends
//     with empty_cache (checkpointing.py l.1371). Nothing moves.
//   - The tp 2 ep 4 row's "8 * 65GiB" first appears at 8d95f8c9c
//     (2025-04-28, ms-swift 3.4.0.dev0, core_r0.11.0) on moe.sh at tp 2,
//     with no permute fusion or router dtype (3.4 had neither argument);
//     that commit's benchmark table gives Megatron-LM 2.93 s/it, 8*66GB.
//     ea23c5e9d (2025-06-25, 3.6.0.dev0, core_r0.12.0) moved the script to
//     pp 2 with --moe_permute_fusion and --moe_router_dtype fp32 and wrote
//     "tp2ep4: 8 * 65GiB, 3s/it" beside the new pp 2 line; whether tp 2
//     was run again with the new flags or the line restates April's run
//     is not stated. The row keeps June's reading (router in fp32); the
//     test prints April's too (router in bf16; 0.11's loss group and
//     unpermute as 0.12's): 64.7 GiB (-0.5 %), 2.29 s (-23.6 %; 2.19 s,
//     -26.9 %, before the router and dispatcher were priced on the host,
//     nn/moe_megatron_host.go, and the vocabulary-parallel loss at its
//     kernels' passes).
//   - Which Megatron-LM ran any of these is less sure than the branch
//     names: git_clone_github (swift/llm/model/utils.py l.288-309 at
//     c3f3ca4a4) clones into _github/Megatron-LM only when that directory
//     is missing, so a machine keeps the first branch it cloned (unless
//     MEGATRON_LM_PATH points elsewhere). ms-swift#5120, on 3.7.0.dev0 (the
//     full-recompute pp 2 row's release: memory much higher after the
//     first step than under 3.6.0.dev0, full recompute, A800s), says the
//     OOM stayed after reinstalling 3.6.0.dev0, which is what a kept
//     core_r0.13.0 clone would do; the thread names no cause. For the pp 2
//     row the version moves 0.6 GiB at most (0.12's loss group; the
//     unpermute's weighted outputs live one layer at a time under full
//     recompute), and the Qwen3 row, 11 GiB short, ran 0.11: the gap is
//     not 0.13's.
//   - The two Moonlight-16B-A3B-Instruct rows, moe/deepseek_v3.sh:
//     "8 * 56GiB" at 9052fc057 (2025-06-25, ms-swift 3.6.0.dev0,
//     core_r0.12.0; tp 2 with sequence parallelism, ep 4, the router in
//     bf16, ms-swift's default then) and "8 * 60GiB; 9s/it" at cecf735f1
//     (2025-07-10, "[megatron] update to mcore 0.13", 3.7.0.dev0,
//     core_r0.13.0; pp 2, the last stage 13 of 27 layers, ep 4, the
//     router in fp32, the default from ea23c5e9d). Both full recompute,
//     permute fusion, no overlap flags; expandable_segments only at pp 2
//     (the script set it from 5df8180fd, after the tp 2 figure). They are two
//     more full-recompute MoE runs of the same harness: memsh 14 and 17 %
//     below (7.4 and 10.0 GiB; 10.3 and 14.4 % now, with the expert
//     bias's communicator and NCCL's init memory), beside Qwen1.5-MoE's 12.4 GiB (core 0.13)
//     and Qwen3-30B-A3B's 11.1 GiB (core 0.11). So the gap is not one
//     Megatron-Core release's, not the network's or the second node's
//     (three of the four ran on one node), not the shared expert's
//     (Qwen3-30B-A3B has none), nor tp's or pp's. The fullest ranks hold
//     2.3 to 2.7 B parameters in all four, but the gap per parameter
//     spreads (3 to 6 bytes); against what memsh keeps for backward on
//     the fullest rank without recompute (go test ./sim -run
//     TestMegatronSwiftCalibration with the row's recompute "none":
//     Moonlight 24.4 and 31.5 GiB, Qwen3-30B-A3B 35.3 GiB) it is a third
//     (30, 32, 31 %), and 48 % of Qwen1.5-MoE pp 2's 25.7 GiB, as if part
//     of every layer's activations outlived the checkpoint. No
//     such path is found in CheckpointFunction, the dispatchers or the
//     shared expert (above), and plain PyTorch does not show one:
//     tools/oracle/moe_frag.py's replica of moe.sh's first stage under
//     full recompute peaked at 39.05 GiB allocated on one H200 (its
//     "fixed" mode, sim/testdata/cuda_h200/moe_frag.jsonl) where memsh's
//     stage 0 allocates 38.54. Deciding it takes Megatron-Core and
//     Transformer Engine on a GPU (moe.sh's first stage, full recompute
//     against none, max allocated beside reserved), which the oracle
//     tools here do not have. One part was checkable without them: every
//     script sets --cross_entropy_loss_fusion, whose steps run under
//     torch.compile (megatron/core/fusions/fused_cross_entropy.py,
//     megatron/core/jit.py), and the full-recompute rows peak at the loss.
//     Inductor's output code for its four functions (on the CPU, torch
//     2.6.0 and 2.15, December 2026, session 23) writes the forward's
//     in-place steps into the fp32 copy but clones the saved softmax in
//     the backward (index_put's lowering): 4 bytes a logit more at the
//     loss's backward, now lowered (parallel(loss_parallel=
//     "megatron_fused"), core/fused_ce.go). Every row sets it: Qwen1.5-MoE
//     pp 2 45.2 -> 49.8 GiB (-20.7 -> -12.6 %), Qwen3-30B-A3B 49.8 -> 51.8
//     (-17.1 -> -13.6 %), Moonlight tp 2 50.2 -> 52.7 (-10.3 -> -5.8 %)
//     and pp 2 51.4 -> 56.4 (-14.4 -> -6.0 %, both asserted since),
//     Qwen2.5-14B 63.8 -> 64.9 (-1.9 -> -0.1 %), Qwen1.5-MoE tp 2 63.1 ->
//     65.4 (-2.9 -> +0.6 %); the no-recompute pp 2 row, which peaks
//     elsewhere, is unchanged.
//   - ms-swift's defaults at c3f3ca4a4 (megatron_args.py): main_grads_dtype
//     and main_params_dtype fp32, exp_avg(_sq)_dtype fp32,
//     use_precision_aware_optimizer and optimizer_cpu_offload False,
//     use_distributed_optimizer True: the states the replay holds. Megatron
//     forces fp32 gradient accumulation under bf16 for 3.4's runs. The
//     sequence is max_length's 8192 (train_args.py: seq_length or
//     max_length; megatron_args' fallback to max_position_embeddings, 40960
//     for Qwen3, applies only when both are unset).
//   - Which rank the scripts' figure is (one figure for 8 GPUs) does not
//     close the pp 2 rows: memsh's stages are 44.3 and 44.6 GiB
//     (Qwen1.5-MoE; stage 0 holds the embedding, stage 1 the logits and
//     the loss) and 45.0 and 50.0 GiB (Moonlight; the fullest 51.4 GiB
//     now, as above), all short of 57 and 60.
//   - ms-swift makes the process group itself before Megatron does
//     (swift/utils/torch_utils.py init_process_group at ad907793e,
//     ea23c5e9d and c3f3ca4a4, called from train_args.py): no device_id,
//     so PyTorch still makes each group's communicator at its first
//     collective, as replay/nccl_megatron.go assumes.
//   - ms-swift's _patch__batched_p2p_ops (swift/megatron/init.py at
//     c3f3ca4a4) sends the pipeline's batched p2p over the default group;
//     ProcessGroupNCCL::pointToPoint runs a batched p2p on the group's own
//     communicator ("For batch P2P, we need to treat it like a collective
//     when selecting communicator"), so the pp 2 rows' p2p connections sit
//     on the world communicator, not the pp one: the same peers and
//     channels, no bytes move.

// groupedExperts makes every MoE block under l run as Megatron's grouped
// GEMM (--moe_grouped_gemm true: TEGroupedMLP).
// megatronTransformers is the transformers release memsh reads a Megatron
// run's config.json under: 4.57.1, whose MoE blocks (nn.Linear modules in
// a loop, which groupedExperts then runs as Megatron's GroupedMLP) carry
// none of transformers 5's own choices (3-D experts named gate_up_proj,
// Mixtral's and DeepSeek's fp32 top-k weights, 5.18's sentinel handling).
// Megatron builds its own modules from the config; the Megatron rows were
// calibrated so, under hf_config's default until December 2026.
const megatronTransformers = "4.57.1"

func groupedExperts(l core.Layer) {
	if m, ok := l.(*nn.MoE); ok {
		m.Impl = nn.MoEGrouped
	}
	for _, c := range l.Children() {
		groupedExperts(c)
	}
}

// fullestGiB is nvidia-smi's figure of the fullest rank, in GiB.
func fullestGiB(r *replay.Report) float64 {
	used := r.DeviceUsed
	for _, s := range r.Ranks {
		used = max(used, s.DeviceUsed)
	}
	return float64(used) / (1 << 30)
}
