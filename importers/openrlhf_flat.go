package importers

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// OpenRLHF's flat arguments, before v0.10.2 gave them dotted names: a
// script of those releases (--pretrain, --micro_train_batch_size,
// --zero_stage, --bf16, ...) is read as the same plan, each flat name
// renamed to the dotted one the reader reads (tree.alias keeps the
// script's name for errors and the lists), with the defaults of the
// release the script runs under where they differ (openrlhfFlat).

// openrlhfFlatNames maps each flat argument of train_sft.py and
// train_dpo.py (v0.3.6 to v0.10.1.post2, every name their argparse took)
// to its dotted name at v0.10.2 (openrlhf/cli/train_sft.py and
// train_dpo.py at v0.10.2 against v0.10.1.post2: the same dest, renamed).
// --bf16 and --flash_attn, store_true flags that v0.9.2 and v0.8.10 made
// --param_dtype and --attn_implementation, are read as those with the
// value they stood for (openrlhfFlatValues). Names both releases spell
// alike (--lr_scheduler, --lr_warmup_ratio, --max_norm, --local_rank,
// --use_ms; train_dpo's --min_lr_ratio) are not here.
var openrlhfFlatNames = map[string]string{
	// checkpoints and logs
	"save_path": "ckpt.output_dir", "save_steps": "ckpt.save_steps", "save_hf_ckpt": "ckpt.save_hf", "disable_ds_ckpt": "ckpt.disable_ds",
	"logging_steps": "logger.logging_steps", "eval_steps": "eval.steps", "ckpt_path": "ckpt.path", "max_ckpt_num": "ckpt.max_num",
	"max_ckpt_mem": "ckpt.max_mem", "load_checkpoint": "ckpt.load_enable", "use_ds_universal_ckpt": "ds.use_universal_ckpt",
	"use_wandb": "logger.wandb.key", "wandb_org": "logger.wandb.org", "wandb_group": "logger.wandb.group", "wandb_project": "logger.wandb.project",
	"wandb_run_name": "logger.wandb.run_name", "use_tensorboard": "logger.tensorboard_dir",
	// the batch and the loop
	"micro_train_batch_size": "train.micro_batch_size", "train_batch_size": "train.batch_size", "seed": "train.seed",
	"full_determinism": "train.full_determinism_enable", "max_epochs": "train.max_epochs",
	// the model and DeepSpeed
	"pretrain": "model.model_name_or_path", "gradient_checkpointing": "model.gradient_checkpointing_enable",
	"gradient_checkpointing_use_reentrant": "model.gradient_checkpointing_reentrant", "aux_loss_coef": "model.aux_loss_coef",
	"pretrain_mode": "model.pretrain_mode_enable", "deepcompile": "ds.deepcompile", "zero_stage": "ds.zero_stage", "param_dtype": "ds.param_dtype",
	"bf16": "ds.param_dtype", "zpg": "ds.zpg", "adam_offload": "ds.adam_offload", "attn_implementation": "ds.attn_implementation",
	"flash_attn": "ds.attn_implementation", "use_liger_kernel": "ds.use_liger_kernel", "grad_accum_dtype": "ds.grad_accum_dtype",
	"overlap_comm": "ds.overlap_comm", "ds_tensor_parallel_size": "ds.tensor_parallel_size", "ring_attn_size": "ds.ring_attn_size",
	"ring_head_stride": "ds.ring_attn_head_stride", "load_in_4bit": "ds.load_in_4bit", "lora_rank": "ds.lora.rank", "lora_alpha": "ds.lora.alpha",
	"target_modules": "ds.lora.target_modules", "lora_dropout": "ds.lora.dropout", "packing_samples": "ds.packing_samples",
	// the optimizer (DeepSpeed's FusedAdam, openrlhf/utils/deepspeed/deepspeed.py create_optimizer)
	"learning_rate": "adam.lr", "l2": "adam.weight_decay", "adam_betas": "adam.betas",
	// data
	"disable_fast_tokenizer": "data.disable_fast_tokenizer", "dataloader_num_workers": "data.dataloader_num_workers", "dataset": "data.dataset",
	"dataset_probs": "data.dataset_probs", "eval_dataset": "eval.dataset", "dataset_split": "data.dataset_split", "eval_split": "eval.split",
	"max_samples": "data.max_samples", "train_split": "data.train_split", "multiturn": "data.multiturn", "input_key": "data.input_key",
	"output_key": "data.output_key", "input_template": "data.input_template", "apply_chat_template": "data.apply_chat_template",
	"tokenizer_chat_template": "data.tokenizer_chat_template", "max_len": "data.max_len",
	// train_dpo
	"ref_offload": "ref.offload", "beta": "model.beta", "ipo": "model.ipo_enable", "label_smoothing": "model.label_smoothing",
	"nll_loss_coef": "model.nll_loss_coef", "ref_pretrain": "ref.model_name_or_path", "prompt_key": "data.prompt_key",
	"chosen_key": "data.chosen_key", "rejected_key": "data.rejected_key",
	// releases before v0.7.0, refused with them (openrlhfFlatRelease)
	"torch_compile": "torch_compile", "universal_ckpt": "universal_ckpt", "disable_trace_cache": "disable_trace_cache",
}

