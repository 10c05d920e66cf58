package importers

import "testing"

// TestDeepSpeed imports DeepSpeed configs of microsoft/DeepSpeedExamples
// (testdata/deepspeed, the README names each file's commit) with the model
// and sequence from the command line, and checks each plan against the
// one written by hand: the batch triple resolved over the GPUs, fp16 as
// fp16-mixed, DeepSpeed's Adam as fused AdamW, the ZeRO stage over every
// GPU, offload_optimizer/offload_param (and their deprecated cpu_offload
// spellings) as offload(), ZeRO's buffer sizes listed as not modelled.
func TestDeepSpeed(t *testing.T) {
	llama2 := map[string]string{"llama-2-7b.json": "../../sim/testdata/hf/llama-2-7b.json"}
	runImportCases(t, []importCase{{
		name:  "alpaca-lora-zero3: ZeRO-3, optimizer and parameters on the CPU, on 8 GPUs",
		file:  "deepspeed/alpaca_lora_zero3.json",
		step:  deepspeedStep(8*1*8, 512),
		opts:  Options{Model: "llama-2-7b.json", Seq: 512, GPUs: 8, GPU: "A100-40GB"},
		files: llama2,
		notModelled: []string{
			"zero_optimization.stage3_max_reuse_distance: ZeRO's all-gather bucket, reuse distance and sub-groups (memsh replays reduce_bucket_size, the stage-3 prefetch bucket, persistence threshold and live parameters, not these)",
			"zero_optimization.sub_group_size: ZeRO's all-gather bucket, reuse distance and sub-groups (memsh replays reduce_bucket_size, the stage-3 prefetch bucket, persistence threshold and live parameters, not these)",
			"zero_optimization.contiguous_gradients: the contiguous gradient buffer (on by default)",
		},
		hand: `plan = train(hf_config("llama-2-7b.json"), batch = 8, seq = 512, precision = "fp16-mixed", optimizer = adamw(fused = True),
             clip_grad_norm = 1.0, gpu = "A100-40GB", parallel = parallel(dp = 8, zero = 3, reduce_bucket_size = 10000000, stage3_prefetch_bucket_size = 100000000,
             stage3_param_persistence_threshold = 100000, stage3_max_live_parameters = 200000000), offload = offload(optimizer = "cpu", params = "cpu"))`,
	}, {
		name:  "Megatron-LM's ZeRO-2 CPU offload config: train_batch_size 16 on 8 GPUs is micro batch 2",
		file:  "deepspeed/megatron_zero2_cpu_offload.json",
		step:  deepspeedStep(16, 1024),
		opts:  Options{Model: "llama-2-7b.json", Seq: 1024, GPUs: 8},
		files: llama2,
		notModelled: []string{
			"activation_checkpointing.partition_activations: DeepSpeed's activation partitioning across model-parallel ranks",
			"zero_optimization.contiguous_gradients: the contiguous gradient buffer (on by default)",
		},
		hand: `plan = train(hf_config("llama-2-7b.json"), batch = 2, seq = 1024, precision = "fp16-mixed", optimizer = adamw(fused = True),
             clip_grad_norm = 1.0, gpu = "H100-80GB", parallel = parallel(dp = 8, zero = 2), offload = offload(optimizer = "cpu"))`,
	}, {
		name:  "the same with optimizer.type Lion: DeepSpeedCPULion on the host, lion()",
		file:  "deepspeed/megatron_zero2_cpu_offload.json",
		step:  deepspeedStep(16, 1024),
		opts:  Options{Model: "llama-2-7b.json", Seq: 1024, GPUs: 8, Overrides: []string{"optimizer.type=Lion"}},
		files: llama2,
		notModelled: []string{
			"activation_checkpointing.partition_activations: DeepSpeed's activation partitioning across model-parallel ranks",
			"zero_optimization.contiguous_gradients: the contiguous gradient buffer (on by default)",
		},
		hand: `plan = train(hf_config("llama-2-7b.json"), batch = 2, seq = 1024, precision = "fp16-mixed", optimizer = lion(),
             clip_grad_norm = 1.0, gpu = "H100-80GB", parallel = parallel(dp = 8, zero = 2), offload = offload(optimizer = "cpu"))`,
	}, {
		name:  "the autotuning ZeRO-3 config with its auto filled in, two nodes, the model checkpointed",
		file:  "deepspeed/autotuning_z3.json",
		step:  deepspeedStep(1*1*16, 4096),
		opts:  Options{Model: "llama-2-7b.json", Seq: 4096, GPUs: 8, Nodes: 2, Overrides: []string{"train_micro_batch_size_per_gpu=1", "bf16.enabled=true", "memsh.checkpoint=full"}},
		files: llama2,
		notModelled: []string{
			"optimizer: absent: the training script builds its own (memsh assumes AdamW; optimizer.type=SGD says otherwise)",
			"zero_optimization.overlap_comm: the overlapped reduction's extra buffers (on by default at stage 3)",
			"zero_optimization.contiguous_gradients: the contiguous gradient buffer (on by default)",
		},
		hand: `plan = train(hf_config("llama-2-7b.json"), batch = 1, seq = 4096, precision = "bf16-mixed", optimizer = adamw(), checkpoint = "full",
             clip_grad_norm = 1.0, gpu = "H100-80GB", parallel = parallel(dp = 16, zero = 3), cluster = cluster(nodes = 2, gpus_per_node = 8))`,
	}, {
		name:  "the ZeRO-Offload tutorial's one-GPU config: stage 2 with overlap_comm, read as parallel(overlap_comm=True)",
		file:  "deepspeed/zero_offload_tutorial.json",
		step:  deepspeedStep(10*1*1, 1024),
		opts:  Options{Model: "llama-2-7b.json", Seq: 1024, GPUs: 1, Overrides: []string{"train_micro_batch_size_per_gpu=10", "fp16.enabled=true"}},
		files: llama2,
		notModelled: []string{
			"optimizer: absent: the training script builds its own (memsh assumes AdamW; optimizer.type=SGD says otherwise)",
			"zero_optimization.contiguous_gradients: the contiguous gradient buffer (on by default)",
		},
		hand: `plan = train(hf_config("llama-2-7b.json"), batch = 10, seq = 1024, precision = "fp16-mixed", optimizer = adamw(),
             clip_grad_norm = 1.0, gpu = "H100-80GB", parallel = parallel(dp = 1, zero = 2, overlap_comm = True), offload = offload(optimizer = "cpu"))`,
	}, {
		name:  "ZeRO-Infinity: config-json.md's offload_param and offload_optimizer on nvme, with DeepSpeed's default swap sizes",
		file:  "deepspeed/zero_infinity_config_json.json",
		step:  deepspeedStep(1*1*8, 512),
		opts:  Options{Model: "llama-2-7b.json", Seq: 512, GPUs: 8},
		files: llama2,
		notModelled: []string{
			"optimizer: absent: the training script builds its own (memsh assumes AdamW; optimizer.type=SGD says otherwise)",
			"zero_optimization.overlap_comm: the overlapped reduction's extra buffers (on by default at stage 3)",
			"zero_optimization.contiguous_gradients: the contiguous gradient buffer (on by default)",
		},
		hand: `plan = train(hf_config("llama-2-7b.json"), batch = 1, seq = 512, precision = "bf16-mixed", optimizer = adamw(),
             clip_grad_norm = 1.0, gpu = "H100-80GB", parallel = parallel(dp = 8, zero = 3), offload = offload(optimizer = "nvme", params = "nvme"))`,
	}, {
		// OpenRLHF's get_train_ds_config(offload=True, adam_offload=False,
		// stage=3) (OpenRLHF/OpenRLHF openrlhf/utils/deepspeed/deepspeed_utils.py
		// at ac2f0a28; importers/testdata/README.md says what was kept; its
		// "auto" sizes and ZeRO++ switches, off at its default zpg=1, left
		// out; the batch keys its strategy adds set):
		// offload_param on the CPU, offload_optimizer none. DeepSpeed then
		// keeps the fp32 partitions and the optimizer on the GPU (stage3.py
		// _create_fp32_partitions at edaa722), which offload(params="cpu")
		// alone means at zero=3 (sim's TestZeROParamOffloadOnly).
		name:  "OpenRLHF's ZeRO-3 with offload_param only: offload(params=\"cpu\") without optimizer=",
		file:  "deepspeed/openrlhf_param_offload.json",
		step:  deepspeedStep(128, 2048),
		opts:  Options{Model: "llama-2-7b.json", Seq: 2048, GPUs: 8},
		files: llama2,
		notModelled: []string{
			"optimizer: absent: the training script builds its own (memsh assumes AdamW; optimizer.type=SGD says otherwise)",
			"zero_optimization.reduce_scatter: ZeRO's all-gather bucket, reuse distance and sub-groups (memsh replays reduce_bucket_size, the stage-3 prefetch bucket, persistence threshold and live parameters, not these)",
			"zero_optimization.overlap_comm: the overlapped reduction's extra buffers (on by default at stage 3)",
			"zero_optimization.contiguous_gradients: the contiguous gradient buffer (on by default)",
		},
		hand: `plan = train(hf_config("llama-2-7b.json"), batch = 4, seq = 2048, grad_accum = 4, precision = "bf16-mixed", optimizer = adamw(),
             gpu = "H100-80GB", parallel = parallel(dp = 8, zero = 3), offload = offload(params = "cpu"), clip_grad_norm = 1.0)`,
	}, {
		name: "the same at stage 2 without offload_param: nvme is the host there; a buffer_count other than DeepSpeed's is not modelled",
		file: "deepspeed/zero_infinity_config_json.json",
		step: deepspeedStep(1*1*8, 512),
		opts: Options{Model: "llama-2-7b.json", Seq: 512, GPUs: 8, Overrides: []string{"zero_optimization.stage=2",
			"zero_optimization.offload_param.device=none", "zero_optimization.offload_optimizer.buffer_count=8"}},
		files: llama2,
		notModelled: []string{
			"optimizer: absent: the training script builds its own (memsh assumes AdamW; optimizer.type=SGD says otherwise)",
			`zero_optimization.offload_optimizer.device: nvme at stage 2, where DeepSpeed keeps the optimizer state in host memory (read as offload(optimizer="cpu"))`,
			"zero_optimization.offload_optimizer.buffer_count: ZeRO-Infinity's swap buffers and pipelining (memsh replays DeepSpeed's default, 4)",
			"zero_optimization.contiguous_gradients: the contiguous gradient buffer (on by default)",
		},
		hand: `plan = train(hf_config("llama-2-7b.json"), batch = 1, seq = 512, precision = "bf16-mixed", optimizer = adamw(),
             clip_grad_norm = 1.0, gpu = "H100-80GB", parallel = parallel(dp = 8, zero = 2), offload = offload(optimizer = "cpu"))`,
	}, {
		// DeepSpeedExamples' bf16_master_weight baseline (4 x H100,
		// ZeRO-3): torch_autocast off reads as nothing.
		name:  "bf16_master_weight's baseline: bf16, fp32 master and moments",
		file:  "deepspeed/bf16_master_weight_baseline.json",
		step:  deepspeedStep(4*4, 512),
		opts:  Options{Model: "llama-2-7b.json", Seq: 512, GPUs: 4},
		files: llama2,
		notModelled: []string{
			"zero_optimization.overlap_comm: the overlapped reduction's extra buffers (on by default at stage 3)",
			"zero_optimization.contiguous_gradients: the contiguous gradient buffer (on by default)",
		},
		hand: `plan = train(hf_config("llama-2-7b.json"), batch = 4, seq = 512, precision = "bf16-mixed", optimizer = adamw(fused = True),
             clip_grad_norm = 1.0, gpu = "H100-80GB", parallel = parallel(dp = 4, zero = 3, reduce_bucket_size = 50000000, stage3_param_persistence_threshold = 0))`,
	}, {
		// bf16_master_weights_and_grads and bf16_optimizer_states: the
		// master partition and the moments in bf16 (sim's
		// TestCalibDeepSpeedBF16Master has the run's figures).
		name:  "bf16_master_weight's bf16_full: master, gradients and moments in bf16",
		file:  "deepspeed/bf16_master_weight_bf16_full.json",
		step:  deepspeedStep(4*4, 512),
		opts:  Options{Model: "llama-2-7b.json", Seq: 512, GPUs: 4},
		files: llama2,
		notModelled: []string{
			"torch_autocast: torch.autocast over the model (DeepSpeed's engine.forward): its fp32 ops (layer_norm, softmax, the loss) are replayed in the model's dtype",
			"zero_optimization.overlap_comm: the overlapped reduction's extra buffers (on by default at stage 3)",
			"zero_optimization.contiguous_gradients: the contiguous gradient buffer (on by default)",
		},
		hand: `plan = train(hf_config("llama-2-7b.json"), batch = 4, seq = 512, precision = precision("bf16-mixed", master = "bf16", optimizer_states = "bf16"),
             optimizer = adamw(fused = True), clip_grad_norm = 1.0, gpu = "H100-80GB",
             parallel = parallel(dp = 4, zero = 3, reduce_bucket_size = 50000000, stage3_param_persistence_threshold = 0))`,
	}, {
		// data_types as OpenRLHF's get_train_ds_config writes them in bf16
		// mode: fp32 gradient accumulation as precision(grads=), the
		// dtypes that say nothing new read.
		name:  "data_types: grad_accum_dtype fp32 beside a bf16 model is precision(grads=\"fp32\")",
		file:  "deepspeed/bf16_master_weight_baseline.json",
		step:  deepspeedStep(4*4, 512),
		opts:  Options{Model: "llama-2-7b.json", Seq: 512, GPUs: 4, Overrides: []string{"data_types.grad_accum_dtype=fp32", "data_types.param_dtype=torch.bfloat16", "data_types.buffer_dtype=fp32"}},
		files: llama2,
		notModelled: []string{
			"zero_optimization.overlap_comm: the overlapped reduction's extra buffers (on by default at stage 3)",
			"zero_optimization.contiguous_gradients: the contiguous gradient buffer (on by default)",
		},
		hand: `plan = train(hf_config("llama-2-7b.json"), batch = 4, seq = 512, precision = precision(params = "bf16", grads = "fp32", master = "fp32"),
             optimizer = adamw(fused = True), gpu = "H100-80GB",
             parallel = parallel(dp = 4, zero = 3, reduce_bucket_size = 50000000, stage3_param_persistence_threshold = 0), clip_grad_norm = 1.0)`,
	}, {
		// with bf16_master_weights_and_grads: the master stays bf16, the
		// moments DeepSpeed's fp32 on the host
		name: "data_types: grad_accum_dtype fp32 beside a bf16 master offloaded",
		file: "deepspeed/bf16_master_weight_bf16_full.json",
		step: deepspeedStep(4*4, 512),
		opts: Options{Model: "llama-2-7b.json", Seq: 512, GPUs: 4, Overrides: []string{"data_types.grad_accum_dtype=fp32", "bf16.bf16_optimizer_states=false",
			"torch_autocast.enabled=false", "zero_optimization.offload_optimizer.device=cpu"}},
		files: llama2,
		notModelled: []string{
			"zero_optimization.overlap_comm: the overlapped reduction's extra buffers (on by default at stage 3)",
			"zero_optimization.contiguous_gradients: the contiguous gradient buffer (on by default)",
		},
		hand: `plan = train(hf_config("llama-2-7b.json"), batch = 4, seq = 512, precision = precision(params = "bf16", grads = "fp32", master = "bf16", optimizer_states = "fp32"),
             optimizer = adamw(fused = True), clip_grad_norm = 1.0, gpu = "H100-80GB", offload = offload(optimizer = "cpu"),
             parallel = parallel(dp = 4, zero = 3, reduce_bucket_size = 50000000, stage3_param_persistence_threshold = 0))`,
	}, {
		// stage 2 with offload_optimizer reads no grad_accum_dtype
		name:  "data_types: grad_accum_dtype at stage 2 offloaded changes nothing",
		file:  "deepspeed/bf16_master_weight_baseline.json",
		step:  deepspeedStep(4*4, 512),
		opts:  Options{Model: "llama-2-7b.json", Seq: 512, GPUs: 4, Overrides: []string{"data_types.grad_accum_dtype=fp32", "zero_optimization.stage=2", "zero_optimization.offload_optimizer.device=cpu"}},
		files: llama2,
		notModelled: []string{
			"zero_optimization.contiguous_gradients: the contiguous gradient buffer (on by default)",
		},
		hand: `plan = train(hf_config("llama-2-7b.json"), batch = 4, seq = 512, precision = "bf16-mixed", optimizer = adamw(fused = True),
             clip_grad_norm = 1.0, gpu = "H100-80GB", offload = offload(optimizer = "cpu"), parallel = parallel(dp = 4, zero = 2, overlap_comm = True, reduce_bucket_size = 50000000))`,
	}, {
		// stage 1 with bf16_master_weights_and_grads: BF16_Optimizer keeps
		// an fp32 master whatever the key, which memsh does not write
		name:  "data_types: grad_accum_dtype fp32 at stage 1 beside a bf16 master is listed",
		file:  "deepspeed/bf16_master_weight_bf16_full.json",
		step:  deepspeedStep(4*4, 512),
		opts:  Options{Model: "llama-2-7b.json", Seq: 512, GPUs: 4, Overrides: []string{"data_types.grad_accum_dtype=fp32", "zero_optimization.stage=1", "torch_autocast.enabled=false"}},
		files: llama2,
		notModelled: []string{
			"data_types.grad_accum_dtype: gradients accumulated in fp32 beside the bf16 model and its 16-bit master (stage 1's BF16_Optimizer, whose master partition is fp32 whatever the bf16 section says), replayed in the model's dtype",
		},
		hand: `plan = train(hf_config("llama-2-7b.json"), batch = 4, seq = 512, precision = precision("bf16-mixed", master = "bf16", optimizer_states = "bf16"),
             optimizer = adamw(fused = True), clip_grad_norm = 1.0, gpu = "H100-80GB", parallel = parallel(dp = 4, zero = 1, overlap_comm = True, reduce_bucket_size = 50000000))`,
	}, {
		// stage 1 with a bf16 model: BF16_Optimizer
		name:  "data_types: grad_accum_dtype fp32 at stage 1 is BF16_Optimizer's",
		file:  "deepspeed/bf16_master_weight_baseline.json",
		step:  deepspeedStep(4*4, 512),
		opts:  Options{Model: "llama-2-7b.json", Seq: 512, GPUs: 4, Overrides: []string{"data_types.grad_accum_dtype=fp32", "zero_optimization.stage=1"}},
		files: llama2,
		hand: `plan = train(hf_config("llama-2-7b.json"), batch = 4, seq = 512, precision = precision(params = "bf16", grads = "fp32", master = "fp32"),
             optimizer = adamw(fused = True), clip_grad_norm = 1.0, gpu = "H100-80GB", parallel = parallel(dp = 4, zero = 1, overlap_comm = True, reduce_bucket_size = 50000000))`,
	}, {
		name:  "bf16 master weights with their moments offloaded: fp32 moments on the host",
		file:  "deepspeed/bf16_master_weight_bf16_full.json",
		step:  deepspeedStep(4*4, 512),
		opts:  Options{Model: "llama-2-7b.json", Seq: 512, GPUs: 4, Overrides: []string{"bf16.bf16_optimizer_states=false", "torch_autocast.enabled=false", "zero_optimization.offload_optimizer.device=cpu"}},
		files: llama2,
		notModelled: []string{
			"zero_optimization.overlap_comm: the overlapped reduction's extra buffers (on by default at stage 3)",
			"zero_optimization.contiguous_gradients: the contiguous gradient buffer (on by default)",
		},
		hand: `plan = train(hf_config("llama-2-7b.json"), batch = 4, seq = 512, precision = precision("bf16-mixed", master = "bf16"),
             optimizer = adamw(fused = True), clip_grad_norm = 1.0, gpu = "H100-80GB", offload = offload(optimizer = "cpu"),
             parallel = parallel(dp = 4, zero = 3, reduce_bucket_size = 50000000, stage3_param_persistence_threshold = 0))`,
	}})
}

