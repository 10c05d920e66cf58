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
	const forward = "accelerate_config.fsdp_config.fsdp_forward_prefetch: FSDP1's forward prefetch: the next unit's all-gather issued in the forward"
	runImportCases(t, []importCase{{
		name:        "alignment-handbook's fsdp.yaml: FSDP1 (the launcher's default version), FULL_SHARD, BACKWARD_PRE on 8 GPUs",
		file:        "hf/zephyr_sft_full.yaml",
		step:        hfStep(16, 1, 8, 2048),
		opts:        Options{Overrides: []string{"accelerate_config=handbook_fsdp.yaml"}, ReadFile: accelerateFiles},
		notModelled: []string{forward},
		hand: `load("@stdlib//llm.star", "mistral")
plan = train(mistral("7b", attn = "flash"), batch = 16, seq = 2048, precision = "bf16", optimizer = adamw(fused = True), checkpoint = "full",
             gpu = "H100-80GB", parallel = parallel(dp = 8, fsdp = 1, fsdp_sync_module_states = True, fsdp_backward_prefetch = "pre"))`,
	}, {
		name: "alignment-handbook's multi_gpu.yaml: DDP over 16 GPUs on one machine",
		file: "hf/zephyr_sft_full.yaml",
		step: hfStep(16, 1, 16, 2048),
		opts: Options{Overrides: []string{"accelerate_config=handbook_multi_gpu.yaml"}, ReadFile: accelerateFiles},
		hand: `load("@stdlib//llm.star", "mistral")
plan = train(mistral("7b", attn = "flash"), batch = 16, seq = 2048, precision = "bf16", optimizer = adamw(fused = True), checkpoint = "full",
             gpu = "H100-80GB", parallel = parallel(dp = 16))`,
	}, {
		name: "the same over fp32 weights without the Trainer's bf16: the config's mixed_precision bf16 autocasts",
		file: "hf/zephyr_sft_full.yaml",
		step: hfStep(16, 1, 16, 2048),
		opts: Options{Overrides: []string{"accelerate_config=handbook_multi_gpu.yaml", "bf16=false", "torch_dtype=float32"}, ReadFile: accelerateFiles},
		hand: `load("@stdlib//llm.star", "mistral")
plan = train(mistral("7b", attn = "flash"), batch = 16, seq = 2048, precision = "bf16-mixed", optimizer = adamw(fused = True), checkpoint = "full",
             gpu = "H100-80GB", parallel = parallel(dp = 16))`,
	}, {
		name: "LLaMA-Factory's fsdp_config.yaml: FSDP1 with CPU offload in fp16 on 2 GPUs",
		file: "hf/zephyr_sft_full.yaml",
		step: hfStep(16, 1, 2, 2048),
		opts: Options{Overrides: []string{"accelerate_config=llamafactory_fsdp_offload.yaml", "bf16=false", "torch_dtype=float32"}, ReadFile: accelerateFiles},
		hand: `load("@stdlib//llm.star", "mistral")
plan = train(mistral("7b", attn = "flash"), batch = 16, seq = 2048, precision = "fp16-mixed", optimizer = adamw(fused = True), checkpoint = "full",
             gpu = "H100-80GB", parallel = parallel(dp = 2, fsdp = 1, fsdp_sync_module_states = True, fsdp_backward_prefetch = "pre"),
             offload = offload(params = "cpu"))`,
	}, {
		name: "the same with the Trainer's bf16: the Trainer's wins over the config's fp16",
		file: "hf/zephyr_sft_full.yaml",
		step: hfStep(16, 1, 2, 2048),
		opts: Options{Overrides: []string{"accelerate_config=llamafactory_fsdp_offload.yaml"}, ReadFile: accelerateFiles},
		hand: `load("@stdlib//llm.star", "mistral")
plan = train(mistral("7b", attn = "flash"), batch = 16, seq = 2048, precision = "bf16", optimizer = adamw(fused = True), checkpoint = "full",
             gpu = "H100-80GB", parallel = parallel(dp = 2, fsdp = 1, fsdp_sync_module_states = True, fsdp_backward_prefetch = "pre"),
             offload = offload(params = "cpu"))`,
	}, {
		name: "the Trainer's own fsdp under fsdp.yaml: its plugin's FSDP2 (transformers 5.10 and later), the config's FSDP1 fields unread",
		file: "hf/zephyr_sft_full.yaml",
		step: hfStep(16, 1, 8, 2048),
		opts: Options{Overrides: []string{"accelerate_config=handbook_fsdp.yaml", "fsdp=full_shard auto_wrap"}, ReadFile: accelerateFiles},
		hand: `load("@stdlib//llm.star", "mistral")
plan = train(mistral("7b", attn = "flash"), batch = 16, seq = 2048, precision = "bf16", optimizer = adamw(fused = True), checkpoint = "full",
             gpu = "H100-80GB", parallel = parallel(dp = 8, fsdp = 2))`,
	}, {
		name: "the Trainer's FSDP1 shard_grad_op under fsdp.yaml: the launcher's FSDP_SHARDING_STRATEGY FULL_SHARD wins",
		file: "hf/zephyr_sft_full.yaml",
		step: hfStep(16, 1, 8, 2048),
		opts: Options{Overrides: []string{"accelerate_config=handbook_fsdp.yaml", "fsdp=shard_grad_op auto_wrap", "fsdp_config.version=1"}, ReadFile: accelerateFiles},
		hand: `load("@stdlib//llm.star", "mistral")
plan = train(mistral("7b", attn = "flash"), batch = 16, seq = 2048, precision = "bf16", optimizer = adamw(fused = True), checkpoint = "full",
             gpu = "H100-80GB", parallel = parallel(dp = 8, fsdp = 1, fsdp_sync_module_states = True, fsdp_backward_prefetch = "none"))`,
	}})
}

// TestHFAccelerateErrors: an accelerate config memsh cannot replay, or
// one accelerate or the Trainer refuses, is an error naming its key.
func TestHFAccelerateErrors(t *testing.T) {
	const args = `{"per_device_train_batch_size": 4, "bf16": true, "gradient_checkpointing": true, "model_name_or_path": "mistralai/Mistral-7B-v0.1", "max_length": 512`
	files := map[string]string{
		"ds.yaml":       "distributed_type: DEEPSPEED\nnum_processes: 8\ndeepspeed_config:\n  zero_stage: 3\n",
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
		{name: "DeepSpeed from the accelerate config", file: "args.json", config: args + `}`, opts: o, overrides: []string{"accelerate_config=ds.yaml"},
			want: "ds.yaml:1: key distributed_type: DEEPSPEED from the accelerate config is not modelled yet", wantHint: "deepspeed=ds_config.json"},
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
			want: "args.json: key accelerate_config: no file can be read here", wantHint: "memsh check"},
		{name: "not a path", file: "args.json", config: args + `, "accelerate_config": 3}`, opts: o,
			want: "args.json: key accelerate_config: want a path, got 3", wantHint: "accelerate_config=fsdp.yaml"},
	})
}
