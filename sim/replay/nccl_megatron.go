package replay

import "github.com/memsh/memsh/sim/core"

// Megatron-LM's communicators beyond one per layout dimension. Megatron
// makes every process group with its own torch.distributed.new_group
// (megatron/core/parallel_state.py initialize_model_parallel at
// core_v0.12.0: DATA_PARALLEL_GROUP_WITH_CP, TENSOR_AND_CONTEXT_PARALLEL_
// GROUP, EXPERT_TENSOR_PARALLEL_GROUP, EXPERT_TENSOR_AND_MODEL_PARALLEL_
// GROUP, EXPERT_DATA_PARALLEL_GROUP, ...), so two groups over the same
// ranks are two NCCL communicators. PyTorch makes a group's communicator
// at its first collective (Megatron's init_process_group passes no
// device_id: megatron/training/initialize.py at core_v0.12.0 l.326-333),
// so only the groups a step uses hold buffers. Those of a Megatron step
// beyond tp, cp, dp, ep and pp (commGroups):
//
//   - world: the default group, used by every Megatron-LM run: pretrain()
//     all-reduces the start time over it (megatron/training/training.py
//     l.698 at core_v0.12.0, l.753 at core_v0.13.0, l.1729 at 6f0b9751)
//     and the timers all-gather over it at every log (core/timers.py
//     _get_elapsed_time_all_ranks); before Megatron-Core 0.14 the
//     distributed optimizer's gradient norm (clip_grad, 1.0 by default in
//     Megatron-LM and ms-swift) is all-reduced over it too (optimizer/
//     distrib_optimizer.py get_grad_stats_parallel_group returns None, the
//     default group; optimizer/clip_grads.py get_grad_norm_fp32 l.131);
//   - dist_opt: with Parallelism.GradNormGroup (Megatron-Core 0.14 and
//     later), the gradient norm over INTRA_DISTRIBUTED_OPTIMIZER_INSTANCE_
//     GROUP (optimizer/__init__.py l.447 at core_v0.14.0, l.672 at
//     6f0b9751: grad_stats_parallel_group), made with its own create_group
//     over every rank when there is one optimizer instance
//     (parallel_state.py l.1221-1232 at core_v0.14.0, l.1554-1578 at
//     6f0b9751);
//   - mp: the model-parallel group, tp x pp ranks (generator 'tp-pp',
//     MODEL_PARALLEL_GROUP, its own create_group at parallel_state.py
//     l.941-953 at core_v0.12.0), when it has more than one rank. Every step's train_step
//     all-reduces over it twice after optimizer.step(), whatever the
//     optimizer: logical_and_across_model_parallel_group(update_successful)
//     and reduce_max_stat_across_model_parallel_group(grad_norm)
//     (megatron/training/training.py l.1271-1274 at core_v0.12.0, l.821-824
//     at core_v0.11.0, l.1427-1430 at core_v0.13.0; training/utils.py); and
//     without the distributed optimizer the gradient norm itself is
//     all-reduced over it (optimizer/__init__.py l.421:
//     Float16OptimizerWithFloat16Params' grad_stats_parallel_group is the
//     model_parallel_group);
//   - edp: the expert parameters' gradients are reduce-scattered and
//     their parameters all-gathered over the expert-data-parallel group
//     (distributed/distributed_data_parallel.py, the expert buffers), when
//     it has more than one rank;
//   - tp_ep: the alltoall dispatcher all-gathers the tokens per expert over
//     the expert-tensor-and-expert-parallel group in every MoE layer
//     (transformer/moe/token_dispatcher.py MoEAlltoAllTokenDispatcher.
//     preprocess, gather_from_sequence_parallel_region(..., group=
//     self.tp_ep_group)) when ep or expert tp is above one;
//   - etp: with expert tensor parallelism above one the dispatcher
//     all-gathers the received rows over the expert tensor-parallel group
//     and reduce-scatters the experts' outputs (token_dispatcher.py
//     dispatch_postprocess, combine_preprocess);
//   - tp_cp: with tensor or context parallelism the router's load-balancing
//     loss sums the tokens per expert over the tensor-and-context-parallel
//     group (transformer/moe/router.py apply_load_balancing_loss,
//     sequence_partition_group).
//   - dp_loss: with Parallelism.LossDPGroup, the loss's all-reduce over
//     DATA_PARALLEL_GROUP, the data-parallel ranks without context
//     parallelism, which initialize_model_parallel makes with its own
//     create_group beside the gradients' DATA_PARALLEL_GROUP_WITH_CP even
//     when cp is 1 (parallel_state.py l.795 and l.822 at core_v0.12.0).
//     Before Megatron-Core 0.13 pretrain_gpt.py's loss_func all-reduces
//     the reporting loss over it every micro-batch (l.213 at core_v0.12.0)
//     and finalize_model_grads the token count of
//     --calculate-per-token-loss (distributed/finalize_model_grads.py
//     l.327), as does ms-swift's Megatron trainer (swift/megatron/train/
//     trainers/trainer.py l.322 at 0f31a5a9e, "if not megatron_core_013");
//     core_v0.13.0 reduces both over the group with context parallelism
//     (finalize_model_grads.py l.356).
//
//   - embd: with pipeline parallelism, a model whose last stage keeps its
//     own copy of the token embedding (tied embeddings: the output head;
//     multi-token prediction: the MTP module's lookup) all-reduces that
//     weight's gradient over EMBEDDING_GROUP, the first and the last
//     stage (finalize_model_grads.py _allreduce_word_embedding_grads,
//     l.164-258 at 6f0b9751, the Megatron-LM of PR #6429;
//     _get_shared_word_embedding_weight l.146: "share_embeddings_and_
//     output_weights or mtp_num_layers"; the group's own create_group at
//     parallel_state.py l.1270-1277). Only the first and the last stage
//     are in it; the all-reduce carries the whole embedding (fp32 main
//     gradients), so it connects as an all-reduce (allReduces);
//   - tp_dp_cp: a router with an expert bias (DeepSeek-V3's auxiliary-loss-
//     free balancing, --moe-router-enable-expert-bias; ms-swift sets it
//     for DeepSeek-V3-type models with a sigmoid router: swift/megatron/
//     model/gpt/config.py l.31 at ea23c5e9d) all-reduces the tokens per
//     expert over TENSOR_AND_DATA_PARALLEL_GROUP_WITH_CP once a step
//     (finalize_model_grads.py _update_router_expert_bias l.334-372 and
//     moe_utils.py get_updated_expert_bias at 6f0b9751; l.300 and
//     moe_utils.py l.697-699 at core_v0.12.0, l.328 and l.791-794 at
//     core_v0.13.0), a group of its own (parallel_state.py l.1301-1308 at
//     6f0b9751, l.1103 at core_v0.12.0) even where it holds the data-
//     parallel group's ranks (tp = cp = 1).
//
//   - one-rank groups: Megatron calls some collectives without asking the
//     group's size, and PyTorch makes a communicator for a group of one
//     as for any other (nccl.go ncclOneRank): the tensor-parallel group at
//     tp 1, whose get_batch_on_this_tp_rank broadcasts every micro-batch's
//     tokens (megatron/training/utils.py l.459-467 at core_r0.13.0, called
//     by pretrain_gpt.py l.211; ms-swift's copy, swift/megatron/trainers/
//     utils.py at c3f3ca4a4) and whose fused vocab-parallel
//     cross-entropy all-reduces the logits' max and sums (core/fusions/
//     fused_cross_entropy.py l.94 and l.112 at core_r0.13.0); the
//     expert-data-parallel group of one, over which DDP reduce-scatters
//     (all-reduces) the experts' gradient buffers and the distributed
//     optimizer all-gathers them (distributed/param_and_grad_buffer.py
//     start_grad_sync and start_param_sync, no size check); and, with
//     experts, the pipeline group at pp 1, over which the MoE metrics
//     tracker all-reduces the aux losses at every log
//     (transformer/moe/moe_utils.py reduce_aux_losses_tracker_across_ranks,
//     l.693 at core_r0.13.0, l.603 at core_v0.12.0, l.585 at core_r0.11.0).
//
// The MoE groups are listed where the layout says experts are dispatched:
// expert parallelism above one (the plan's layout does not say whether a
// model without it has experts); tp_dp_cp where the model has a biased
// router (biasedRouter).

