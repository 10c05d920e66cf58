package sim

// Why the held-back Megatron-SWIFT Moonlight-16B-A3B pp 2 row
// (TestMegatronSwiftCalibration; examples/train/megatron/moe/deepseek_v3.sh
// at cecf735f1, "8 * 60GiB; 9s/it", ms-swift 3.7.0.dev0, Megatron-LM
// core_r0.13.0, TransformerEngine release_v2.3 per the docs of that week)
// is priced at 3.91 s (December 2026, issue 19, moon29; 4.01 s after a766c2a
// priced the vocabulary-parallel loss at its kernels' passes, 3.97 s since the fused loss: the stage
// figures below are from that check, aa1c894, and no test asserts them).
// Checked against the script and the sources it ran; not closed.
//
// Where the gap sits. Megatron's 1F1B schedule at pp 2 and 4 micro-batches
// runs m + p - 1 = 5 stage micro-batch slots a step, so 9 s (less memsh's
// 0.12 s optimizer and 0.03 s gradient reduction) is about 1.78 s a slot,
// and over the first stage's 14 layers (27 less the last stage's 13) about
// 125 ms a layer micro-batch: forward, recompute and backward. memsh's
// slowest stage (the last: 13 layers and the output layer) prices 2.71 s of
// compute over 4 micro-batches, 2.37 s of it in the layers: 45 ms a layer
// micro-batch. The same arithmetic on the Qwen1.5-MoE pp 2 full-recompute
// row of the same harness, dataset and month (moe.sh at c3f3ca4a4, 2.95 s,
// memsh +2.5 %) gives 44 ms measured (13 layers) against memsh's 40 ms.
// So about 80 ms of each Moonlight layer micro-batch is missing, and it is
// Moonlight's (DeepSeek-V3's layers): not the harness, the host, the data,
// the logging (Megatron's elapsed time per iteration, one global batch;
// ms-swift's training_log, log_interval 5), the bubble (0.72 s, 18 %),
// the optimizer (no CPU offload: optimizer_cpu_offload False,
// megatron_args.py l.115) or the data-parallel reduction.
//
// Checked, each as the run had it and as memsh prices it:
//   - batch: micro-batch 1, global 16, dp 4: 4 micro-batches a step
//     (GradAccum 4); max_length 8192 with packing: padding-free rows of up
//     to 8192 tokens, the attention priced as one causal row of 8192 (an
//     upper bound: core/packing.go), as on the Qwen1.5-MoE row that lands;
//   - full recompute of every layer (recompute_num_layers 1): priced,
//     0.57 s of the stage's 2.71 s;
//   - MLA's attention. Transformer Engine runs no backend for
//     head_dim_qk 192 != head_dim_v 128 on an A800: it disables
//     flash-attn for MLA in every release (dot_product_attention/utils.py
//     l.475-479 at release_v2.3), cuDNN takes no head dim above 128 before
//     sm90 (TransformerEngine#1610; #1821 is this ValueError on sm80 with
//     thd rows, TE 2.3), and the unfused path takes no thd; the script's
//     --attention_backend flash forces NVTE_FUSED_ATTN=0 anyway
//     (language_module.py l.56-58). ms-swift's _patch_mla_attention
//     (swift/megatron/init.py l.357-361 at cecf735f1) pads the value to 192
//     under packed rows and slices the output back, so FlashAttention-2
//     runs at head dim 192 for q, k and v. memsh's MLA under flash pads v
//     the same way (nn/mla.go): FLOPs 2 x rows x keys x heads x (192 + 192),
//     1.5 times Qwen1.5-MoE's at 128, 0.74 s on the stage (14 ms a layer
//     micro-batch). It prices them on FlashAttention-2's one curve by
//     sequence, measured at head dim 128 (timing/kernels.go); no published
//     figure gives its rate at 192 (tools/oracle/cuda_mla_attn.py,
//     prepared, times both). To carry the gap alone the kernel would have
//     to run 7 times slower than priced;
//   - the dispatcher: alltoall (ms-swift's default, megatron_args.py
//     l.211) with --moe_permute_fusion: priced as for the other rows;
//   - the experts: 64 routed, top-6, grouped GEMM (TEGroupedMLP), two
//     shared as one MLP of 2 x 1408 (swift/megatron/model/gpt/config.py:
//     n_shared_experts x moe_ffn_hidden_size); sigmoid scores with the
//     expert bias loaded from e_score_correction_bias (hf2mcore.py
//     l.61-62), so the routing is the pretrained one, and seq_aux_loss
//     (coefficient 1e-3). memsh prices a balanced dispatch: 0.87 s of
//     experts on the stage, so even twice the mean load on the busiest of
//     the 4 expert ranks adds about 0.9 s, not 5; no figure of this run's
//     load is published;
//   - the host. Priced since (issue 19, moe30): the dispatcher's
//     split-size sync ("before_ep_alltoall") and the router's and
//     dispatcher's 252 aten ops before it, 19 after it and 127 in the
//     backward (core_v0.13.0, sigmoid scores with the expert bias and the
//     sequence aux loss: nn/moe_megatron_host.go, counted on a CPU run of
//     Megatron-Core) at 12.4 µs an aten op: 3.1 ms of host time before
//     the sync against about 11 ms of GPU work a layer forward, so the
//     step moves 3.91 -> 3.92 s. Unpriced, named: ms-swift's
//     PackedSeqParams carry max_seqlen as a CUDA tensor
//     (swift/megatron/trainers/utils.py l.136, position_ids.max() + 1),
//     read on the host by the attention (both rows); and, Moonlight's
//     alone, Megatron-Core's unfused RoPE on packed rows: ms-swift sets
//     no_rope_fusion for MLA (megatron_args.py _init_no_rope_fusion), so
//     each MLA layer's forward and recompute runs rope_utils.py
//     _apply_rotary_pos_emb_thd (l.139-179 at core_v0.13.0) twice: a
//     .tolist() sync, then about twenty aten ops per document. At memsh's
//     12.4 us an aten op (timing/host_ops.go) and the dataset's long R1
//     traces (liucong/Chinese-DeepSeek-R1-Distill-data-110k-SFT: 110,000
//     examples in 1.31 GB, its opencc copy's card; over a thousand tokens
//     each, a handful a row), that is a few ms a layer micro-batch, not 80;
//     cuda_mla_attn.py times it per document.
// The row stays unasserted. What would decide it: Megatron-Core with
// Transformer Engine and flash-attn on an A100-class GPU, one Moonlight
// layer (MLA with the padded value, 64 experts top-6 at ep 1 with 16 local
// experts) forward and backward on a packed 8192-token row, under the
// profiler, against the same for a Qwen1.5-MoE layer; the oracle tools here
// have neither Megatron-Core nor Transformer Engine.
