package importers

import (
	"os"
	"path/filepath"
	"testing"
)

// accelerateFiles reads the accelerate configs of testdata/accelerate,
// as memsh check reads a file a config names.
func accelerateFiles(name string) ([]byte, error) {
	return os.ReadFile(filepath.Join("testdata", "accelerate", name))
}

// TestHFAccelerate imports alignment-handbook's Zephyr full fine-tune
// launched with real accelerate configs (testdata/README.md names their
// commits), each plan written by hand from what accelerate 1.16 and
// transformers 5.25.0 make of the pair: the GPUs from num_processes, the
// autocast from mixed_precision where the Trainer sets neither bf16 nor
// fp16, FSDP from the launcher's variables where the Trainer's fsdp is
// unset, and the Trainer's plugin fields where it is set.
func TestHFAccelerate(t *testing.T) {
	const sizes = "ZeRO's all-gather bucket, reuse distance and sub-groups (memsh replays reduce_bucket_size, the stage-3 prefetch bucket, persistence threshold and live parameters, not these)"
	runImportCases(t, []importCase{{
		name: "alignment-handbook's fsdp.yaml: FSDP1 (the launcher's default version), FULL_SHARD, BACKWARD_PRE, forward prefetch on 8 GPUs",
		file: "hf/zephyr_sft_full.yaml",
		step: hfStep(16, 1, 8, 2048),
		opts: Options{Overrides: []string{"accelerate_config=handbook_fsdp.yaml"}, ReadFile: accelerateFiles},
		hand: `load("@stdlib//llm.star", "mistral")
plan = train(mistral("7b", attn = "flash"), batch = 16, seq = 2048, precision = "bf16", optimizer = adamw(fused = True), checkpoint = "full",
             clip_grad_norm = 1.0, gpu = "H100-80GB", parallel = parallel(dp = 8, fsdp = 1, fsdp_sync_module_states = True, fsdp_backward_prefetch = "pre",
             fsdp_forward_prefetch = True))`,
	}, {
		name: "alignment-handbook's multi_gpu.yaml: DDP over 16 GPUs on one machine",
		file: "hf/zephyr_sft_full.yaml",
		step: hfStep(16, 1, 16, 2048),
		opts: Options{Overrides: []string{"accelerate_config=handbook_multi_gpu.yaml"}, ReadFile: accelerateFiles},
		hand: `load("@stdlib//llm.star", "mistral")
plan = train(mistral("7b", attn = "flash"), batch = 16, seq = 2048, precision = "bf16", optimizer = adamw(fused = True), checkpoint = "full",
             clip_grad_norm = 1.0, gpu = "H100-80GB", parallel = parallel(dp = 16))`,
	}, {
		name: "the same over fp32 weights without the Trainer's bf16: the config's mixed_precision bf16 autocasts",
		file: "hf/zephyr_sft_full.yaml",
		step: hfStep(16, 1, 16, 2048),
		opts: Options{Overrides: []string{"accelerate_config=handbook_multi_gpu.yaml", "bf16=false", "torch_dtype=float32"}, ReadFile: accelerateFiles},
		hand: `load("@stdlib//llm.star", "mistral")
plan = train(mistral("7b", attn = "flash"), batch = 16, seq = 2048, precision = "bf16-mixed", optimizer = adamw(fused = True), checkpoint = "full",
             clip_grad_norm = 1.0, gpu = "H100-80GB", parallel = parallel(dp = 16))`,
	}, {
		name: "LLaMA-Factory's fsdp_config.yaml: FSDP1 with CPU offload in fp16 on 2 GPUs",
		file: "hf/zephyr_sft_full.yaml",
		step: hfStep(16, 1, 2, 2048),
		opts: Options{Overrides: []string{"accelerate_config=llamafactory_fsdp_offload.yaml", "bf16=false", "torch_dtype=float32"}, ReadFile: accelerateFiles},
		hand: `load("@stdlib//llm.star", "mistral")
plan = train(mistral("7b", attn = "flash"), batch = 16, seq = 2048, precision = "fp16-mixed", optimizer = adamw(fused = True), checkpoint = "full",
             clip_grad_norm = 1.0, gpu = "H100-80GB", parallel = parallel(dp = 2, fsdp = 1, fsdp_sync_module_states = True, fsdp_backward_prefetch = "pre"),
             offload = offload(params = "cpu"))`,
	}, {
		name: "the same with the Trainer's bf16: the Trainer's wins over the config's fp16",
		file: "hf/zephyr_sft_full.yaml",
		step: hfStep(16, 1, 2, 2048),
		opts: Options{Overrides: []string{"accelerate_config=llamafactory_fsdp_offload.yaml"}, ReadFile: accelerateFiles},
		hand: `load("@stdlib//llm.star", "mistral")
plan = train(mistral("7b", attn = "flash"), batch = 16, seq = 2048, precision = "bf16", optimizer = adamw(fused = True), checkpoint = "full",
             clip_grad_norm = 1.0, gpu = "H100-80GB", parallel = parallel(dp = 2, fsdp = 1, fsdp_sync_module_states = True, fsdp_backward_prefetch = "pre"),
             offload = offload(params = "cpu"))`,
	}, {
		name:        "the Trainer's own fsdp under fsdp.yaml: its plugin's FSDP2 (transformers 5.10 and later), the config's FSDP1 fields unread",
		file:        "hf/zephyr_sft_full.yaml",
		step:        hfStep(16, 1, 8, 2048),
		opts:        Options{Overrides: []string{"accelerate_config=handbook_fsdp.yaml", "fsdp=full_shard auto_wrap"}, ReadFile: accelerateFiles},
		notModelled: []string{hfFSDPVersionUnset},
		hand: `load("@stdlib//llm.star", "mistral")
plan = train(mistral("7b", attn = "flash"), batch = 16, seq = 2048, precision = "bf16", optimizer = adamw(fused = True), checkpoint = "full",
             clip_grad_norm = 1.0, gpu = "H100-80GB", parallel = parallel(dp = 8, fsdp = 2))`,
	}, {
		name: "the Trainer's FSDP1 shard_grad_op under fsdp.yaml: the launcher's FSDP_SHARDING_STRATEGY FULL_SHARD wins",
		file: "hf/zephyr_sft_full.yaml",
		step: hfStep(16, 1, 8, 2048),
		opts: Options{Overrides: []string{"accelerate_config=handbook_fsdp.yaml", "fsdp=shard_grad_op auto_wrap", "fsdp_config.version=1"}, ReadFile: accelerateFiles},
		hand: `load("@stdlib//llm.star", "mistral")
plan = train(mistral("7b", attn = "flash"), batch = 16, seq = 2048, precision = "bf16", optimizer = adamw(fused = True), checkpoint = "full",
             clip_grad_norm = 1.0, gpu = "H100-80GB", parallel = parallel(dp = 8, fsdp = 1, fsdp_sync_module_states = True, fsdp_backward_prefetch = "none"))`,
	}, {
		name: "alignment-handbook's deepspeed_zero3.yaml with launch's --num_processes 8: ZeRO-3, optimizer and parameters on the CPU, bf16",
		file: "hf/zephyr_sft_full.yaml",
		step: hfStep(16, 1, 8, 2048),
		opts: Options{Overrides: []string{"accelerate_config=handbook_deepspeed_zero3.yaml", "accelerate_config.num_processes=8"}, ReadFile: accelerateFiles},
		notModelled: []string{
			"deepspeed.zero_optimization.overlap_comm: the overlapped reduction's extra buffers (on by default at stage 3)",
			"deepspeed.zero_optimization.contiguous_gradients: the contiguous gradient buffer (on by default)",
		},
		hand: `load("@stdlib//llm.star", "mistral")
plan = train(mistral("7b", attn = "flash"), batch = 16, seq = 2048, precision = "bf16-mixed", optimizer = adamw(fused = True), checkpoint = "full",
             clip_grad_norm = 1.0, gpu = "H100-80GB", parallel = parallel(dp = 8, zero = 3), offload = offload(optimizer = "cpu", params = "cpu"))`,
	}, {
		name: "the same without zero_stage and the offloads: the plugin's ZeRO-2",
		file: "hf/zephyr_sft_full.yaml",
		step: hfStep(16, 1, 8, 2048),
		opts: Options{GPUs: 8, Overrides: []string{"accelerate_config=handbook_deepspeed_zero3.yaml", "accelerate_config.num_processes=8",
			"accelerate_config.deepspeed_config.zero_stage=null", "accelerate_config.deepspeed_config.offload_optimizer_device=null",
			"accelerate_config.deepspeed_config.offload_param_device=null"}, ReadFile: accelerateFiles},
		notModelled: []string{"deepspeed.zero_optimization.contiguous_gradients: the contiguous gradient buffer (on by default)"},
		hand: `load("@stdlib//llm.star", "mistral")
plan = train(mistral("7b", attn = "flash"), batch = 16, seq = 2048, precision = "bf16-mixed", optimizer = adamw(fused = True), checkpoint = "full",
             clip_grad_norm = 1.0, gpu = "H100-80GB", parallel = parallel(dp = 8, zero = 2))`,
	}, {
		name:    "LLaMA-Factory's ds_multi_nodes.yaml: its deepspeed_config_file (ZeRO-3 offload, auto sizes), 16 processes",
		file:    "hf/zephyr_sft_full.yaml",
		step:    hfStep(16, 1, 16, 2048),
		opts:    Options{Overrides: []string{"accelerate_config=llamafactory_ds_multi_nodes.yaml"}, ReadFile: accelerateFiles},
		unknown: []string{"deepspeed.comms_config.verbose", "deepspeed.monitor_config.csv_monitor.enabled", "deepspeed.monitor_config.enabled", "deepspeed.monitor_config.tag"},
		notModelled: []string{
			"deepspeed.zero_optimization.stage3_max_reuse_distance: " + sizes,
			"deepspeed.zero_optimization.sub_group_size: " + sizes,
			"deepspeed.zero_optimization.contiguous_gradients: the contiguous gradient buffer (on by default)",
		},
		hand: `load("@stdlib//llm.star", "mistral")
plan = train(mistral("7b", attn = "flash"), batch = 16, seq = 2048, precision = "bf16-mixed", optimizer = adamw(fused = True), checkpoint = "full",
             clip_grad_norm = 1.0, gpu = "H100-80GB", parallel = parallel(dp = 16, zero = 3, reduce_bucket_size = "auto",
             stage3_prefetch_bucket_size = "auto", stage3_param_persistence_threshold = "auto", stage3_max_live_parameters = 1000000000), offload = offload(optimizer = "cpu", params = "cpu"))`,
	}, {
		name: "the Trainer's DeepSpeed config without a bf16 section, the Trainer's bf16 false, launched with multi_gpu.yaml's bf16: DeepSpeed in bf16",
		file: "hf/zephyr_sft_full.yaml",
		step: hfStep(16, 1, 16, 2048),
		opts: Options{Overrides: []string{"accelerate_config=handbook_multi_gpu.yaml", "bf16=false", "deepspeed=autotuning_z3.json"},
			ReadFile: func(name string) ([]byte, error) {
				if data, err := accelerateFiles(name); err == nil {
					return data, nil
				}
				return os.ReadFile(filepath.Join("testdata", "deepspeed", name))
			}},
		notModelled: []string{
			"deepspeed.zero_optimization.overlap_comm: the overlapped reduction's extra buffers (on by default at stage 3)",
			"deepspeed.zero_optimization.contiguous_gradients: the contiguous gradient buffer (on by default)",
		},
		hand: `load("@stdlib//llm.star", "mistral")
plan = train(mistral("7b", attn = "flash"), batch = 16, seq = 2048, precision = "bf16-mixed", optimizer = adamw(fused = True), checkpoint = "full",
             clip_grad_norm = 1.0, gpu = "H100-80GB", parallel = parallel(dp = 16, zero = 3))`,
	}})
}

