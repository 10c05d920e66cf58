package importers

import (
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
					return t.errorf("model", "memsh check reads the v0 training YAML of llamafactory-cli train (model_name_or_path, finetuning_type, per_device_train_batch_size, ...), or write the plan in Starlark",
						"a LLaMA-Factory v1 config (USE_V1=1: model, model_class, dist_config, peft_config, ...), which memsh check does not read")
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
