package importers

import (
	"fmt"
	"slices"
	"strings"
)

// llamaFactoryV1Keys are the top-level keys of LLaMA-Factory v1's YAML
// (USE_V1=1 llamafactory-cli train: src/llamafactory/v1/config at
// hiyouga/LLaMA-Factory ff6d4d12e), whose model is "model", not v0's
// model_name_or_path.
var llamaFactoryV1Keys = []string{"model_class", "dist_config", "peft_config", "kernel_config", "quant_config", "train_dataset"}

// llamaFactoryFP8 are the keys that turn FP8 training on (Fp8Arguments,
// hparams/training_args.py; parser.py sets fp8 when
// fp8_enable_fsdp_float8_all_gather is): train/fp8_utils.py hands
// accelerate torchao's rowwise Float8LinearConfig (backend auto or
// torchao) or Transformer Engine's recipe (te).
var llamaFactoryFP8 = []string{"fp8", "fp8_enable_fsdp_float8_all_gather"}

// llamaFactoryRun refuses a file LLaMA-Factory would not train from as
// memsh replays it: v1's layout, a config without its model, a run that
// only evaluates or predicts (each stage's workflow.py calls
// trainer.train() only under do_train), and FP8 training.
func llamaFactoryRun(t *tree, o Options) error {
	if _, v0 := t.leaves["model_name_or_path"]; !v0 {
		if _, ok := t.leaves["model"]; ok {
			for _, k := range llamaFactoryV1Keys {
				if _, ok := t.leaves[k]; ok || slices.ContainsFunc(t.keys(), func(l string) bool { return strings.HasPrefix(l, k+".") }) {
					return t.errorf("model", llamaFactoryV1Hint(t),
						"a LLaMA-Factory v1 config (USE_V1=1: model, model_class, dist_config, peft_config, ...), which memsh check does not read: "+
							"v1 trains with its own trainer (src/llamafactory/v1/core/base_trainer.py), its kernels (kernel_config), loss and batching, "+
							"not transformers' Trainer, whose reading the v0 YAML has")
				}
			}
		}
		if o.Model == "" {
			return t.errorf("model_name_or_path", "name it as from_pretrained takes it (model_name_or_path: Qwen/Qwen3-8B), or pass its config.json: --model config.json",
				"the config names no model (LLaMA-Factory raises \"Please provide `model_name_or_path`.\")")
		}
	}
	train, err := t.boolean("do_train", false)
	if err != nil {
		return err
	}
	for _, k := range []string{"do_predict", "do_eval"} {
		on, err := t.boolean(k, false)
		if err != nil {
			return err
		}
		if on && !train {
			what := map[string]string{"do_predict": "a prediction", "do_eval": "an evaluation"}[k]
			return t.errorf(k, "memsh check replays a training step: set do_train: true",
				"%s run without do_train: LLaMA-Factory trains nothing (workflow.py: trainer.train() only with do_train)", what)
		}
	}
	for _, k := range llamaFactoryFP8 {
		if on, err := t.boolean(k, false); err != nil {
			return err
		} else if on {
			return t.errorf(k, `leave it out, or write the plan in Starlark with train(float8 = "rowwise") (docs/float8.md)`,
				"FP8 training (accelerate's torchao rowwise Float8Linear or Transformer Engine) is not modelled")
		}
	}
	return nil
}

// llamaFactoryV1Hint says what to do with a v1 config: write the plan in
// Starlark, starting from what its keys say one for one (v1/config at
// ff6d4d12e: micro_batch_size, default 1; cutoff_len, 2048;
// enable_activation_checkpointing, true, gradient_checkpointing_enable
// with use_reentrant false in core/base_trainer.py; peft_config's lora
// with target_modules "all", every linear layer, plugins/model_plugins/
// peft.py; dist_config fsdp2), with the file's values, and set what v1
// decides otherwise (its precision under bf16, its kernels) from its
// source; or run the job from the v0 YAML, which memsh check reads.
func llamaFactoryV1Hint(t *tree) string {
	val := func(key string, def any) any {
		if l, ok := t.leaves[key]; ok && l.value != nil {
			return l.value
		}
		return def
	}
	var args []string
	if m, ok := val("model", nil).(string); ok {
		args = append(args, fmt.Sprintf("hf_config(%s)", str(m+"/config.json")))
	}
	if n, ok := val("micro_batch_size", int64(1)).(int64); ok {
		args = append(args, kw("batch", num(n)))
	}
	if n, ok := val("cutoff_len", int64(2048)).(int64); ok {
		args = append(args, kw("seq", num(n)))
	}
	if on, ok := val("enable_activation_checkpointing", true).(bool); ok && on {
		args = append(args, kw("checkpoint", str("full")))
	}
	if name, _ := val("peft_config.name", "").(string); name == "lora" {
		var lo []string
		for _, k := range []struct{ key, kw string }{{"peft_config.r", "rank"}, {"peft_config.lora_alpha", "alpha"}, {"peft_config.lora_dropout", "dropout"}} {
			switch v := val(k.key, nil).(type) {
			case int64:
				lo = append(lo, kw(k.kw, num(v)))
			case float64:
				lo = append(lo, kw(k.kw, formatFloat(v)))
			}
		}
		if tm, _ := val("peft_config.target_modules", "all").(string); tm == "all" {
			lo = append(lo, kw("targets", `["all-linear"]`))
		}
		args = append(args, kw("lora", call("lora", lo...)))
	}
	if q, _ := val("quant_config.name", "").(string); q == "bnb" || q == "auto" { // plugins/model_plugins/quantization.py BnbParams
		bits, _ := val("quant_config.quantization_bit", int64(4)).(int64)
		typ, _ := val("quant_config.quantization_type", "nf4").(string)
		dq, _ := val("quant_config.double_quantization", true).(bool)
		storage := map[string]string{"float16": "fp16", "bfloat16": "bf16", "float32": "fp32"}[fmt.Sprint(val("quant_config.compute_dtype", "float16"))]
		switch {
		case bits == 8:
			args = append(args, kw("quant", str("int8")))
		case bits == 4 && typ == "nf4" && storage != "":
			scheme := "nf4"
			if dq {
				scheme = "nf4-dq"
			}
			args = append(args, kw("quant", str(scheme)), kw("quant_storage", str(storage)))
		}
	}
	if name, _ := val("dist_config.name", "").(string); name == "fsdp2" {
		args = append(args, kw("parallel", call("parallel", kw("dp", "GPUS"), kw("fsdp", "2"))))
	}
	return "write the plan in Starlark from its keys, " + call("train", args...) +
		", with the precision v1 trains in and the layout and kernels its dist_config and kernel_config set (docs/check.md); " +
		"or run the job from LLaMA-Factory's v0 YAML (model_name_or_path, finetuning_type, per_device_train_batch_size, ...), which memsh check reads"
}
