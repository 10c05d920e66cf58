package importers

import "testing"

// TestTorchtitan imports torchtitan's own Llama 3 train configs
// (testdata/torchtitan, the README names each file's commit) and checks
// each plan against the one written by hand from the config and
// torchtitan's JobConfig defaults: local_batch_size and seq_len, bf16
// parameters under FSDP2 with fp32 reductions (bf16-mixed), AdamW's fused
// implementation, per-op selective checkpointing or full, FSDP over the
// GPUs tensor parallelism leaves (data_parallel_shard_degree -1), TP with
// sequence parallelism.
func TestTorchtitan(t *testing.T) {
	runImportCases(t, []importCase{{
		name: "llama3_8b on its 64 A100s",
		file: "torchtitan/llama3_8b.toml",
		step: torchtitanLocalStep(1, 1, 64, 8192),
		opts: Options{GPU: "A100-80GB", GPUs: 8, Nodes: 8},
		hand: `load("@stdlib//llm.star", "llama")
plan = train(llama("llama3-8b", pad_labels = False, position_ids = False), batch = 1, seq = 8192, precision = "bf16-mixed", optimizer = adamw(fused = True), checkpoint = "op",
             gpu = "A100-80GB", parallel = parallel(dp = 64, fsdp = True), cluster = cluster(nodes = 8, gpus_per_node = 8), clip_grad_norm = 1.0)`,
	}, {
		name: "llama3_70b on its 64 A100s: 8-way TP, FSDP over the rest",
		file: "torchtitan/llama3_70b.toml",
		step: torchtitanLocalStep(8, 1, 64/8, 8192),
		opts: Options{GPU: "A100-80GB", GPUs: 8, Nodes: 8},
		hand: `load("@stdlib//llm.star", "llama")
plan = train(llama("llama3-70b", pad_labels = False, position_ids = False), batch = 8, seq = 8192, precision = "bf16-mixed", optimizer = adamw(fused = True), checkpoint = "full",
             gpu = "A100-80GB", parallel = parallel(dp = 8, fsdp = True, tp = 8, sequence_parallel = True, tp_runtime = "torch", loss_parallel = "torch"),
             cluster = cluster(nodes = 8, gpus_per_node = 8), clip_grad_norm = 1.0)`,
	}, {
		name: "llama3_8b as torchtitan's benchmark ran it: 8 H100s, batch 2, blocks compiled",
		file: "torchtitan/llama3_8b.toml",
		step: torchtitanLocalStep(2, 1, 8, 8192),
		opts: Options{GPUs: 8, Overrides: []string{"training.local_batch_size=2", "training.compile=true"}},
		hand: `load("@stdlib//llm.star", "llama")
plan = train(llama("llama3-8b", pad_labels = False, position_ids = False), batch = 2, seq = 8192, precision = "bf16-mixed", optimizer = adamw(fused = True), checkpoint = "op",
             compile = "blocks", gpu = "H100-80GB", parallel = parallel(dp = 8, fsdp = True), clip_grad_norm = 1.0)`,
	}, {
		name: "llama3_8b as torchtitan's Float8 rows ran it: tensorwise, weights gathered in fp8",
		file: "torchtitan/llama3_8b.toml",
		step: torchtitanLocalStep(2, 1, 8, 8192),
		opts: Options{GPUs: 8, Overrides: []string{"training.local_batch_size=2", "compile.enable=true", "model.converters=float8",
			"float8.enable_fsdp_float8_all_gather=true", "float8.precompute_float8_dynamic_scale_for_fsdp=true"}},
		hand: `load("@stdlib//llm.star", "llama")
plan = train(llama("llama3-8b", pad_labels = False, position_ids = False), batch = 2, seq = 8192, precision = "bf16-mixed", optimizer = adamw(fused = True),
             checkpoint = checkpoint(policy = "op", save = ["mm", "attention", "reduce_scatter", "max"]),
             compile = True, float8 = "tensorwise", fsdp_float8_all_gather = True, gpu = "H100-80GB", parallel = parallel(dp = 8, fsdp = True), clip_grad_norm = 1.0)`,
	}, {
		name: "llama3_8b Float8 with torchao's size filter (filter_fqns auto_filter_small_kn)",
		file: "torchtitan/llama3_8b.toml",
		step: torchtitanLocalStep(2, 1, 8, 8192),
		opts: Options{GPUs: 8, Overrides: []string{"training.local_batch_size=2", "model.converters=float8", `float8.filter_fqns=["output", "auto_filter_small_kn"]`}},
		hand: `load("@stdlib//llm.star", "llama")
plan = train(llama("llama3-8b", pad_labels = False, position_ids = False), batch = 2, seq = 8192, precision = "bf16-mixed", optimizer = adamw(fused = True),
             checkpoint = checkpoint(policy = "op", save = ["mm", "attention", "reduce_scatter", "max"]),
             float8 = "tensorwise", float8_auto_filter = True, gpu = "H100-80GB", parallel = parallel(dp = 8, fsdp = True), clip_grad_norm = 1.0)`,
	}, {
		name: "llama3_70b compiled, HSDP, every second layer checkpointed, accumulation, float8",
		file: "torchtitan/llama3_70b.toml",
		step: torchtitanStep(64, 8192),
		opts: Options{GPUs: 8, Nodes: 4, Overrides: []string{"compile.enable=true", "parallelism.data_parallel_replicate_degree=2",
			"activation_checkpoint.mode=selective", "training.global_batch_size=64", "training.local_batch_size=2", "model.converters=float8"}},
		hand: `load("@stdlib//llm.star", "llama")
plan = train(llama("llama3-70b", pad_labels = False, position_ids = False), batch = 2, seq = 8192, grad_accum = 8, precision = "bf16-mixed", optimizer = adamw(fused = True),
             checkpoint = checkpoint(every = 2), compile = True, float8 = "tensorwise", gpu = "H100-80GB",
             parallel = parallel(dp = 4, fsdp = True, dp_replicate = 2, tp = 8, sequence_parallel = True, tp_runtime = "torch", loss_parallel = "torch"),
             cluster = cluster(nodes = 4, gpus_per_node = 8), clip_grad_norm = 1.0)`,
	}, {
		name: "llama3_70b float8 rowwise with tensor parallelism: not modelled",
		file: "torchtitan/llama3_70b.toml",
		step: torchtitanStep(64, 8192),
		opts: Options{GPUs: 8, Nodes: 4, Overrides: []string{"compile.enable=true", "parallelism.data_parallel_replicate_degree=2",
			"activation_checkpoint.mode=selective", "training.global_batch_size=64", "training.local_batch_size=2", "model.converters=float8",
			"float8.recipe_name=rowwise"}},
		notModelled: []string{"float8.recipe_name: rowwise with tensor parallelism (the input gathered in bf16, then cast rowwise)"},
		hand: `load("@stdlib//llm.star", "llama")
plan = train(llama("llama3-70b", pad_labels = False, position_ids = False), batch = 2, seq = 8192, grad_accum = 8, precision = "bf16-mixed", optimizer = adamw(fused = True),
             checkpoint = checkpoint(every = 2), compile = True, gpu = "H100-80GB",
             parallel = parallel(dp = 4, fsdp = True, dp_replicate = 2, tp = 8, sequence_parallel = True, tp_runtime = "torch", loss_parallel = "torch"),
             cluster = cluster(nodes = 4, gpus_per_node = 8), clip_grad_norm = 1.0)`,
	}, {
		name: "llama3_70b float8 auto_filter_small_kn with tensor parallelism: every linear converted, listed",
		file: "torchtitan/llama3_70b.toml",
		step: torchtitanStep(64, 8192),
		opts: Options{GPUs: 8, Nodes: 4, Overrides: []string{"compile.enable=true", "parallelism.data_parallel_replicate_degree=2",
			"activation_checkpoint.mode=selective", "training.global_batch_size=64", "training.local_batch_size=2", "model.converters=float8",
			`float8.filter_fqns=["output", "auto_filter_small_kn"]`}},
		notModelled: []string{"float8.filter_fqns: auto_filter_small_kn with tensor parallelism (memsh converts every linear)"},
		hand: `load("@stdlib//llm.star", "llama")
plan = train(llama("llama3-70b", pad_labels = False, position_ids = False), batch = 2, seq = 8192, grad_accum = 8, precision = "bf16-mixed", optimizer = adamw(fused = True),
             checkpoint = checkpoint(every = 2), compile = True, float8 = "tensorwise", gpu = "H100-80GB",
             parallel = parallel(dp = 4, fsdp = True, dp_replicate = 2, tp = 8, sequence_parallel = True, tp_runtime = "torch", loss_parallel = "torch"),
             cluster = cluster(nodes = 4, gpus_per_node = 8), clip_grad_norm = 1.0)`,
	}, {
		name:        "llama3_70b with loss parallelism disabled: the logits gathered, not modelled",
		file:        "torchtitan/llama3_70b.toml",
		step:        torchtitanLocalStep(8, 1, 64/8, 8192),
		opts:        Options{GPU: "A100-80GB", GPUs: 8, Nodes: 8, Overrides: []string{"parallelism.disable_loss_parallel=true"}},
		notModelled: []string{"parallelism.disable_loss_parallel: the output's logits gathered whole on every tensor-parallel rank (memsh keeps them sharded over the vocabulary)"},
		hand: `load("@stdlib//llm.star", "llama")
plan = train(llama("llama3-70b", pad_labels = False, position_ids = False), batch = 8, seq = 8192, precision = "bf16-mixed", optimizer = adamw(fused = True), checkpoint = "full",
             gpu = "A100-80GB", parallel = parallel(dp = 8, fsdp = True, tp = 8, sequence_parallel = True, tp_runtime = "torch"),
             cluster = cluster(nodes = 8, gpus_per_node = 8), clip_grad_norm = 1.0)`,
	}, {
		// Table 2 of benchmarks/llama3_h100_202412_torchtitan.md: FSDP over
		// dp_shard x cp, cp 8 at 262,144 tokens, full checkpointing.
		name: "llama3_8b as torchtitan's CP benchmark ran it: cp 8, the KV shards all-gathered (the default rotate method)",
		file: "torchtitan/llama3_8b.toml",
		step: torchtitanLocalStep(1, 1, 8/8, 262144),
		opts: Options{GPUs: 8, Overrides: []string{"training.local_batch_size=1", "training.seq_len=262144",
			"activation_checkpoint.mode=full", "parallelism.context_parallel_degree=8"}},
		hand: `load("@stdlib//llm.star", "llama")
plan = train(llama("llama3-8b", pad_labels = False, position_ids = False), batch = 1, seq = 262144, precision = "bf16-mixed", optimizer = adamw(fused = True), checkpoint = "full",
             gpu = "H100-80GB", parallel = parallel(dp = 1, fsdp = True, cp = 8, cp_mode = "allgather"), clip_grad_norm = 1.0)`,
	}, {
		name: "llama3_8b on 16 GPUs with 2 pipeline stages: torch's pipelining, FSDP kept unsharded between micro-batches",
		file: "torchtitan/llama3_8b.toml",
		step: torchtitanLocalStep(8, 1, 16/2, 8192),
		opts: Options{GPUs: 8, Nodes: 2, Overrides: []string{"training.local_batch_size=8", "parallelism.pipeline_parallel_degree=2"}},
		hand: `load("@stdlib//llm.star", "llama")
plan = train(llama("llama3-8b", pad_labels = False, position_ids = False), batch = 1, seq = 8192, precision = "bf16-mixed", optimizer = adamw(fused = True), checkpoint = "op",
             gpu = "H100-80GB", parallel = parallel(dp = 8, fsdp = True, reshard_after_forward = False, pp = 2, schedule = "1f1b",
             micro_batches = 8, pp_runtime = "torch"), cluster = cluster(nodes = 2, gpus_per_node = 8), clip_grad_norm = 1.0)`,
	}, {
		name: "llama3_8b, 2 pipeline stages, micro-batches of 2: batch is the micro-batch, the local batch of 8 split in 4",
		file: "torchtitan/llama3_8b.toml",
		step: torchtitanLocalStep(8, 1, 16/2, 8192),
		opts: Options{GPUs: 8, Nodes: 2, Overrides: []string{"training.local_batch_size=8", "parallelism.pipeline_parallel_degree=2",
			"parallelism.pipeline_parallel_microbatch_size=2"}},
		hand: `load("@stdlib//llm.star", "llama")
plan = train(llama("llama3-8b", pad_labels = False, position_ids = False), batch = 2, seq = 8192, precision = "bf16-mixed", optimizer = adamw(fused = True), checkpoint = "op",
             gpu = "H100-80GB", parallel = parallel(dp = 8, fsdp = True, reshard_after_forward = False, pp = 2, schedule = "1f1b",
             micro_batches = 4, pp_runtime = "torch"), cluster = cluster(nodes = 2, gpus_per_node = 8), clip_grad_norm = 1.0)`,
	}, {
		name: "llama3_70b with 4 pipeline stages: torchtitan's split, the embedding and the output counted as a layer each",
		file: "torchtitan/llama3_70b.toml",
		step: torchtitanLocalStep(8, 1, 64/(8*4), 8192),
		opts: Options{GPU: "A100-80GB", GPUs: 8, Nodes: 8, Overrides: []string{"parallelism.pipeline_parallel_degree=4"}},
		hand: `load("@stdlib//llm.star", "llama")
plan = train(llama("llama3-70b", pad_labels = False, position_ids = False), batch = 1, seq = 8192, precision = "bf16-mixed", optimizer = adamw(fused = True), checkpoint = "full",
             gpu = "A100-80GB", parallel = parallel(dp = 2, fsdp = True, reshard_after_forward = False, tp = 8, sequence_parallel = True,
             tp_runtime = "torch", loss_parallel = "torch", pp = 4, schedule = "1f1b", micro_batches = 8, stage_layers = [20, 21, 20, 19], pp_runtime = "torch"),
             cluster = cluster(nodes = 8, gpus_per_node = 8), clip_grad_norm = 1.0)`,
	}, {
		name: "llama3_8b, Interleaved1F1B on 2 ranks: two stages each",
		file: "torchtitan/llama3_8b.toml",
		step: torchtitanLocalStep(8, 1, 16/2, 8192),
		opts: Options{GPUs: 8, Nodes: 2, Overrides: []string{"training.local_batch_size=8", "parallelism.pipeline_parallel_degree=2",
			"parallelism.pipeline_parallel_schedule=Interleaved1F1B"}},
		hand: `load("@stdlib//llm.star", "llama")
plan = train(llama("llama3-8b", pad_labels = False, position_ids = False), batch = 1, seq = 8192, precision = "bf16-mixed", optimizer = adamw(fused = True), checkpoint = "op",
             gpu = "H100-80GB", parallel = parallel(dp = 8, fsdp = True, reshard_after_forward = False, pp = 2, schedule = "interleaved",
             virtual_stages = 2, micro_batches = 8, stage_layers = [8, 9, 8, 7], pp_runtime = "torch"), cluster = cluster(nodes = 2, gpus_per_node = 8), clip_grad_norm = 1.0)`,
	}, {
		name:        "cp 2 with the alltoall rotate method: torch's ring",
		file:        "torchtitan/llama3_8b.toml",
		step:        torchtitanLocalStep(1, 1, 8/2, 8192),
		opts:        Options{GPUs: 8, Overrides: []string{"parallelism.context_parallel_degree=2", "parallelism.context_parallel_rotate_method=alltoall"}},
		notModelled: []string{"parallelism.context_parallel_rotate_method: alltoall (torch's ring: memsh's ring attention, without torch's fp32 merges of the steps' outputs)"},
		hand: `load("@stdlib//llm.star", "llama")
plan = train(llama("llama3-8b", pad_labels = False, position_ids = False), batch = 1, seq = 8192, precision = "bf16-mixed", optimizer = adamw(fused = True), checkpoint = "op",
             gpu = "H100-80GB", parallel = parallel(dp = 4, fsdp = True, cp = 2), clip_grad_norm = 1.0)`,
	}, {
		name:  "llama3_8b on one GPU, the model from its config.json",
		file:  "torchtitan/llama3_8b.toml",
		step:  torchtitanLocalStep(1, 1, 1, 2048),
		opts:  Options{Seq: 2048, Model: "llama-3-8b.json", Overrides: []string{"activation_checkpoint.mode=none", "optimizer.implementation=foreach"}},
		files: map[string]string{"llama-3-8b.json": "../../sim/testdata/hf/llama-3-8b.json"},
		hand:  `plan = train(hf_config("llama-3-8b.json", pad_labels = False, position_ids = False), batch = 1, seq = 2048, precision = "bf16-mixed", optimizer = adamw(), gpu = "H100-80GB", clip_grad_norm = 1.0)`,
	}})
}