// TestHFAccelerateErrors: an accelerate config memsh cannot replay, or
// one accelerate or the Trainer refuses, is an error naming its key.
func TestHFAccelerateErrors(t *testing.T) {
	const args = `{"per_device_train_batch_size": 4, "bf16": true, "gradient_checkpointing": true, "model_name_or_path": "mistralai/Mistral-7B-v0.1", "max_length": 512`
	files := map[string]string{
		"ds.yaml":       "distributed_type: DEEPSPEED\nnum_processes: 8\nmixed_precision: bf16\ndeepspeed_config:\n  zero_stage: 3\n  gradient_clipping: 0.5\n",
		"dsfile.yaml":   "distributed_type: DEEPSPEED\nnum_processes: 8\ndeepspeed_config:\n  deepspeed_config_file: ds.json\n  zero_stage: 3\n",
		"dsfp16.yaml":   "distributed_type: DEEPSPEED\nnum_processes: 8\ndeepspeed_config:\n  deepspeed_config_file: fp16.json\n",
		"dsnozero.yaml": "distributed_type: DEEPSPEED\nnum_processes: 8\ndeepspeed_config:\n  deepspeed_config_file: nozero.json\n",
		"fp16.json":     `{"fp16": {"enabled": true}, "zero_optimization": {"stage": 2}}`,
		"nozero.json":   `{"bf16": {"enabled": "auto"}}`,
		"odd.yaml":      "distributed_type: MULTI_GPU\nnum_machines: 2\nnum_processes: 9\n",
		"hybrid.yaml":   "distributed_type: FSDP\nnum_processes: 8\nfsdp_config:\n  fsdp_sharding_strategy: HYBRID_SHARD\n",
		"ram.yaml":      "distributed_type: FSDP\nnum_processes: 8\nfsdp_config:\n  fsdp_sync_module_states: false\n",
		"fp8.yaml":      "distributed_type: MULTI_GPU\nnum_processes: 8\nmixed_precision: fp8\n",
		"fp16.yaml":     "distributed_type: MULTI_GPU\nnum_processes: 8\nmixed_precision: fp16\n",
		"tpu.yaml":      "distributed_type: XLA\n",
		"ckpt.yaml":     "distributed_type: FSDP\nnum_processes: 8\nfsdp_config:\n  fsdp_activation_checkpointing: true\n",
		"multi_gpu.yml": "distributed_type: MULTI_GPU\nnum_processes: 8\n",
	}
	read := func(name string) ([]byte, error) {
		if s, ok := files[name]; ok {
			return []byte(s), nil
		}
		return nil, os.ErrNotExist
	}
	o := Options{ReadFile: read}
	runErrorCases(t, []errorCase{
		{name: "DeepSpeed's gradient_clipping at odds with max_grad_norm", file: "args.json", config: args + `}`, opts: o, overrides: []string{"accelerate_config=ds.yaml"},
			want: "ds.yaml:6: key deepspeed_config.gradient_clipping: 0.5, and the Trainer's max_grad_norm 1", wantHint: "the Trainer refuses the mismatch"},
		{name: "DeepSpeed in bf16 from the accelerate config, the Trainer's bf16 false", file: "args.json", config: args + `}`, opts: o,
			overrides: []string{"accelerate_config=ds.yaml", "bf16=false", "max_grad_norm=0.5"},
			want:      "command line: key accelerate_config: its bf16.enabled is true, the Trainer's bf16 false", wantHint: "the Trainer refuses the mismatch"},
		{name: "a DeepSpeed config file beside zero_stage", file: "args.json", config: args + `}`, opts: o, overrides: []string{"accelerate_config=dsfile.yaml"},
			want: "dsfile.yaml:4: key deepspeed_config.deepspeed_config_file: set with zero_stage: accelerate refuses them beside a DeepSpeed config file", wantHint: "say them in the DeepSpeed config file"},
		{name: "the Trainer's bf16 over a DeepSpeed config enabling fp16", file: "args.json", config: args + `}`, opts: o, overrides: []string{"accelerate_config=dsfp16.yaml"},
			want: "args.json:1: key bf16: bf16, and the DeepSpeed config enables fp16: accelerate refuses it (set_mixed_precision)", wantHint: "auto in the DeepSpeed config"},
		{name: "a DeepSpeed config file without zero_optimization", file: "args.json", config: args + `}`, opts: o, overrides: []string{"accelerate_config=dsnozero.yaml"},
			want: "dsnozero.yaml:4: key deepspeed_config.deepspeed_config_file: nozero.json has no zero_optimization: accelerate's DeepSpeedPlugin refuses it", wantHint: "zero_optimization section"},
		{name: "DEEPSPEED with the Trainer's fsdp", file: "args.json", config: args + `, "fsdp": "full_shard"}`, opts: o, overrides: []string{"accelerate_config=ds.yaml"},
			want: "ds.yaml:1: key distributed_type: DEEPSPEED, and the Trainer's fsdp is set", wantHint: "drop the Trainer's fsdp"},
		{name: "processes that do not divide over the machines", file: "args.json", config: args + `}`, opts: o, overrides: []string{"accelerate_config=odd.yaml"},
			want: "odd.yaml:3: key num_processes: 9 processes do not divide over 2 machines", wantHint: "a multiple of num_machines"},
		{name: "--gpus at odds with num_processes", file: "args.json", config: args + `}`, opts: Options{ReadFile: read, GPUs: 4}, overrides: []string{"accelerate_config=multi_gpu.yml"},
			want: "multi_gpu.yml:2: key num_processes: 8 over num_machines 1 (8 GPUs a machine) disagrees with --gpus 4 --nodes 1", wantHint: "leave --gpus and --nodes out"},
		{name: "a sharding strategy memsh does not replay", file: "args.json", config: args + `}`, opts: o, overrides: []string{"accelerate_config=hybrid.yaml"},
			want: "hybrid.yaml:4: key fsdp_config.fsdp_sharding_strategy: sharding strategy HYBRID_SHARD is not modelled", wantHint: "FULL_SHARD or SHARD_GRAD_OP"},
		{name: "cpu_ram_efficient_loading (true unless set) without sync_module_states", file: "args.json", config: args + `}`, opts: o, overrides: []string{"accelerate_config=ram.yaml"},
			want: "ram.yaml:4: key fsdp_config.fsdp_sync_module_states: false with cpu_ram_efficient_loading: accelerate launch refuses it", wantHint: "cpu_ram_efficient_loading false"},
		{name: "fp8 mixed precision", file: "args.json", config: args + `}`, opts: o, overrides: []string{"accelerate_config=fp8.yaml"},
			want: "fp8.yaml:3: key mixed_precision: accelerate's fp8 mixed precision is not modelled", wantHint: "bf16, fp16 or no"},
		{name: "fp16 autocast from the config over bf16 weights", file: "args.json", config: args + `, "torch_dtype": "bfloat16"}`, opts: o,
			overrides: []string{"accelerate_config=fp16.yaml", "bf16=false"},
			want:      "args.json: key accelerate_config.mixed_precision: with torch_dtype bfloat16", wantHint: "use bf16: true"},
		{name: "a distributed type memsh does not replay", file: "args.json", config: args + `}`, opts: o, overrides: []string{"accelerate_config=tpu.yaml"},
			want: "tpu.yaml:1: key distributed_type: XLA is not modelled", wantHint: "NO, MULTI_GPU, FSDP and DEEPSPEED"},
		{name: "FSDP's activation checkpointing with the Trainer's", file: "args.json", config: args + `}`, opts: o, overrides: []string{"accelerate_config=ckpt.yaml"},
			want: "ckpt.yaml:4: key fsdp_config.fsdp_activation_checkpointing: true with the Trainer's gradient_checkpointing: the Trainer refuses both", wantHint: "drop the Trainer's gradient_checkpointing"},
		{name: "a config that is not there", file: "args.json", config: args + `}`, opts: o, overrides: []string{"accelerate_config=missing.yaml"},
			want: "command line: key accelerate_config: cannot read the accelerate config: file does not exist", wantHint: "the config's folder"},
		{name: "no file can be read", file: "args.json", config: args + `, "accelerate_config": "fsdp.yaml"}`,
			want: "args.json:1: key accelerate_config: no file can be read here", wantHint: "memsh check"},
		{name: "not a path", file: "args.json", config: args + `, "accelerate_config": 3}`, opts: o,
			want: "args.json:1: key accelerate_config: want a path, got 3", wantHint: "accelerate_config=fsdp.yaml"},
	})
}
