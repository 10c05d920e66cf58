package importers

import (
	"encoding/json"
	"io/fs"
)

// openrlhfDSName names the DeepSpeed config OpenRLHF builds in messages
// and in the lists (the hf importer reads it as its deepspeed file).
const openrlhfDSName = "OpenRLHF's get_train_ds_config"

// openrlhfDSArgs maps a key of the DeepSpeed config OpenRLHF builds that
// the advice may name (plan.keyOf) to the argument it comes from.
var openrlhfDSArgs = map[string]string{
	"data_types.grad_accum_dtype": "ds.grad_accum_dtype", "zero_optimization.stage": "ds.zero_stage",
	"train_micro_batch_size_per_gpu": "train.micro_batch_size", "zero_optimization.overlap_comm": "ds.overlap_comm",
}

// openrlhfDeepSpeed is the DeepSpeed config OpenRLHF hands
// deepspeed.initialize (openrlhf/utils/deepspeed/deepspeed_utils.py
// get_train_ds_config, with DeepspeedStrategy.get_ds_train_config's batch
// and prepare()'s AdamW, at v0.11.0), served to the hf importer as its
// deepspeed file so that the DeepSpeed reader reads it as it reads any
// (deepspeed.go, deepspeed_master.go: data_types.grad_accum_dtype among
// them):
//
//   - zero_optimization.stage --ds.zero_stage (2); offload_optimizer to
//     the CPU with --ds.adam_offload; zero_hpz_partition_size --ds.zpg (1);
//     overlap_comm and contiguous_gradients with --ds.overlap_comm;
//     reduce_scatter at stage 3;
//   - bf16 or fp16 enabled by --ds.param_dtype;
//   - data_types.grad_accum_dtype --ds.grad_accum_dtype when given;
//   - gradient_clipping --max_norm (1.0);
//   - optimizer AdamW (DeepSpeed's FusedAdam, DeepSpeedCPUAdam offloaded);
//   - train_micro_batch_size_per_gpu and train_batch_size.
//
// OpenRLHF writes "auto" for sub_group_size, reduce_bucket_size and the
// stage-3 sizes: DeepSpeed drops a config's "auto" values, so its defaults
// hold (runtime/config_utils.py DeepSpeedConfigModel.__init__, "allows HF
// to load models"), and they are left out here. compile.deepcompile and
// tensor_parallel.autotp_size are refused when on (openrlhfRefused) and
// left out at their defaults, as checkpoint.load_universal (no effect).
func openrlhfDeepSpeed(t *tree, o Options) (Options, error) {
	stage, err := t.integer("ds.zero_stage", 2, 0, 3)
	if err != nil {
		return o, err
	}
	offload, err := t.boolean("ds.adam_offload", false)
	if err != nil {
		return o, err
	}
	zpg, err := t.integer("ds.zpg", 1, 1, 1<<16)
	if err != nil {
		return o, err
	}
	overlap, err := t.boolean("ds.overlap_comm", false)
	if err != nil {
		return o, err
	}
	zero := map[string]any{
		"stage":                    stage,
		"offload_param":            map[string]any{"device": "none"},
		"offload_optimizer":        map[string]any{"device": map[bool]string{true: "cpu", false: "none"}[offload], "pin_memory": true},
		"zero_hpz_partition_size":  zpg,
		"zero_quantized_weights":   false,
		"zero_quantized_gradients": false,
	}
	if overlap {
		zero["overlap_comm"], zero["contiguous_gradients"] = true, true
	}
	if stage == 3 {
		zero["reduce_scatter"] = true
	}
	clip, err := t.clipNorm("max_norm", 1.0) // cli/train_sft.py l.243, given as gradient_clipping (deepspeed_utils.py l.55)
	if err != nil {
		return o, err
	}
	t.derive("max_grad_norm", clip, "max_norm") // the hf importer's DeepSpeed reading compares the two (hfDeepSpeedClip)
	bf16, _ := t.boolean("bf16", false)         // derived from --ds.param_dtype (openrlhfModel)
	micro, _ := t.integer("per_device_train_batch_size", 0, 1, 1<<24)
	accum, _ := t.integer("gradient_accumulation_steps", 0, 1, 1<<24)
	ds := map[string]any{
		"steps_per_print":                100,
		"zero_optimization":              zero,
		"bf16":                           map[string]any{"enabled": bf16},
		"fp16":                           map[string]any{"enabled": !bf16},
		"gradient_clipping":              clip,
		"prescale_gradients":             false,
		"wall_clock_breakdown":           false,
		"optimizer":                      map[string]any{"type": "AdamW", "params": map[string]any{}},
		"train_micro_batch_size_per_gpu": micro,
		"train_batch_size":               micro * accum * o.GPUs * o.Nodes,
	}
	if v, _ := t.get("ds.grad_accum_dtype"); v != nil {
		ds["data_types"] = map[string]any{"grad_accum_dtype": v}
	}
	data, err := json.Marshal(ds)
	if err != nil {
		return o, t.errorf("ds.zero_stage", "", "cannot write the DeepSpeed config: %v", err)
	}
	t.derive("deepspeed", openrlhfDSName, "ds.zero_stage")
	read := o.ReadFile
	o.ReadFile = func(n string) ([]byte, error) {
		if n == openrlhfDSName {
			return data, nil
		}
		if read == nil {
			return nil, fs.ErrNotExist
		}
		return read(n)
	}
	return o, nil
}
