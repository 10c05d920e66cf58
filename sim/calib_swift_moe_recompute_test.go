package sim

// The Megatron-SWIFT full-recompute rows of TestMegatronSwiftCalibration
// (calib_swift_moe_test.go: Qwen1.5-MoE-A2.7B pp 2 and Qwen3-30B-A3B two
// nodes, 11-12 GiB short of nvidia-smi's figure when this was checked,
// 6.6 and 7.7 GiB since Megatron's fused cross-entropy, e968379, and
// NCCL's record_stream, 1c19b8d; the Moonlight rows
// missed the same way): what was checked and measured, none of it asserted.
//
// Checked for the full-recompute rows (the brief of issue 19; Megatron-LM
// core_v0.12.0 and core_v0.13.0, ms-swift c3f3ca4a4 and 0f31a5a9e), none
// holding more than memsh has: CheckpointFunction (tensor_parallel/
// random.py) saves only its args, per chunk of recompute_num_layers = 1:
// the layer input, attention_mask and context None, the rotary table
// (one [8192, 1, 1, 128] fp32 tensor shared by every layer, 4 MiB); the
// pipeline's received tensors are the first layer's checkpointed input
// and its outputs are freed once sent (deallocate_pipeline_outputs, set by
// megatron/training/arguments.py); the dispatcher keeps between forward
// and backward only its [tokens, experts] attributes (probs fp32 and
// routing_map, 2.4 MiB a Qwen1.5-MoE layer, overwritten by the next
// micro-batch); the shared expert's cached_* tensors are dropped as they
// are used; the loss keeps a per-token fp32 vector (32 KiB); evaluation
// (eval_interval 200) runs under no_grad with model.eval() (no recompute,
// nothing saved); the checkpoint save writes no optimizer state
// (no_save_optim). Megatron's per-step collectives add the model-parallel
// communicator (above) and, for the MoE metrics, all-reduces over the pp
// and tp x cp groups memsh has already (moe_utils.py
// reduce_aux_losses_tracker_across_ranks).
//
// Not modelled, named: packing's rows of varying total length (each
// step's tensors of other sizes in the allocator's cache), which the
// replay runs at a fixed 8192.
//
// The checkpoint load leaves nothing reserved: load_checkpoint ends with
// torch.cuda.empty_cache() (megatron/training/checkpointing.py l.1569 at
// core_v0.13.0), after the model's own tensors have moved into DDP's
// buffer. Not checked: for Qwen3-30B-A3B the two nodes' network.
//
// Where the two full-recompute rows' 11-12 GiB may sit (December 2026,
// issue 19, not modelled): they are the rows whose allocated memory is far
// under the card (memsh 38.7 and 40.1 GiB allocated of 79.25), and both
// read nvidia-smi, which counts what the caching allocator keeps cached.
// Their shapes change every layer and micro-batch (routed rows, packing).
// Measured and ruled out as the cause: tools/oracle/moe_frag.py ran one
// rank of moe.sh's first stage (13 layers, 15 of 60 experts, full
// recompute, 4 micro-batches, a 74 GiB cap) on one H200, 15 steps a mode
// (sim/testdata/cuda_h200/moe_frag.jsonl, cuda_run_moefrag.sh): reserved
// past allocated at the most is 0.83 GiB with fixed shapes (memsh's
// replay), 2.21 GiB with the router's counts, 3.33 GiB with packed rows of
// 6144-8192 tokens, and 0.71 GiB for packed rows under
// expandable_segments, which moe.sh sets. The shape churn grows the cache
// by 2.5 GiB at the most, not 11-12, and not at all with the script's
// allocator setting: the gap is elsewhere (the ms-swift version of the
// runs is the remaining lead: ms-swift#5120 reports 3.7.0.dev0, the pp2
// row's, nearly doubling memory after the first step). No published log
// of these runs gives max allocated beside reserved.
//
// Routed rows drawn anew for each layer, micro-batch copy and step
// (December 2026, session 25, issues 19 and 28: parallel(expert_spread=s),
// replay/routing.go; not set on these rows, whose spread no source
// states). go test ./sim -run TestMegatronSwiftCalibration -v with each
// MoE row's spread set to 0.1 / 0.2 / 0.4, nvidia-smi's figure of the
// fullest rank: Qwen1.5-MoE pp 2 full recompute (expandable_segments)
// 50.9 -> 51.3 / 51.4 / 51.6 GiB (-10.7 -> -10.0 / -9.8 / -9.5 %; its last
// stage's reserve over allocated 1.10 -> 1.53 / 1.63 / 1.80 GiB),
// Qwen3-30B-A3B 52.8 -> 53.9 / 53.7 / 54.0 (-12.0 -> -10.2 / -10.5 /
// -9.9 %; 2.69 -> 3.77 / 3.60 / 3.94 GiB over allocated), Moonlight pp 2
// 57.6 -> 57.8 / 58.1 / 58.3 (-3.9 -> -2.9 % at 0.4); the rows that
// already land move away: pp 2 no recompute 74.6 -> 75.5 / 75.9 / 76.1
// (+2.2 -> +4.2 %), tp 2 ep 4 66.2 -> 66.6 (+1.9 -> +2.5 %), Moonlight tp 2
// 56.1 -> 56.8 (+0.1 -> +1.5 %); the dense row has no experts. At most
// 1.3 GiB of the 6.1 and 7.2 GiB the full-recompute rows miss, as the
// H200 measurement above bounds it (2.5 GiB at the most): the churn of
// routed shapes is a part of these gaps, not their cause. Prepared, not
// run: tools/oracle/cuda_run_moefrag_exp.sh measures moe_frag.py's fixed
// and routed shapes under expandable_segments (the cells session 19 left
// empty) and its routed shapes over 40 steps without.
//
// The control (December 2026, calib_mlm_dsv3_test.go): Megatron-LM PR
// #6429's DeepSeek-V3 run at 14 layers measured Megatron-Core's own full
// recompute of MLA and MoE layers with max allocated, max reserved and
// the device's used memory. memsh's allocated peak is 2.8 % under with
// full recompute and 2.6 % under without (4.5 and 4.0 % before the fused
// cross-entropy, e968379), and the memory recompute saves
// lands within 1 %: the gap of these rows is not in what Megatron-Core's
// full recompute keeps. That run's used memory is 8.6 GiB over its
// allocated peak (memsh 3.6 GiB): outside allocated memory, where these
// rows' nvidia-smi figures are.
//
// ProcessGroupNCCL's record_stream (December 2026, issues 19 and 28,
// replay/nccl_record.go, TestNCCLRecordStreamHold): torch 2.6, which these
// runs used, records every collective's tensors on the NCCL stream
// (TORCH_NCCL_AVOID_RECORD_STREAMS became the default after 2.7), so the
// blocks of Megatron's dispatch and combine all-to-alls, forward and
// backward, are lent again only once the host has waited for the device:
// at each MoE layer's dispatcher sync and at the optimizer step (the most
// they can be held; Megatron's pipeline p2p syncs too, batch_p2p_sync and
// variable_seq_lengths' _communicate_shapes, but only between
// micro-batches). go test ./sim -run TestMegatronSwiftCalibration -v,
// before -> after: pp 2 full recompute 49.8 -> 50.4 GiB (-12.6 -> -11.6
// %), pp 2 no recompute 69.8 -> 74.1 (-4.4 -> +1.5 %: its backward makes
// no sync, so a micro-batch's all-to-all blocks, 15.4 GiB on stage 0 by
// the optimizer step, wait through it; without expandable_segments they
// split the cache too), tp 2 ep 4 65.4 -> 65.7 (+0.6 -> +1.1 %; April's
// bf16 router -0.8 -> -0.5 %), Qwen3-30B-A3B 51.8 -> 52.3 (-13.6 ->
// -12.9 %), Moonlight tp 2 52.7 -> 53.1 (-5.8 -> -5.2 %), pp 2 56.4 ->
// 57.1 (-6.0 -> -4.8 %); the dense row has no all-to-all. The DeepSeek-V3
// control (calib_mlm_dsv3_test.go) runs a current PyTorch, which stashes
// the tensors instead: unchanged.
//
// Checked in session 24 (issue 19) for the full-recompute rows, -11.6 %
// (Qwen1.5-MoE pp 2, stage 0 45.6 GiB, stage 1 50.4) and -12.9 %
// (Qwen3-30B-A3B) before it, -10.7 and -12.0 % after; only the one-rank
// groups priced:
//   - ms-swift before training: every script loads an mcore checkpoint
//     (--load <model>-mcore, written by `swift export --to_mcore` in a
//     process of its own) and the trainer builds only the processor
//     (get_model_processor(load_model=False), swift/megatron/train/sft.py
//     l.26 at ad907793e and c3f3ca4a4): no HF weights and no hf2mcore on
//     the GPU; packing runs in the dataset workers, on the host.
//   - The checkpoint load: torch_dist reads into the model's own tensors,
//     views of DDP's buffer (dist_checkpointing/strategies/torch.py
//     l.322-333 at core_r0.13.0: only a missing tensor gets a new one, on
//     the CPU). The gated fc1 factories' merge (transformer/mlp.py
//     l.312-314, torch.cat) copies each fc1 weight (Qwen1.5-MoE stage 0:
//     13 x (15 x 11 + 44) MiB = 2.65 GiB; Qwen3: 48 x 16 x 3 MiB = 2.25
//     GiB), alive until load_checkpoint returns, after its empty_cache
//     (checkpointing.py l.1569), so cached. But the load is the rank's low
//     point (bf16 parameters, fp32 gradients and main shards, no moments
//     yet: 22.1 and 21.6 GiB, against 38.5 and 42.4 allocated at the
//     step's peak), and the copies have the shapes of the per-expert
//     tensors DDP freed into the cache (param_and_grad_buffer.py l.698,
//     del old_param_data): they take those blocks and leave them.
//   - The checkpoint save (save_interval 200) copies GPU tensors to the
//     host as they are (strategies/filesystem_async.py l.135-150, l.225);
//     evaluation (eval_interval 200) runs forward only under no_grad with
//     model.eval() (ms-swift's evaluate, swift/megatron/trainers/base.py
//     l.236-251 at c3f3ca4a4; schedules.py keeps no tensors when
//     forward_only): neither holds more than a training step.
//   - DDP's buffer padding: each parameter starts at a multiple of 64
//     elements, each bucket ends at one of lcm(dp, 128) (2^16 only with
//     pad_buckets_for_high_nccl_busbw, off; param_and_grad_buffer.py
//     l.512-542 at core_r0.13.0): under 1 MiB a rank.
//   - Transformer Engine's cuBLAS workspaces on an A100: 4 MiB, and 4 x 4
//     MiB for the grouped GEMM's streams (pytorch/module/base.py l.61-85
//     at release_v2.3): 20 MiB.
//   - NCCL's network transport (Qwen3's two nodes): a connection over the
//     network keeps the Simple and LL128 FIFOs on the sender's GPU (GPU
//     Direct RDMA) and all three on the receiver's (src/transport/net.cc
//     l.709 and l.861 at v2.21.5-1), about 10 MiB a side after cuMem's
//     rounding, where a p2p connection holds 10 + 2: 8 MiB more on the
//     rank that sends to the other node on a channel: 16 to 32 MiB a
//     rank per communicator spanning the nodes (16 channels, each
//     crossing twice, over 16 or 8 ranks), 0.1 GiB over Qwen3's four
//     (dp, dp_loss, world, tp_ep).
//   - NCCL's channels on an A800 node (every communicator's buffers scale
//     with them): 8 NVLinks at SM80_NVLINK_BW 20 GB/s give each GPU 160
//     GB/s to the NVSwitches; ncclTopoCompute's ring search starts at 40
//     GB/s (speedArrayIntra) and stops at 4 channels, which fill it;
//     ncclTopoDupChannels doubles them (bwIntra 40 >= 25), pass 2 cannot
//     raise 8 channels to 30 GB/s (240 > 160), and ncclTopoPostset doubles
//     again (src/graph/search.cc l.835-850 and l.861-1040, connect.cc
//     l.443, topo.h l.16 at v2.21.5-1): 16, as memsh opens. The same steps
//     give an A100's 12 links 24, which NVIDIA/nccl-tests#100 logs
//     (memsh opens 16 on an A100: not these rows).
//   - One-rank groups, priced since (replay/nccl.go ncclOneRank,
//     calib_swift_moe_test.go): 0.5 GiB on each MoE row.