// megatronLayout reports whether plan p runs Megatron's data-parallel
// layer (its distributed optimizer or precision "megatron"), not FSDP or
// ZeRO (replay/sharding.go's DistMegatron).
func megatronLayout(p *core.Plan) bool {
	par := p.Parallel
	return !par.FSDP && par.Zero == 0 && (par.DistributedOptimizer || p.Precision.Megatron)
}

// megatronGroups adds Megatron's communicators (above) through add(name,
// size, stride, pattern), and its one-rank ones through addOne(name).
func megatronGroups(p *core.Plan, add func(name string, size, stride int64, pattern string), addOne func(name string)) {
	if !megatronLayout(p) {
		return
	}
	par := p.Parallel.Norm()
	add("world", par.GPUs(), 1, "ring")
	if par.DistributedOptimizer && par.GradNormGroup {
		add("dist_opt", par.GPUs(), 1, "ring")
	}
	if stride := int64(1); par.TP*par.PP > 1 {
		if par.PP > 1 { // the stages sit dp x cp x tp ranks apart
			stride = par.CP * par.DP
		}
		add("mp", par.TP*par.PP, stride, "ring")
	}
	if par.LossDPGroup {
		add("dp_loss", par.DP, par.TP*par.CP, "ring")
	}
	if pp := par.PP; pp > 1 && stageEmbedding(p.Model) {
		if st := p.PipeStage; st == nil || st.Stage == 0 || st.Stage == pp-1 {
			add("embd", 2, (pp-1)*par.TP*par.CP*par.DP, "ring")
		}
	}
	if biasedRouter(p.Model) {
		add("tp_dp_cp", par.TP*par.DP*par.CP, 1, "ring")
	}
	if etp := par.ETPn(); par.EP > 1 {
		add("edp", par.ExpertShardDegree(), etp*par.EP, "ring")
		add("tp_ep", etp*par.EP, 1, "ring")
		add("etp", etp, 1, "ring")
		add("tp_cp", par.TP*par.CP, 1, "ring")
	}
	if par.TP == 1 {
		addOne("tp")
	}
	if par.EP > 1 {
		if par.ExpertShardDegree() == 1 {
			addOne("edp")
		}
		if par.PP == 1 {
			addOne("pp")
		}
	}
}

// stageEmbedding reports whether a pipelined model's last stage keeps a
// copy of the token embedding: tied embeddings (the output head) or a
// multi-token prediction module (its lookup, nn.MTP).
func stageEmbedding(m *core.Model) bool {
	if m == nil {
		return false
	}
	return m.Tied() || core.AnyLayer(m, func(l core.Layer) bool { return l.Kind() == "mtp" })
}

// biasedRouter reports whether model m has a router whose per-expert
// selection bias Megatron updates from the step's expert loads
// (nn.MoE.ScoreBias: DeepSeek-V3's e_score_correction_bias).
func biasedRouter(m *core.Model) bool {
	return core.AnyLayer(m, func(l core.Layer) bool {
		r, ok := l.(interface{ UpdatesExpertBias() bool })
		return ok && r.UpdatesExpertBias()
	})
}
