package importers

import "github.com/memsh/memsh/sim/hf"

// Gradient clipping as each trainer runs it before its optimizer step,
// written as train(clip_grad_norm=...) (sim/timing/gradients.go prices a
// norm pass over the gradients, a scale pass and four scalar kernels,
// over this rank's shard under ZeRO and FSDP: timing.OptimizerWorkOf).
//
// The defaults, each from the trainer's source:
//   - the Hugging Face Trainer: TrainingArguments.max_grad_norm 1.0
//     (transformers 5.25.0 training_args.py l.866-868; 4.57.1 l.920),
//     clipped where > 0 (trainer.py 5.25.0 l.1975-1976, _clip_grad_norm
//     l.2825-2831: accelerator.clip_grad_norm_). TRL's trainers, Axolotl
//     and LLaMA-Factory run it (Axolotl's max_grad_norm None leaves the
//     Trainer's default: src/axolotl/utils/schemas/training.py l.264-266
//     and core/builders/base.py l.635 at v0.18.0).
//   - DeepSpeed: gradient_clipping, 1.0 from v0.19.3 (runtime/constants.py
//     GRADIENT_CLIPPING_DEFAULT at edaa722, commit 442166559 "Default
//     gradient_clipping to 1.0"; 0.0 before), clipped inside the engine's
//     step (deepspeedClip).
//   - OpenRLHF: --max_norm 1.0 (cli/train_sft.py l.243 at v0.11.0), given
//     to DeepSpeed as gradient_clipping (utils/deepspeed/deepspeed_utils.py
//     l.55, get_train_ds_config).

// clipNorm reads key, a trainer's max gradient norm: def when absent or
// null, a number >= 0 otherwise (0 clips nothing).
func (t *tree) clipNorm(key string, def float64) (float64, error) {
	v, _ := t.get(key)
	if v == nil {
		return def, nil
	}
	f, ok := toFloat(v)
	if !ok || f < 0 {
		return 0, t.errorf(key, "a finite max norm such as 1.0, or 0 to clip nothing",
			"want a max gradient norm >= 0, got %s", describe(v))
	}
	return f, nil
}

// clip sets train(clip_grad_norm=) where the trainer clips (norm > 0).
func (p *plan) clip(norm float64) {
	if norm > 0 {
		p.reset("clip_grad_norm", formatFloat(norm))
	}
}

// hfClip is the Trainer's clipping where it clips itself (no DeepSpeed:
// there the engine clips, deepspeedClip): max_grad_norm, 1.0 by default.
// transformers from 5.5.0 (5.25.0 trainer.py l.1977, _get_grad_norm
// l.2833-2839; 5.0.0 has no such call) runs clip_grad_norm_ with an
// infinite max norm to log the norm when max_grad_norm is 0: the same
// passes, with a coefficient of 1, which train(clip_grad_norm=) cannot
// say (it takes a finite norm), so a 5.x run at 0 is noted.
func hfClip(t *tree, p *plan) error {
	norm, err := t.clipNorm("max_grad_norm", 1.0)
	if err != nil {
		return err
	}
	p.clip(norm)
	if norm > 0 {
		return nil
	}
	if release, major, err := hfTransformers(t); err != nil {
		return err
	} else if major == 5 && (release == "" || hf.ReleaseAtLeast(release, 5, 5)) {
		t.notModelled = append(t.notModelled, "max_grad_norm: 0 clips nothing, but the Trainer of transformers 5.5.0 on still runs "+
			"clip_grad_norm_ with an infinite norm to log it (_get_grad_norm): its norm and scale passes over the gradients are not timed")
	}
	return nil
}

