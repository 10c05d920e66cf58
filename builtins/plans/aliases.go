package plans

import (
	"fmt"

	"github.com/memsh/memsh/sim/units"
	"go.starlark.net/starlark"
)

// Keywords as the trainers' own configs spell them (Hugging Face's
// TrainingArguments, DeepSpeed's config, PEFT's LoraConfig, torch.optim's
// optimizers), which train(), lora() and the optimizers do not take: the
// error's hint names memsh's keyword, or says the setting changes neither
// memory nor a step's time. `memsh check CONFIG` reads such a config as it
// is.

// AliasedKeyword is the error for the first keyword of kwargs that alias
// explains (alias returns its hint, or "" for a keyword it does not know),
// nil when there is none.
func AliasedKeyword(fn string, kwargs []starlark.Tuple, alias func(name, value string) string) error {
	for _, kv := range kwargs {
		name, _ := starlark.AsString(kv[0])
		if h := alias(name, kv[1].String()); h != "" {
			return &units.Error{Msg: fmt.Sprintf("%s: unexpected keyword argument %q", fn, name), Hint: h}
		}
	}
	return nil
}

// TrainAlias is the hint for a trainer's name of a train() keyword
// (sweep()'s axes take it too).
func TrainAlias(name, value string) string {
	switch name {
	case "batch_size", "micro_batch_size", "per_device_train_batch_size", "train_micro_batch_size_per_gpu", "micro_batch":
		return fmt.Sprintf("memsh calls the sequences per GPU per forward batch: batch=%s", value)
	case "seq_len", "seq_length", "max_seq_len", "max_seq_length", "max_length", "sequence_length", "cutoff_len", "sequence_len":
		return fmt.Sprintf("memsh calls the tokens per sequence seq: seq=%s", value)
	case "gradient_accumulation_steps", "grad_accum_steps", "accumulate_grad_batches", "gradient_accumulation":
		return fmt.Sprintf("memsh calls the micro-batches per step grad_accum: grad_accum=%s", value)
	case "gradient_checkpointing", "activation_checkpointing", "enable_activation_checkpointing":
		return `memsh calls it checkpoint: checkpoint="full" (every block), "selective" or checkpoint(...)`
	case "bf16":
		return `precision="bf16-mixed" is TrainingArguments' bf16=True (autocast over fp32 weights); precision="bf16" keeps the weights in bf16`
	case "fp16":
		return `precision="fp16-mixed" is TrainingArguments' fp16=True (autocast and a gradient scaler over fp32 weights)`
	case "load_in_4bit":
		return `quant="nf4" is bitsandbytes' load_in_4bit with bnb_4bit_quant_type "nf4" ("nf4-dq" with double quantization)`
	case "load_in_8bit":
		return `quant="int8" is bitsandbytes' load_in_8bit`
	case "deepspeed", "zero_stage", "fsdp_config", "num_gpus", "world_size", "nproc_per_node":
		return "the layout is one value: parallel=parallel(dp=8, zero=3) or parallel(dp=8, fsdp=True)"
	case "lr", "learning_rate", "num_train_epochs", "epochs", "max_steps", "warmup_steps", "warmup_ratio", "seed", "lr_scheduler_type":
		return "memsh simulates one training step, whose memory and time " + name + " does not change: leave it out"
	}
	return ""
}

// optimizerAlias is the hint for torch.optim's hyperparameters.
func optimizerAlias(name, _ string) string {
	switch name {
	case "lr", "learning_rate", "betas", "beta1", "beta2", "eps", "weight_decay":
		return "the optimizer's " + name + " changes neither its memory nor a step's time: leave it out"
	}
	return ""
}

// loraAlias is the hint for PEFT's LoraConfig names of lora()'s keywords.
func loraAlias(name, value string) string {
	switch name {
	case "r":
		return fmt.Sprintf("memsh calls PEFT's r rank: rank=%s", value)
	case "lora_dropout":
		return fmt.Sprintf("memsh calls PEFT's lora_dropout dropout: dropout=%s", value)
	}
	return ""
}