// openrlhfFlatValues are the store_true flags whose dotted successor takes
// a value: --bf16 is --param_dtype bf16 (v0.9.2: get_train_ds_config's
// bf16=True became param_dtype="bf16"), --flash_attn is
// --attn_implementation flash_attention_2 (v0.8.10: Actor's
// use_flash_attention_2 became attn_implementation).
var openrlhfFlatValues = map[string]string{"bf16": "bf16", "flash_attn": "flash_attention_2"}

// openrlhfShared are the names the flat and the dotted releases spell
// alike: they say nothing of which the script is.
var openrlhfShared = map[string]bool{"lr_scheduler": true, "lr_warmup_ratio": true, "min_lr_ratio": true, "max_norm": true, "local_rank": true, "use_ms": true}

// openrlhfReleaseKey names the OpenRLHF release the job runs.
const openrlhfReleaseKey = "memsh.openrlhf"

// openrlhfFlat reads the script's arguments as OpenRLHF's of one release:
// memsh.openrlhf where given, else, for flat names, the newest flat
// release whose argparse takes every one of them (v0.10.1.post2 when
// nothing narrows it; a note says which was assumed); for dotted names
// v0.11.0, as before. Flat names are renamed to the dotted ones with the
// defaults of that release where they differ:
//
//   - before v0.9.2 there is no --param_dtype: --bf16 loads the model in
//     bf16 and enables DeepSpeed's bf16; without it Actor loads
//     torch_dtype "auto" and get_train_ds_config enables neither bf16 nor
//     fp16 (it has no fp16 section): refused, as memsh replays no such run;
//   - before v0.8.10 Actor's attention is flash_attention_2 with
//     --flash_attn and eager without (train_sft.py and train_dpo.py turn it
//     on for --packing_samples, as openrlhfPacking does);
//   - the transformers release is the one the release pins
//     (openrlhfTransformers) unless memsh.transformers says;
//   - releases before v0.7.0 are refused (their loss, see
//     openrlhfFirstRead).
//
// It returns the release read.
func openrlhfFlat(t *tree, dpo bool) (openrlhfRelease, error) {
	var flat, dotted []string
	for _, k := range t.keys() {
		switch {
		case strings.HasPrefix(k, "launcher.") || strings.HasPrefix(k, "env.") || strings.HasPrefix(k, "memsh.") || openrlhfShared[k]:
		case openrlhfFlatNames[k] != "":
			flat = append(flat, k)
		case strings.Contains(k, ".") || k == "optim":
			dotted = append(dotted, k)
		}
	}
	entry := "train_sft.py"
	if dpo {
		entry = "train_dpo.py"
	}
	named, err := openrlhfNamedRelease(t)
	if err != nil {
		return named, err
	}
	given := named != openrlhfRelease{}
	if len(flat) > 0 && len(dotted) > 0 {
		return named, t.errorf(flat[0], fmt.Sprintf("write every argument as one release does: --%s (v0.10.2 and later), or --%s (before v0.10.2)", openrlhfFlatNames[flat[0]], openrlhfDottedName(dotted[0])),
			"is OpenRLHF's flat argument (before v0.10.2), beside its dotted --%s (v0.10.2 and later): no release takes both", dotted[0])
	}
	if len(flat) == 0 && (!given || !named.less(openrlhfFirstDotted)) {
		// the dotted arguments, as read at v0.11.0
		if given {
			if openrlhfNewest.less(named) {
				return named, t.errorf(openrlhfReleaseKey, "memsh.openrlhf="+openrlhfNewest.String()+" or earlier", "OpenRLHF %s is newer than the releases memsh reads", named)
			}
			t.setDefault("memsh.transformers", transformersOf(named))
			return named, nil
		}
		return openrlhfNewest, nil
	}
	if len(flat) == 0 && len(dotted) > 0 {
		return named, t.errorf(openrlhfReleaseKey, "leave it out, or name a release of 0.10.2 or later",
			"OpenRLHF %s takes the flat arguments (--pretrain ...), where the script gives the dotted --%s", named, dotted[0])
	}
	if given && !named.less(openrlhfFirstDotted) {
		return named, t.errorf(openrlhfReleaseKey, "leave it out, or name a release before 0.10.2 (memsh.openrlhf="+openrlhfLastFlat.String()+")",
			"OpenRLHF %s takes the dotted arguments (--%s ...), where the script gives the flat --%s", named, openrlhfFlatNames[flat[0]], flat[0])
	}
	// the releases whose argparse takes every flat argument the script gives
	from, to, lo, hi := rel("0.3.6"), openrlhfLastFlat, "", ""
	for _, k := range flat {
		f, u := openrlhfSpan(k, dpo)
		if from.less(f) {
			from, lo = f, k
		}
		if u.less(to) {
			to, hi = u, k
		}
	}
	if to.less(from) {
		return named, t.errorf(hi, "give the arguments of one release", "no OpenRLHF release's %s takes both --%s (%s and later) and --%s (up to %s)", entry, lo, from, hi, to)
	}
	r := named
	if given {
		for _, k := range flat {
			if f, u := openrlhfSpan(k, dpo); r.less(f) || u.less(r) {
				return r, t.errorf(k, fmt.Sprintf("OpenRLHF %s to %s take it: name one of them (memsh.openrlhf=%s), or leave memsh.openrlhf out", f, u, u),
					"OpenRLHF %s's %s has no --%s (argparse stops at it)", r, entry, k)
			}
		}
	} else {
		r = to
		why := "the last release before the dotted names"
		if hi != "" {
			why = fmt.Sprintf("the newest release whose %s takes --%s", entry, hi)
		}
		t.notModelled = append(t.notModelled, fmt.Sprintf("%s: OpenRLHF %s assumed, %s (its defaults, its transformers %s): memsh.openrlhf= names another of the releases that take these arguments, %s to %s",
			openrlhfReleaseKey, r, why, transformersOf(r), maxRelease(from, openrlhfFirstRead), to))
	}
	if r.less(openrlhfFirstRead) {
		return r, t.errorf(openrlhfReleaseKey, "OpenRLHF 0.7.0 to 0.10.1 run the loss memsh replays: memsh.openrlhf="+openrlhfLastFlat.String()+" (or leave it out) reads the script as theirs, or write the plan in Starlark",
			"OpenRLHF %s is not modelled: before 0.7.0 the SFT loop scores output.logits with GPTLMLoss (a shifted fp32 copy of the logits under nn.CrossEntropyLoss) and DPO takes the log-softmax of the whole logits (DPOTrainer._get_batch_logps), where 0.7.0 and later score them with flash-attn's cross-entropy (log_probs_from_logits)", r)
	}
	for _, k := range flat {
		l, d := t.leaves[k], openrlhfFlatNames[k]
		if v, ok := openrlhfFlatValues[k]; ok {
			on, err := t.boolean(k, false)
			if err != nil {
				return r, err
			}
			delete(t.leaves, k)
			if !on {
				continue
			}
			l.value = v
		} else {
			delete(t.leaves, k)
		}
		t.leaves[d] = l
		t.alias[d] = k
	}
	if on, err := t.boolean("torch_compile", false); err != nil {
		return r, err
	} else if on { // v0.7.0's: strategy.prepare compiles the model
		return r, t.errorf("torch_compile", "leave it out", "torch.compile of the model is not modelled")
	}
	if _, ok := t.leaves["ds.param_dtype"]; !ok && r.less(rel("0.9.2")) {
		return r, t.errorf("model.model_name_or_path", "--bf16 (OpenRLHF's flat releases train in bf16 only with it), or write the plan in Starlark",
			"without --bf16, OpenRLHF %s loads the model in its checkpoint's dtype (torch_dtype \"auto\") and enables neither bf16 nor fp16 in DeepSpeed's config (get_train_ds_config): not modelled", r)
	}
	if _, ok := t.leaves["ds.attn_implementation"]; !ok && r.less(rel("0.8.10")) {
		t.setDefault("ds.attn_implementation", "eager") // Actor: "flash_attention_2" if use_flash_attention_2 else "eager"
	}
	t.setDefault("memsh.transformers", transformersOf(r))
	return r, nil
}