// deepspeedClip is DeepSpeed's gradient_clipping (1.0 by default from
// v0.19.3, 0.0 before), which the engine applies inside its step. memsh
// prices it as torch's clip_grad_norm_ over this rank's partition
// (launched per chunk of tensors), which is not how DeepSpeed runs it
// (runtime/zero/stage_1_and_2.py at edaa722): ZeRO-1/2's step computes
// the norm whether or not it clips (step l.2315 scaled_global_norm;
// get_grad_norm_direct l.2054-2101: torch.linalg.vector_norm of a float64
// copy of each gradient of the partition, a kernel pair per gradient,
// stacked and all-reduced over the data-parallel group), then multiplies
// the flat fp32 partition once by the combined loss and clip scale
// (unscale_and_clip_grads l.2434-2448), also at gradient_clipping 0;
// ZeRO-3 the same per sub-group (stage3.py l.2617-2635, l.2696-2706), and
// BF16_Optimizer asserts the norm is positive on the host (bf16_optimizer.py
// l.320: a sync). The float64 copies, their norms and launches are
// priced by sim/timing/zero_step.go since session 48, whatever
// gradient_clipping says, and so is the scale: for a ZeRO step on the GPU
// train(clip_grad_norm=) adds only the clip coefficient's scalar kernels
// (timing's gradientWork prices no torch clip_grad_norm_ passes there).
func deepspeedClip(t *tree, p *plan) error {
	norm, err := t.clipNorm("gradient_clipping", 1.0)
	if err != nil {
		return err
	}
	p.clip(norm)
	return nil
}

// hfDeepSpeedClip is the Trainer's max_grad_norm under DeepSpeed: the
// DeepSpeed config's gradient_clipping "auto" takes it, a value that
// differs is a mismatch the Trainer refuses, an absent one stays absent
// (transformers 5.25.0 integrations/deepspeed.py l.163, fill_match), and
// the engine clips (accelerate's clip_grad_norm_ under DeepSpeed only
// reads the engine's norm). Then DeepSpeed's reading (deepspeedClip).
func hfDeepSpeedClip(t, d *tree, p *plan) error {
	want, err := t.clipNorm("max_grad_norm", 1.0)
	if err != nil {
		return err
	}
	if l, ok := d.leaves["gradient_clipping"]; ok {
		if l.value == "auto" {
			l.value = want
			d.leaves["gradient_clipping"] = l
		} else if f, ok := toFloat(l.value); ok && f != want {
			return hfMerged(t, d, d.errorf("gradient_clipping", "the Trainer refuses the mismatch: give the DeepSpeed config auto, or set max_grad_norm the same",
				"%s, and the Trainer's max_grad_norm %v", describe(l.value), want))
		}
	}
	return hfMerged(t, d, deepspeedClip(d, p))
}

// torchtitanClip is training.max_norm, 1.0 by default (job_config.py
// l.188 at 6404b93; the Python configs' TrainingConfig, config/configs.py
// l.64 at b5bcd76), clipped at every step whatever its value (trainer.py
// l.919-925 at b5bcd76: dist_utils.clip_grad_norm_ with foreach=True;
// distributed/utils.py l.620-672: torch.nn.utils.get_total_norm over the
// gradients, DTensor local shards under FSDP2 and TP, full_tensor()
// all-reducing the scalar, then clip_grads_with_norm_): torch's foreach
// clip over this rank's shard, as memsh prices it; under expert
// parallelism (_clip_grad_norm_with_ep l.676-738) the expert and dense
// gradients take a norm and a scale each, the same passes. A max_norm of
// 0 would scale every gradient to 0: refused. With
// optimizer.early_step_in_backward each parameter's hook steps and frees
// its gradient in the backward (components/optimizer.py l.154-156 at
// 6404b93), so the clip finds none: not set.
func torchtitanClip(t *tree, p *plan, inBackward bool) error {
	const key = "training.max_norm"
	norm, err := t.clipNorm(key, 1.0)
	if err != nil {
		return err
	}
	if norm == 0 {
		return t.errorf(key, "torchtitan clips at every step: a max norm such as 1.0", "0 scales every gradient to 0 (torchtitan has no switch to clip nothing)")
	}
	if !inBackward {
		p.clip(norm)
	}
	return nil
}

