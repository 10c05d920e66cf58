package importers

import (
	"fmt"
	"strings"
)

// hfAccelerateDeepSpeed is distributed_type DEEPSPEED: the DeepSpeed
// config the Trainer then fills as it fills its own deepspeed= config
// (hfDeepSpeed), written inline under the Trainer's deepspeed. keys.
// With the Trainer's own deepspeed, that config: the accelerate config's
// deepspeed_config fills only its "auto" stage and offloads, which memsh
// does not read (listed). Without it, accelerate's DeepSpeedPlugin builds
// it from the launcher's variables (utils/dataclasses.py l.1131-1240):
// deepspeed_config_file's (its gradient_accumulation_steps 1 when absent,
// its "auto" fields filled from the accelerate config's, which may name
// none of mixed_precision, zero_stage, the offloads, accumulation or
// clipping beside it: _deepspeed_config_checks), else one made of
// zero_stage (2 unless set), offload_optimizer_device and
// offload_param_device ("none"), gradient_accumulation_steps and
// gradient_clipping ("auto" unless set), with "auto" batch sizes. Then
// set_mixed_precision (l.1301-1325) adds an enabled bf16 or fp16 section
// for the mixed precision where the config has none, refuses the other
// enabled, and says the absent one disabled; the Trainer's
// trainer_config_process fills the rest and refuses what disagrees with
// its own bf16 and fp16 (transformers 5.25.0 integrations/deepspeed.py
// l.138-192), as hfDeepSpeed does.
func hfAccelerateDeepSpeed(t, a *tree, o Options, mp string) error {
	if v, _ := t.get("fsdp"); v != nil && v != "" && v != false {
		return a.errorf("distributed_type", "the Trainer runs one of them: drop the Trainer's fsdp, or launch with an FSDP config", "DEEPSPEED, and the Trainer's fsdp is set")
	}
	if v, _ := t.get("deepspeed"); v != nil {
		for _, f := range hfAccelerateDeepSpeedFields {
			a.notModelledIf("deepspeed_config."+f[0], "fills only an \"auto\" value of the Trainer's DeepSpeed config, which memsh reads as its own")
		}
		a.notModelledIf("deepspeed_config.deepspeed_config_file", "the Trainer's deepspeed config is the one DeepSpeed runs")
		return nil
	}
	for k := range t.leaves {
		if strings.HasPrefix(k, "deepspeed.") {
			return t.errorf(k, "give the DeepSpeed config in one place: the accelerate config's, or the Trainer's deepspeed", "an inline DeepSpeed config beside an accelerate DEEPSPEED config")
		}
	}
	ds := map[string]any{}
	src := map[string]string{} // the accelerate config's key each DeepSpeed key comes from
	file, err := a.str("deepspeed_config.deepspeed_config_file", "")
	if err != nil {
		return err
	}
	fields := map[string]any{}
	for _, f := range hfAccelerateDeepSpeedFields {
		if v, _ := a.get("deepspeed_config." + f[0]); v != nil {
			fields[f[1]] = v
			src[f[1]] = "deepspeed_config." + f[0]
		}
	}
	if file != "" {
		if err := hfAccelerateDeepSpeedFile(a, o, file, ds, fields, src); err != nil {
			return err
		}
	} else {
		ds["train_batch_size"], ds["train_micro_batch_size_per_gpu"] = "auto", "auto"
		ds["gradient_accumulation_steps"] = "auto"
		ds["zero_optimization.stage"] = int64(2)
		ds["zero_optimization.offload_optimizer.device"], ds["zero_optimization.offload_param.device"] = "none", "none"
		for k, v := range fields {
			ds[k] = v
		}
		if clip, ok := fields["gradient_clipping"]; ok {
			want, err := t.clipNorm("max_grad_norm", 1.0) // TrainingArguments' max_grad_norm
			if err != nil {
				return err
			}
			if f, ok := toFloat(clip); !ok || f != want {
				return a.errorf("deepspeed_config.gradient_clipping", "the Trainer refuses the mismatch: drop it, or set max_grad_norm the same",
					"%s, and the Trainer's max_grad_norm %v", describe(clip), want)
			}
		}
	}
	from := a // where the mixed precision comes from: the Trainer's bf16 or fp16, else the accelerate config's
	key := "mixed_precision"
	for _, k := range []string{"fp16", "bf16"} {
		if on, _ := t.boolean(k, false); on && mp == k {
			from, key = t, k
		}
	}
	if other := hfAccelerateDeepSpeedPrecision(ds, mp); other != "" {
		return from.errorf(key, "the same precision in both, or auto in the DeepSpeed config",
			"%s, and the DeepSpeed config enables %s: accelerate refuses it (set_mixed_precision)", mp, other)
	}
	t.from["deepspeed"] = "accelerate_config" // the Trainer's DeepSpeed errors name the accelerate config
	for k, v := range ds {
		t.leaves["deepspeed."+k] = leaf{value: v}
		if s, ok := src[k]; ok {
			t.from["deepspeed."+k] = "accelerate_config." + s
		}
	}
	return nil
}