// TestTorchtitanReleases imports the keys of torchtitan's later releases
// (v0.2.0, v0.2.2: torchtitan/config/job_config.py at 73a0e69, tag v0.2.2)
// next to the 6404b93 names the files above use, each as torchtitan reads it.
func TestTorchtitanReleases(t *testing.T) {
	const v022 = "torchtitan/llama3_8b_v0.2.2.toml"
	const llama8b = `load("@stdlib//llm.star", "llama")
plan = train(llama("llama3-8b", pad_labels = False, position_ids = False), batch = 1, seq = 8192, precision = "bf16-mixed", optimizer = adamw(fused = True), checkpoint = "op",
             gpu = "H100-80GB", parallel = parallel(dp = 8, fsdp = True), clip_grad_norm = 1.0)`
	// v0.2.x passes activation_checkpoint.early_stop, False by default, to
	// each block's checkpoint: the recompute runs the whole block
	const llama8bV022 = `load("@stdlib//llm.star", "llama")
plan = train(llama("llama3-8b", pad_labels = False, position_ids = False), batch = 1, seq = 8192, precision = "bf16-mixed", optimizer = adamw(fused = True),
             checkpoint = checkpoint(policy = "op", early_stop = False), gpu = "H100-80GB", parallel = parallel(dp = 8, fsdp = True), clip_grad_norm = 1.0)`
	runImportCases(t, []importCase{{
		// its [quantize.linear.float8] without the converter, validation.enable
		// false and [compile] enable false: nothing left over
		name: "v0.2.2's llama3_8b on its 64 A100s",
		file: v022,
		step: torchtitanLocalStep(1, 1, 64, 8192),
		opts: Options{GPU: "A100-80GB", GPUs: 8, Nodes: 8},
		hand: `load("@stdlib//llm.star", "llama")
plan = train(llama("llama3-8b", pad_labels = False, position_ids = False), batch = 1, seq = 8192, precision = "bf16-mixed", optimizer = adamw(fused = True), checkpoint = checkpoint(policy = "op", early_stop = False),
             gpu = "A100-80GB", parallel = parallel(dp = 64, fsdp = True), cluster = cluster(nodes = 8, gpus_per_node = 8), clip_grad_norm = 1.0)`,
	}, {
		// components/quantization/float8.py at v0.2.2, line 238: the converter
		// quantize.linear.float8 reads [quantize.linear.float8] as 6404b93's float8 read [float8]
		name: "v0.2.2's float8 converter and section: tensorwise, weights gathered in fp8",
		file: v022,
		step: torchtitanLocalStep(2, 1, 8, 8192),
		opts: Options{GPUs: 8, Overrides: []string{"training.local_batch_size=2", "compile.enable=true", "model.converters=quantize.linear.float8",
			"quantize.linear.float8.enable_fsdp_float8_all_gather=true"}},
		hand: `load("@stdlib//llm.star", "llama")
plan = train(llama("llama3-8b", pad_labels = False, position_ids = False), batch = 2, seq = 8192, precision = "bf16-mixed", optimizer = adamw(fused = True),
             checkpoint = checkpoint(policy = "op", save = ["mm", "attention", "reduce_scatter", "max"]),
             compile = True, float8 = "tensorwise", fsdp_float8_all_gather = True, gpu = "H100-80GB", parallel = parallel(dp = 8, fsdp = True), clip_grad_norm = 1.0)`,
	}, {
		name:        "v0.2.2's validation.enable",
		file:        v022,
		step:        torchtitanLocalStep(1, 1, 8, 8192),
		opts:        Options{GPUs: 8, Overrides: []string{"validation.enable=true"}},
		notModelled: []string{"validation.enable: the validation loop's forward passes"},
		hand:        llama8bV022,
	}, {
		name:        "6404b93's validation.enabled",
		file:        "torchtitan/llama3_8b.toml",
		step:        torchtitanLocalStep(1, 1, 8, 8192),
		opts:        Options{GPUs: 8, Overrides: []string{"validation.enabled=true"}},
		notModelled: []string{"validation.enabled: the validation loop's forward passes"},
		hand:        llama8b,
	}, {
		// job_config.py:275-280 at v0.2.2: parameters, gradients and states in bf16
		name: "v0.2.2's training.dtype bfloat16: pure bf16",
		file: v022,
		step: torchtitanLocalStep(1, 1, 8, 8192),
		opts: Options{GPUs: 8, Overrides: []string{"training.dtype=bfloat16"}},
		hand: `load("@stdlib//llm.star", "llama")
plan = train(llama("llama3-8b", pad_labels = False, position_ids = False), batch = 1, seq = 8192, precision = "bf16", optimizer = adamw(fused = True), checkpoint = checkpoint(policy = "op", early_stop = False),
             gpu = "H100-80GB", parallel = parallel(dp = 8, fsdp = True), clip_grad_norm = 1.0)`,
	}, {
		// distributed/activation_checkpoint.py:226-235 at v0.2.2: the partitioner's
		// activation_memory_budget, 0.5 by default
		name: "v0.2.2's memory_budget mode: the compiled model's budget",
		file: v022,
		step: torchtitanLocalStep(1, 1, 8, 8192),
		opts: Options{GPUs: 8, Overrides: []string{"compile.enable=true", "activation_checkpoint.mode=memory_budget"}},
		hand: `load("@stdlib//llm.star", "llama")
plan = train(llama("llama3-8b", pad_labels = False, position_ids = False), batch = 1, seq = 8192, precision = "bf16-mixed", optimizer = adamw(fused = True),
             checkpoint = checkpoint(budget = 0.5), compile = True, gpu = "H100-80GB", parallel = parallel(dp = 8, fsdp = True), clip_grad_norm = 1.0)`,
	}, {
		name: "v0.2.2's memory_budget mode at 0.2",
		file: v022,
		step: torchtitanLocalStep(1, 1, 8, 8192),
		opts: Options{GPUs: 8, Overrides: []string{"compile.enable=true", "activation_checkpoint.mode=memory_budget", "activation_checkpoint.memory_budget=0.2"}},
		hand: `load("@stdlib//llm.star", "llama")
plan = train(llama("llama3-8b", pad_labels = False, position_ids = False), batch = 1, seq = 8192, precision = "bf16-mixed", optimizer = adamw(fused = True),
             checkpoint = checkpoint(budget = 0.2), compile = True, gpu = "H100-80GB", parallel = parallel(dp = 8, fsdp = True), clip_grad_norm = 1.0)`,
	}, {
		name: "early_stop true (the recompute stops early, as before v0.2.0), another compile backend, the ptrr balancer: said, not replayed",
		file: v022,
		step: torchtitanLocalStep(1, 1, 8/2, 8192),
		opts: Options{GPUs: 8, Overrides: []string{"activation_checkpoint.early_stop=true", "compile.backend=aot_eager", "parallelism.context_parallel_degree=2", "parallelism.context_parallel_load_balancer=ptrr"}},
		notModelled: []string{
			"compile.backend: aot_eager (memsh replays inductor's fused kernels)",
			"parallelism.context_parallel_load_balancer: ptrr (FlexAttention's balancer)",
		},
		hand: `load("@stdlib//llm.star", "llama")
plan = train(llama("llama3-8b", pad_labels = False, position_ids = False), batch = 1, seq = 8192, precision = "bf16-mixed", optimizer = adamw(fused = True), checkpoint = "op",
             gpu = "H100-80GB", parallel = parallel(dp = 4, fsdp = True, cp = 2, cp_mode = "allgather"), clip_grad_norm = 1.0)`,
	}, {
		// torchtitan reads the pipeline's keys only when pipeline_parallel_degree > 1
		name: "a pipeline schedule at pp 1: understood, no effect",
		file: v022,
		step: torchtitanLocalStep(1, 1, 8, 8192),
		opts: Options{GPUs: 8, Overrides: []string{"parallelism.pipeline_parallel_schedule=Interleaved1F1B", "parallelism.pipeline_parallel_microbatch_size=1"}},
		hand: llama8bV022,
	}, {
		// parallel_dims.py at v0.2.2: efsdp = dp_shard x cp x tp / (etp x ep),
		// etp 1 by default: the experts whole over the tensor-parallel ranks
		name:  "a MoE at ep 2, tp 2: torchtitan's expert_tensor_parallel_degree 1",
		file:  v022,
		step:  torchtitanLocalStep(1, 1, 8/2, 2048),
		opts:  Options{GPUs: 8, Seq: 2048, Model: "mixtral.json", Overrides: []string{"parallelism.expert_parallel_degree=2", "parallelism.tensor_parallel_degree=2"}},
		files: map[string]string{"mixtral.json": "../../sim/testdata/hf/mixtral-8x7b-v0.1.json"},
		hand: `plan = train(hf_config("mixtral.json", pad_labels = False, position_ids = False), batch = 1, seq = 2048, precision = "bf16-mixed", optimizer = adamw(fused = True), checkpoint = checkpoint(policy = "op", early_stop = False),
             gpu = "H100-80GB", parallel = parallel(dp = 4, fsdp = True, tp = 2, sequence_parallel = True, tp_runtime = "torch", loss_parallel = "torch",
             ep = 2, expert_tp = 1), clip_grad_norm = 1.0)`,
	}, {
		// distributed/tensor_parallel.py at v0.2.2: maybe_enable_async_tp turns on
		// Inductor's micro-pipeline TP when tp > 1, the model compiled
		name: "async TP at tp 2, the model compiled",
		file: v022,
		step: torchtitanLocalStep(1, 1, 8/2, 8192),
		opts: Options{GPUs: 8, Overrides: []string{"compile.enable=true", "parallelism.tensor_parallel_degree=2", "parallelism.enable_async_tensor_parallel=true"}},
		notModelled: []string{
			"parallelism.enable_async_tensor_parallel: the collectives' overlap with the matmuls (the step time prices them as without it; the memory is replayed, async_tp=True)",
		},
		hand: `load("@stdlib//llm.star", "llama")
plan = train(llama("llama3-8b", pad_labels = False, position_ids = False), batch = 1, seq = 8192, precision = "bf16-mixed", optimizer = adamw(fused = True), checkpoint = "op", compile = True,
             gpu = "H100-80GB", parallel = parallel(dp = 4, fsdp = True, tp = 2, sequence_parallel = True, tp_runtime = "torch", async_tp = True, loss_parallel = "torch"), clip_grad_norm = 1.0)`,
	}, {
		// maybe_enable_async_tp is called only with tp > 1
		name: "async TP at tp 1: understood, no effect",
		file: v022,
		step: torchtitanLocalStep(1, 1, 8, 8192),
		opts: Options{GPUs: 8, Overrides: []string{"parallelism.enable_async_tensor_parallel=true"}},
		hand: llama8bV022,
	}, {
		name:  "a MoE at ep 2, tp 2, expert_tensor_parallel_degree 2: the experts split like the MLP",
		file:  v022,
		step:  torchtitanLocalStep(1, 1, 8/2, 2048),
		opts:  Options{GPUs: 8, Seq: 2048, Model: "mixtral.json", Overrides: []string{"parallelism.expert_parallel_degree=2", "parallelism.tensor_parallel_degree=2", "parallelism.expert_tensor_parallel_degree=2"}},
		files: map[string]string{"mixtral.json": "../../sim/testdata/hf/mixtral-8x7b-v0.1.json"},
		hand: `plan = train(hf_config("mixtral.json", pad_labels = False, position_ids = False), batch = 1, seq = 2048, precision = "bf16-mixed", optimizer = adamw(fused = True), checkpoint = checkpoint(policy = "op", early_stop = False),
             gpu = "H100-80GB", parallel = parallel(dp = 4, fsdp = True, tp = 2, sequence_parallel = True, tp_runtime = "torch", loss_parallel = "torch", ep = 2), clip_grad_norm = 1.0)`,
	}})
}