// openrlhfNamedRelease is memsh.openrlhf ("0.9.1"), zero when absent.
func openrlhfNamedRelease(t *tree) (openrlhfRelease, error) {
	const hint = "the job's OpenRLHF release, as pip show openrlhf prints it: memsh.openrlhf=0.9.1"
	raw, _ := t.get(openrlhfReleaseKey)
	if raw == nil {
		return openrlhfRelease{}, nil
	}
	s, ok := raw.(string)
	if !ok {
		return openrlhfRelease{}, t.errorf(openrlhfReleaseKey, hint, "want a release such as 0.9.1, got %s", describe(raw))
	}
	r, ok := parseOpenRLHFRelease(s)
	if !ok {
		return r, t.errorf(openrlhfReleaseKey, hint, "want a release such as 0.9.1 or 0.10.1.post2, got %s", quoteKey(s))
	}
	return r, nil
}

// openrlhfDottedName is the flat name of a dotted argument, for hints.
func openrlhfDottedName(dotted string) string {
	var names []string
	for f, d := range openrlhfFlatNames {
		if d == dotted && openrlhfFlatValues[f] == "" {
			names = append(names, f)
		}
	}
	if len(names) == 0 {
		return dotted + " (no flat name)"
	}
	sort.Strings(names)
	return names[0]
}

func maxRelease(a, b openrlhfRelease) openrlhfRelease {
	if a.less(b) {
		return b
	}
	return a
}

// openrlhfArg is an argument as a message writes it: --name.
var openrlhfArg = regexp.MustCompile(`--[A-Za-z0-9_.]+[A-Za-z0-9_]`)

// openrlhfFlatMessage writes the dotted arguments an error of a flat
// script's reading names (its key, message and hint: "a multiple of
// --train.micro_batch_size x GPUs") by their flat names, as the script
// writes them.
func openrlhfFlatMessage(err error) error {
	var e *Error
	if !errors.As(err, &e) {
		return err
	}
	flat := func(s string) string {
		return openrlhfArg.ReplaceAllStringFunc(s, func(a string) string {
			if f := openrlhfDottedName(strings.TrimPrefix(a, "--")); !strings.Contains(f, " ") {
				return "--" + f
			}
			return a
		})
	}
	e.Msg, e.Hint = flat(e.Msg), flat(e.Hint)
	if f := openrlhfDottedName(e.Key); e.Key != "" && !strings.Contains(f, " ") {
		e.Key = f // a key the reader named itself (a missing --pretrain)
	}
	return err
}