// torchtuneClip is the recipes' clip_grad_norm, None by default: none
// clips nothing, a number is torch.nn.utils.clip_grad_norm_'s max_norm
// over the model's parameters (recipes/full_finetune_distributed.py
// l.209, l.1041-1048 at bd2a0fc, DTensor shards under FSDP2, the norm's
// full_tensor() an all-reduce of a scalar; lora_finetune_distributed.py
// l.792-795, full_finetune_single_device.py l.628-630,
// lora_finetune_single_device.py l.647-648), "inf" logs the norm through
// the same passes (the recipes' docstring), noted as train(clip_grad_norm=)
// takes a finite norm. The recipes raise on clipping with the optimizer
// stepped in backward (full_finetune_distributed.py l.223-227,
// full_finetune_single_device.py l.153-156). 0 would scale every gradient
// to 0 in the distributed recipes: refused, null says no clipping.
func torchtuneClip(t *tree, p *plan, inBackward bool) error {
	const key = "clip_grad_norm"
	v, _ := t.get(key)
	if v == nil {
		return nil
	}
	if inBackward {
		return t.errorf(key, "torchtune raises the same: set clip_grad_norm: null, or optimizer_in_bwd: False",
			"gradient clipping with optimizer_in_bwd")
	}
	if s, ok := v.(string); ok && (s == "inf" || s == "Inf" || s == "infinity") {
		t.notModelled = append(t.notModelled, key+": inf logs the norm through clip_grad_norm_'s passes over the gradients, which are not timed")
		return nil
	}
	norm, err := t.clipNorm(key, 0)
	if err != nil {
		return err
	}
	if norm == 0 {
		return t.errorf(key, "null clips nothing; a max norm such as 1.0 clips", "0 scales every gradient to 0 (clip_grad_norm_ with max_norm 0)")
	}
	p.clip(norm)
	return nil
}

// anemoiClip is training.gradient_clip, handed to Lightning's Trainer as
// gradient_clip_val and gradient_clip_algorithm (anemoi-training 0.5.1
// train/train.py l.495-496; training/default.yaml and ensemble.yaml
// l.29-32: val 32., algorithm value). Lightning clips nothing at a value
// of 0 (plugins/precision/precision.py clip_gradients); "norm" is
// torch.nn.utils.clip_grad_norm_, "value" clip_grad_value_, a clamp of
// every gradient (one read and write pass, no norm), which memsh does not
// price: noted.
func anemoiClip(t *tree, p *plan) error {
	const key = "training.gradient_clip"
	algo, err := t.str(key+".algorithm", "value")
	if err != nil {
		return err
	}
	if algo != "value" && algo != "norm" {
		return t.errorf(key+".algorithm", "anemoi-training's are value and norm", "unknown algorithm %s", quoteKey(algo))
	}
	val, err := t.clipNorm(key+".val", 32)
	if err != nil {
		return err
	}
	switch {
	case val == 0:
	case algo == "norm":
		p.clip(val)
	default:
		t.notModelled = append(t.notModelled, key+".algorithm: value, Lightning's clip_grad_value_ (a clamp of every gradient, one pass over them before the step) is not timed")
	}
	return nil
}

// megatronClip is Megatron-LM's --clip-grad (1.0: megatron/training/
// arguments.py l.2615 at d98e8a64dd; OptimizerConfig.clip_grad,
// core/optimizer/optimizer_config.py l.374) or ms-swift's clip_grad
// (1.0: swift/megatron/arguments/megatron_args.py l.545 at 3602360a5,
// handed to Megatron as --clip-grad), key naming which. Megatron clips
// where clip_grad > 0 (core/optimizer/optimizer.py l.830-831 and
// l.1351-1352): get_grad_norm_fp32 over the fp32 main gradients,
// multi_tensor_l2norm launched per chunk of tensors and all-reduced over
// the model-parallel group, then clip_grad_by_total_norm_fp32's
// multi_tensor_scale (core/optimizer/clip_grads.py l.55-191), over this
// rank's shard of them under the distributed optimizer: the passes and
// launches memsh prices (timing/gradients.go, fp32 gradients under
// precision="megatron"). Not priced: the norm's .item() on the host
// (clip_grads.py l.105, l.138), a host sync before the update.
func megatronClip(t *tree, p *plan, key string) error {
	norm, err := t.clipNorm(key, 1.0)
	if err != nil {
		return err
	}
	p.clip(norm)
	return nil
}
