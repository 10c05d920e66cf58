package importers

import (
	"fmt"
	"strings"
)

// hfDeepSpeedConfig is the DeepSpeed config the Trainer hands the job to
// (TrainingArguments.deepspeed): a file the config names, read from the
// config's folder, or a mapping given inline; nil without one.
func hfDeepSpeedConfig(t *tree, o Options) (*tree, error) {
	v, _ := t.get("deepspeed")
	if v == nil { // inline: the keys under deepspeed.
		d := newTree("deepspeed")
		for k, l := range t.leaves {
			if sub, ok := strings.CutPrefix(k, "deepspeed."); ok {
				d.leaves[sub] = l // read or not as hfDeepSpeed reads it
			}
		}
		if len(d.leaves) == 0 {
			return nil, nil
		}
		d.file = t.file
		return d, nil
	}
	name, ok := v.(string)
	if !ok || name == "" {
		return nil, t.errorf("deepspeed", "the DeepSpeed config's path, e.g. ds_config.json", "want a path, got %s", describe(v))
	}
	if o.ReadFile == nil {
		return nil, t.errorf("deepspeed", "check the DeepSpeed config itself: memsh check "+name+" --model config.json --seq N", "no file can be read here")
	}
	data, err := o.ReadFile(name)
	if err != nil {
		return nil, t.errorf("deepspeed", "the path is read from the config's folder", "cannot read the DeepSpeed config: %v", err)
	}
	return parseJSON(name, data)
}

// hfDeepSpeed is the job as the Trainer's DeepSpeed integration runs it
// (transformers integrations/deepspeed.py, HfTrainerDeepSpeedConfig):
// the config's "auto" values filled from the Trainer's arguments, then the
// precision, the optimizer (the config's, else the Trainer's) and ZeRO as
// the deepspeed importer reads them. The DeepSpeed keys appear in the
// lists under "deepspeed.".
func hfDeepSpeed(t, d *tree, o Options, p *plan, batch, accum int64, optim string) error {
	if v, _ := t.get("fsdp"); v != nil && v != "" && v != false {
		return t.errorf("fsdp", "the Trainer runs one of them: drop fsdp or deepspeed", "and deepspeed are both set")
	}
	bf16, err := t.boolean("bf16", false)
	if err != nil {
		return err
	}
	fp16, err := t.boolean("fp16", false)
	if err != nil {
		return err
	}
	t.get("torch_dtype") // deepspeed.initialize casts the model to the config's precision, whatever it was loaded in
	t.get("dtype")
	gpus := o.GPUs * o.Nodes
	fill := map[string]any{
		"train_micro_batch_size_per_gpu": batch, "gradient_accumulation_steps": accum, "train_batch_size": batch * accum * gpus,
		"fp16.enabled": fp16, "bf16.enabled": bf16,
	}
	// fill_match: an auto value takes the Trainer's; an absent key stays
	// absent (until set_mixed_precision, below); a value that differs is
	// a mismatch the Trainer refuses.
	for _, k := range []string{"fp16.enabled", "bf16.enabled", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "train_batch_size"} {
		l, ok := d.leaves[k]
		switch {
		case !ok:
		case l.value == "auto":
			l.value = fill[k]
			d.leaves[k] = l
		case k == "fp16.enabled" || k == "bf16.enabled":
			if b, isBool := l.value.(bool); isBool && b != fill[k].(bool) {
				return t.errorf("deepspeed", "the Trainer refuses the mismatch: give the DeepSpeed config auto, or the same setting",
					"its %s is %v, the Trainer's %s %v", k, b, strings.TrimSuffix(k, ".enabled"), fill[k])
			}
		}
	}
	if err := hfDeepSpeedMixedPrecision(t, d, fp16, bf16); err != nil {
		return err
	}
	micro, dsAccum, err := deepspeedBatch(d, gpus)
	if err != nil {
		return hfMerged(t, d, err)
	}
	if micro != batch || dsAccum != accum {
		return t.errorf("deepspeed", "the Trainer refuses the mismatch: give the DeepSpeed config auto, or the same numbers",
			"its micro batch %d x accumulation %d is not per_device_train_batch_size %d x gradient_accumulation_steps %d", micro, dsAccum, batch, accum)
	}
	if err := deepspeedPrecision(d, p); err != nil {
		return hfMerged(t, d, err)
	}
	if kind, _ := d.leaves["optimizer.type"]; kind.value != nil {
		if err := deepspeedOptimizer(d, p); err != nil {
			return hfMerged(t, d, err)
		}
	} else {
		p.set("optimizer", optim)
	}
	if err := hfDeepSpeedClip(t, d, p); err != nil {
		return err
	}
	d.notModelledIf("activation_checkpointing.partition_activations", "DeepSpeed's activation partitioning across model-parallel ranks")
	d.notModelledIf("activation_checkpointing.cpu_checkpointing", "DeepSpeed's checkpoints on the CPU")
	if err := deepspeedZero(d, o, p); err != nil {
		return hfMerged(t, d, err)
	}
	for k, l := range d.leaves {
		key := "deepspeed." + k
		t.leaves[key] = l
		if d.used[k] || matchAny(k, deepspeedTrainer.noEffect) {
			t.used[key] = true
		}
	}
	for _, n := range d.notModelled {
		t.notModelled = append(t.notModelled, "deepspeed."+n)
	}
	return nil
}

// hfMerged names a DeepSpeed config's error as the Trainer's: the key
// under deepspeed, in the DeepSpeed file.
func hfMerged(t, d *tree, err error) error {
	if e, ok := err.(*Error); ok && e.Key != "" && d.file == t.file {
		e.Key = "deepspeed." + e.Key
	}
	return err
}

// hfDeepSpeedMixedPrecision is what the Accelerator does to the Trainer's
// DeepSpeed config after the Trainer filled it: set_mixed_precision with
// the Trainer's mixed precision (accelerate 1.16 state.py l.935-938,
// utils/dataclasses.py l.1301-1325): its fp16 or bf16, else the
// accelerate config's mixed_precision (TrainingArguments, transformers
// 5.25.0 l.1614-1618), else none. A config without a bf16 (fp16)
// section gets one enabled, so the Trainer's bf16 runs DeepSpeed in bf16
// though the config says nothing of it, and the absent one disabled.
func hfDeepSpeedMixedPrecision(t, d *tree, fp16, bf16 bool) error {
	mp := "no"
	switch {
	case fp16:
		mp = "fp16"
	case bf16:
		mp = "bf16"
	default:
		if l, ok := t.leaves["accelerate_config.mixed_precision"]; ok {
			mp = strings.ToLower(fmt.Sprint(l.value))
		}
	}
	vals := map[string]any{}
	for k, l := range d.leaves {
		vals[k] = l.value
	}
	if other := hfAccelerateDeepSpeedPrecision(vals, mp); other != "" {
		return t.errorf("deepspeed", "the same precision in both, or auto in the DeepSpeed config",
			"it enables %s, and the Trainer's mixed precision is %s: accelerate refuses it (set_mixed_precision)", other, mp)
	}
	for _, k := range []string{"fp16.enabled", "bf16.enabled"} {
		if v, ok := vals[k]; ok {
			l := d.leaves[k]
			l.value = v
			d.leaves[k] = l
		}
	}
	return nil
}
