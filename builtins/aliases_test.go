package builtins

import (
	"errors"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/units"
)

// TestTrainerKeywordHints checks that a keyword as a trainer's config
// spells it (Hugging Face's TrainingArguments, DeepSpeed, PEFT's
// LoraConfig, torch.optim) is refused with a hint naming memsh's keyword,
// and that what the hint says to write runs.
func TestTrainerKeywordHints(t *testing.T) {
	eval := starEval(t, `m = model("m", embedding(1000, 64), linear(64, 1000, name = "lm_head"))`)
	for _, tc := range []struct{ expr, hint, instead string }{
		{`train(m, seq_len = 128)`, "seq=128", `train(m, seq = 128)`},
		{`train(m, max_seq_length = 128)`, "seq=128", ""},
		{`train(m, seq = 128, per_device_train_batch_size = 4)`, "batch=4", `train(m, seq = 128, batch = 4)`},
		{`train(m, seq = 128, micro_batch_size = 4)`, "batch=4", ""},
		{`train(m, seq = 128, gradient_accumulation_steps = 8)`, "grad_accum=8", `train(m, seq = 128, grad_accum = 8)`},
		{`train(m, seq = 128, gradient_checkpointing = True)`, `checkpoint="full"`, `train(m, seq = 128, checkpoint = "full")`},
		{`train(m, seq = 128, bf16 = True)`, `precision="bf16-mixed"`, `train(m, seq = 128, precision = "bf16-mixed")`},
		{`train(m, seq = 128, fp16 = True)`, `precision="fp16-mixed"`, `train(m, seq = 128, precision = "fp16-mixed")`},
		{`train(m, seq = 128, load_in_4bit = True)`, `quant="nf4"`, ""},
		{`train(m, seq = 128, deepspeed = "ds.json")`, "parallel=parallel(", ""},
		{`train(m, seq = 128, learning_rate = 2e-5)`, "leave it out", ""},
		{`train(m, seq = 128).replace(max_length = 256)`, "seq=256", `train(m, seq = 128).replace(seq = 256)`},
		{`adamw(lr = 1e-4)`, "leave it out", `adamw()`},
		{`adamw(weight_decay = 0.1, betas = (0.9, 0.95))`, "leave it out", ""},
		{`sgd(lr = 0.1, momentum = 0.9)`, "leave it out", `sgd(momentum = 0.9)`},
		{`lora(r = 16)`, "rank=16", `lora(rank = 16)`},
		{`lora(rank = 16, lora_dropout = 0.05)`, "dropout=0.05", `lora(rank = 16, dropout = 0.05)`},
		{`search(m, gpus = 2, seq = 128, batch = [1, 2])`, "micro_batch=[1, 2]", `search(m, gpus = 2, seq = 128, global_batch = 4, micro_batch = [1, 2])`},
		{`search(m, num_gpus = 2, seq = 128)`, "gpus=2", `search(m, gpus = 2, seq = 128, global_batch = 2)`},
		{`search(m, gpus = 2, seq = 128, global_batch_size = 4)`, "global_batch=4", `search(m, gpus = 2, seq = 128, global_batch = 4)`},
		{`search(m, gpus = 2, seq = 128, zero = 3)`, `sharding=["zero3", "fsdp"]`, `search(m, gpus = 2, seq = 128, global_batch = 2, sharding = ["zero3", "fsdp"])`},
		{`search(m, gpus = 2, seq = 128, dp = 2)`, "restrict tp=", ""},
		{`search(m, gpus = 2, seq_len = 128)`, "seq=128", ""},
		{`sweep(train(m, seq = 128), batch_size = [1, 2])`, "batch=[1, 2]", `sweep(train(m, seq = 128), batch = [1, 2])`},
	} {
		_, err := eval(tc.expr)
		var ue *units.Error
		if !errors.As(err, &ue) || !strings.Contains(ue.Hint, tc.hint) ||
			!strings.Contains(ue.Msg, "unexpected keyword argument") && !strings.Contains(ue.Msg, "unknown axis") {
			t.Errorf("%s: got %v, want an unexpected keyword (or axis) with a hint containing %q", tc.expr, err, tc.hint)
		}
		if tc.instead != "" {
			if _, err := eval(tc.instead); err != nil {
				t.Errorf("%s, as the hint writes it: %v", tc.instead, err)
			}
		}
	}
	// A value as a trainer's flag writes it.
	for _, tc := range []struct{ expr, hint, instead string }{
		{`train(m, seq = 128, checkpoint = True)`, `checkpoint="full"`, `train(m, seq = 128, checkpoint = "full")`},
		{`train(m, seq = 128, lora = True)`, "lora=lora()", ""},
		{`simulate(train(m, seq = 128, quant = "4bit"))`, `quant="nf4"`, ""},
		{`simulate(train(m, seq = 128, quant = "load_in_8bit"))`, `quant="int8"`, ""},
	} {
		_, err := eval(tc.expr)
		var ue *units.Error
		if !errors.As(err, &ue) || !strings.Contains(ue.Hint, tc.hint) {
			t.Errorf("%s: got %v, want a hint containing %q", tc.expr, err, tc.hint)
		}
		if tc.instead != "" {
			if _, err := eval(tc.instead); err != nil {
				t.Errorf("%s, as the hint writes it: %v", tc.instead, err)
			}
		}
	}
	// A keyword the function takes is not an alias: sgd's momentum, lora's dropout.
	for _, expr := range []string{`sgd(momentum = 0.9)`, `lora(dropout = 0.1)`, `train(m, seq = 128, batch = 2)`} {
		if _, err := eval(expr); err != nil {
			t.Errorf("%s: %v", expr, err)
		}
	}
}