func TestDeepSpeedErrors(t *testing.T) {
	m := Options{Model: "m.json", Seq: 512, GPUs: 8}
	runErrorCases(t, []errorCase{
		{name: "auto, which only the HF Trainer fills", file: "ds.json", config: `{"train_micro_batch_size_per_gpu": "auto"}`, opts: m,
			want: "ds.json:1: key train_micro_batch_size_per_gpu: is auto", wantHint: "Hugging Face Trainer"},
		{name: "auto precision, which only the HF Trainer fills", file: "ds.json", config: "{\"train_micro_batch_size_per_gpu\": 2,\n \"fp16\": {\"enabled\": \"auto\"}}", opts: m,
			want: "ds.json:2: key fp16.enabled: is auto", wantHint: "fp16.enabled=true"},
		{name: "no model", file: "ds.json", config: `{"train_batch_size": 8}`, opts: Options{Seq: 512},
			want: "ds.json: a DeepSpeed config holds no model", wantHint: "--model"},
		{name: "no sequence", file: "ds.json", config: `{"train_batch_size": 8}`, opts: Options{Model: "m.json"},
			want: "ds.json: a DeepSpeed config holds no sequence length", wantHint: "--seq"},
		{name: "a batch triple that does not add up", file: "ds.json", config: `{"train_batch_size": 64, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 4}`, opts: m,
			want: "ds.json:1: key train_batch_size: 64 is not 4 x 4 x 8 GPUs", wantHint: "train_batch_size = micro batch"},
		{name: "a global batch the GPUs do not divide", file: "ds.json", config: `{"train_batch_size": 12}`, opts: m,
			want: "ds.json:1: key train_batch_size: 12 does not divide by 1 steps x 8 GPUs", wantHint: "multiple"},
		{name: "no batch at all", file: "ds.json", config: `{"zero_optimization": {"stage": 2}}`, opts: m,
			want: "ds.json: key train_micro_batch_size_per_gpu: missing: DeepSpeed needs train_batch_size or train_micro_batch_size_per_gpu", wantHint: "=4"},
		{name: "fp16 and bf16", file: "ds.json", config: `{"train_batch_size": 8, "fp16": {"enabled": true}, "bf16": {"enabled": true}}`, opts: m,
			want: "ds.json:1: key bf16.enabled: and fp16.enabled are both true", wantHint: "keep one"},
		{name: "parameters offloaded below stage 3", file: "ds.json", config: `{"train_batch_size": 8, "zero_optimization": {"stage": 2, "offload_param": {"device": "cpu"}}}`, opts: m,
			want: "ds.json:1: key zero_optimization.stage: stage 2 cannot offload parameters", wantHint: "stage 3"},
		{name: "a stage that does not exist", file: "ds.json", config: `{"train_batch_size": 8, "zero_optimization": {"stage": 4}}`, opts: m,
			want: "ds.json:1: key zero_optimization.stage: 4 is out of range (want 0 to 3)"},
		{name: "an optimizer memsh does not model", file: "ds.json", config: `{"train_batch_size": 8, "optimizer": {"type": "OneBitLamb"}}`, opts: m,
			want: "ds.json:1: key optimizer.type: optimizer OneBitLamb is not modelled", wantHint: "AdamW"},
		{name: "bf16 moments without a bf16 master", file: "ds.json", config: `{"train_batch_size": 8, "bf16": {"enabled": true, "bf16_optimizer_states": true}, "zero_optimization": {"stage": 2}}`, opts: m,
			want: "ds.json:1: key bf16.bf16_optimizer_states: needs bf16 master weights: DeepSpeed asserts bf16_optimizer_states requires bf16_master_weights_and_grads", wantHint: "bf16_master_weights_and_grads=true"},
		{name: "a bf16 master at stage 0", file: "ds.json", config: `{"train_batch_size": 8, "bf16": {"enabled": true, "bf16_master_weights_and_grads": true}}`, opts: m,
			want: "ds.json:1: key bf16.bf16_master_weights_and_grads: needs a ZeRO optimizer: DeepSpeed asserts it at stage 0", wantHint: "stage 1, 2 or 3"},
		{name: "a bf16 master of an fp16 model", file: "ds.json", config: `{"train_batch_size": 8, "fp16": {"enabled": true}, "bf16": {"bf16_master_weights_and_grads": true}, "zero_optimization": {"stage": 3}}`, opts: m,
			want: "ds.json:1: key bf16.bf16_master_weights_and_grads: is set without bf16 training (the master copy follows the model's 16-bit dtype)", wantHint: "bf16.enabled=true"},
		{name: "a param_dtype other than the mode's", file: "ds.json", config: `{"train_batch_size": 8, "bf16": {"enabled": true}, "data_types": {"param_dtype": "fp32"}}`, opts: m,
			want: "ds.json:1: key data_types.param_dtype: fp32 conflicts with the model's bf16: DeepSpeed asserts they match", wantHint: "the enabled mode's dtype (bf16)"},
		{name: "a dtype DeepSpeed does not know", file: "ds.json", config: `{"train_batch_size": 8, "data_types": {"grad_accum_dtype": "fp8"}}`, opts: m,
			want: "ds.json:1: key data_types.grad_accum_dtype: unknown dtype fp8", wantHint: "DtypeEnum"},
		{name: "grad_accum_dtype without ZeRO", file: "ds.json", config: `{"train_batch_size": 8, "bf16": {"enabled": true}, "data_types": {"grad_accum_dtype": "fp32"}}`, opts: m,
			want: "ds.json:1: key data_types.grad_accum_dtype: fp32 beside the bf16 model without ZeRO: DeepSpeed raises NotImplementedError (unsupported mix of model_dtype and grad_accum_dtype)", wantHint: "zero_optimization.stage 1, 2 or 3"},
		{name: "malformed JSON", file: "ds.json", config: `{"train_batch_size": }`, opts: m,
			want: "ds.json: not a valid JSON object: invalid character '}' looking for beginning of value"},
	})
}