func TestTorchtitanErrors(t *testing.T) {
	const model = "[model]\nname = \"llama3\"\nflavor = \"8B\"\n[training]\nlocal_batch_size = 2\n"
	runErrorCases(t, []errorCase{
		{name: "async TP without the model compiled", file: "j.toml", config: model + "[parallelism]\ntensor_parallel_degree = 8\nenable_async_tensor_parallel = true\n",
			opts: Options{GPUs: 8}, want: "j.toml: key parallelism.enable_async_tensor_parallel: async TP is an Inductor pass: it needs the model compiled", wantHint: "Async TP requires"},
		{name: "a key of torchtitan's earlier layout", file: "j.toml", config: model + "data_parallel_shard_degree = 8\n",
			want: "j.toml: key training.data_parallel_shard_degree: a key of an earlier torchtitan version", wantHint: "parallelism.data_parallel_shard_degree"},
		{name: "both batch names", file: "j.toml", config: model + "batch_size = 4\n",
			want: "j.toml: key training.batch_size: and training.local_batch_size both set the per-GPU batch", wantHint: "local_batch_size"},
		{name: "a flavor memsh does not know", file: "j.toml", config: "[model]\nname = \"llama3\"\nflavor = \"debugmodel\"\n[training]\nseq_len = 8\n",
			want: "j.toml: key model.flavor: memsh's zoo has no model for llama3 flavor debugmodel", wantHint: "--model config.json"},
		{name: "degrees that are not the world size", file: "j.toml", config: model + "[parallelism]\ndata_parallel_shard_degree = 4\ntensor_parallel_degree = 4\n", opts: Options{GPUs: 8},
			want: "j.toml: key parallelism.data_parallel_shard_degree: replicate 1 x shard 4 x tp 4 x pp 1 x cp 1 is not the job's 8 GPUs", wantHint: "world size"},
		{name: "GPUs the other degrees do not divide", file: "j.toml", config: model + "[parallelism]\ntensor_parallel_degree = 3\n", opts: Options{GPUs: 8},
			want: "j.toml: key parallelism.data_parallel_shard_degree: -1 takes the GPUs left over, but 8 GPUs do not divide by replicate 1 x tp 3 x pp 1 x cp 1", wantHint: "--gpus"},
		{name: "a global batch that does not divide", file: "j.toml", config: model + "global_batch_size = 10\n", opts: Options{GPUs: 8},
			want: "j.toml: key training.global_batch_size: 10 is not a multiple of local_batch_size 2 x data-parallel degree 8", wantHint: "multiple"},
		{name: "an unknown optimizer", file: "j.toml", config: model + "[optimizer]\nname = \"Muon\"\n",
			want: "j.toml: key optimizer.name: unknown optimizer Muon", wantHint: "AdamW"},
		{name: "an unknown checkpoint option", file: "j.toml", config: model + "[activation_checkpoint]\nselective_ac_option = \"some\"\n",
			want: "j.toml: key activation_checkpoint.selective_ac_option: want op or a positive whole number, got some", wantHint: "'op'"},
		{name: "a schedule memsh does not replay", file: "j.toml", config: model + "[parallelism]\npipeline_parallel_degree = 4\npipeline_parallel_schedule = \"InterleavedZeroBubble\"\n", opts: Options{GPUs: 8},
			want: "j.toml: key parallelism.pipeline_parallel_schedule: schedule InterleavedZeroBubble is not modelled", wantHint: "Interleaved1F1B"},
		{name: "layers per stage that do not divide over the stages", file: "j.toml", config: model + "[parallelism]\npipeline_parallel_degree = 4\npipeline_parallel_layers_per_stage = 5\n", opts: Options{GPUs: 8},
			want: "j.toml: key parallelism.pipeline_parallel_layers_per_stage: 7 stages (32 layers, 1 for the input and 1 for the output) do not divide over pipeline_parallel_degree 4", wantHint: "divides"},
		{name: "an unknown rotate method", file: "j.toml", config: model + "[parallelism]\ncontext_parallel_degree = 2\ncontext_parallel_rotate_method = \"ring\"\n", opts: Options{GPUs: 8},
			want: "j.toml: key parallelism.context_parallel_rotate_method: unknown rotate method ring", wantHint: "allgather and alltoall"},
		{name: "an unknown compile component", file: "j.toml", config: model + "[compile]\nenable = true\ncomponents = [\"optimizer\"]\n",
			want: "j.toml: key compile.components: unknown component optimizer", wantHint: "model and loss"},
		{name: "memory_budget without the model compiled", file: "j.toml", config: model + "[activation_checkpoint]\nmode = \"memory_budget\"\n",
			want: "j.toml: key activation_checkpoint.mode: memory_budget needs the model compiled", wantHint: "compile.enable = true"},
		{name: "a memory budget out of [0, 1]", file: "j.toml", config: model + "[compile]\nenable = true\n[activation_checkpoint]\nmode = \"memory_budget\"\nmemory_budget = 2\n",
			want: "j.toml: key activation_checkpoint.memory_budget: want a fraction, got 2", wantHint: "[0, 1]"},
		{name: "an unknown training dtype", file: "j.toml", config: model + "dtype = \"float16\"\n",
			want: "j.toml: key training.dtype: unknown dtype float16", wantHint: "bfloat16 or float32"},
		{name: "an expert tensor-parallel degree neither 1 nor tp", file: "j.toml", opts: Options{GPUs: 8},
			config: model + "[parallelism]\ntensor_parallel_degree = 4\nexpert_parallel_degree = 2\nexpert_tensor_parallel_degree = 2\n",
			want:   "j.toml: key parallelism.expert_tensor_parallel_degree: 2 is neither 1 nor tensor_parallel_degree 4", wantHint: "1 or tensor_parallel_degree"},
		{name: "an unknown float8 recipe with tensor parallelism", file: "j.toml", opts: Options{GPUs: 8},
			config: "[model]\nname = \"llama3\"\nflavor = \"8B\"\nconverters = [\"float8\"]\n[training]\nlocal_batch_size = 2\n[parallelism]\ntensor_parallel_degree = 2\n[float8]\nrecipe_name = \"rowwsie\"\n",
			want:   "j.toml: key float8.recipe_name: unknown recipe rowwsie", wantHint: "tensorwise, rowwise or rowwise_with_gw_hp"},
		{name: "experts over the context-parallel ranks", file: "j.toml", opts: Options{GPUs: 8},
			config: model + "[parallelism]\ncontext_parallel_degree = 2\nexpert_parallel_degree = 8\n",
			want:   "j.toml: key parallelism.expert_parallel_degree: 8 does not divide the data-parallel degree 4 (replicate 1 x shard 4)", wantHint: "borrows them from context_parallel_degree"},
		{name: "malformed TOML", file: "j.toml", config: "[model\n", want: "j.toml: not valid TOML: toml: line 2: expected '.' or ']' to end table name, but got '\\n' instead"},
	})
}