// hfAccelerateDeepSpeedFile reads deepspeed_config_file into ds, as the
// plugin does, through the confined reader (the path from the Trainer
// config's folder).
func hfAccelerateDeepSpeedFile(a *tree, o Options, file string, ds, fields map[string]any, src map[string]string) error {
	const key = "deepspeed_config.deepspeed_config_file"
	names := make([]string, 0, len(fields))
	for _, f := range hfAccelerateDeepSpeedFields {
		if _, ok := fields[f[1]]; ok {
			names = append(names, f[0])
		}
	}
	if _, ok := a.leaves["mixed_precision"]; ok {
		names = append(names, "mixed_precision")
	}
	if len(names) > 0 { // utils/dataclasses.py l.1386-1411
		return a.errorf(key, "say them in the DeepSpeed config file, and drop them from the accelerate config",
			"set with %s: accelerate refuses them beside a DeepSpeed config file", strings.Join(names, ", "))
	}
	data, err := o.ReadFile(file)
	if err != nil {
		return a.errorf(key, "the path is read from the Trainer config's folder", "cannot read the DeepSpeed config: %v", err)
	}
	d, err := parseJSON(file, data)
	if err != nil {
		return err
	}
	zero := false
	for k, l := range d.leaves {
		ds[k] = l.value
		zero = zero || strings.HasPrefix(k, "zero_optimization.")
	}
	if !zero {
		return a.errorf(key, "give it a zero_optimization section", "%s has no zero_optimization: accelerate's DeepSpeedPlugin refuses it", file)
	}
	if _, ok := ds["gradient_accumulation_steps"]; !ok {
		ds["gradient_accumulation_steps"] = int64(1)
		src["gradient_accumulation_steps"] = key
	}
	return nil
}

// hfAccelerateDeepSpeedPrecision is DeepSpeedPlugin.set_mixed_precision
// (accelerate 1.16 utils/dataclasses.py l.1301-1325) on the DeepSpeed
// config ds; the other dtype when ds enables it, which accelerate refuses.
func hfAccelerateDeepSpeedPrecision(ds map[string]any, mp string) string {
	section := func(dtype string) bool {
		for k := range ds {
			if strings.HasPrefix(k, dtype+".") {
				return true
			}
		}
		return false
	}
	if mp != "no" {
		if !section(mp) {
			ds[mp+".enabled"] = true
		}
		other := map[string]string{"bf16": "fp16", "fp16": "bf16"}[mp]
		if strings.EqualFold(fmt.Sprint(ds[other+".enabled"]), "true") {
			return other
		}
	}
	for _, dtype := range []string{"fp16", "bf16"} {
		if !section(dtype) {
			ds[dtype+".enabled"] = false
		}
		if ds[dtype+".enabled"] == "auto" {
			ds[dtype+".enabled"] = mp == dtype
		}
	}
	return ""
}
