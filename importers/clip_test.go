package importers

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestClipDefaults imports each reader's config with its clipping key
// left to the trainer's default or set, and checks the plan's
// clip_grad_norm (clip.go): the Hugging Face Trainer's max_grad_norm 1.0
// (TRL, Axolotl, LLaMA-Factory through it; DeepSpeed's gradient_clipping
// under it), DeepSpeed's gradient_clipping 1.0, OpenRLHF's --max_norm
// 1.0, torchtitan's training.max_norm 1.0, torchtune's clip_grad_norm
// None, anemoi-training's gradient_clip (value clipping, noted).
func TestClipDefaults(t *testing.T) {
	model := func(name string) []byte {
		data, err := os.ReadFile(filepath.Join("..", "sim", "testdata", "hf", name))
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	readDS := func(name string) ([]byte, error) { return os.ReadFile(filepath.Join("testdata", "deepspeed", name)) }
	hfOpts := func(over ...string) Options { return Options{Overrides: over} }
	dsOpts := func(over ...string) Options {
		return Options{Model: "llama-2-7b.json", ModelData: model("llama-2-7b.json"), Seq: 512, GPUs: 8, GPU: "A100-40GB", Overrides: over}
	}
	llama3 := func(over ...string) Options {
		return Options{Model: "llama-3-8b.json", ModelData: model("llama-3-8b.json"), Overrides: over}
	}
	qwen3 := func(over ...string) Options {
		return Options{Model: "qwen3-8b.json", ModelData: model("qwen3-8b.json"), Overrides: append([]string{"deepspeed=null"}, over...)}
	}
	openrlhf := func(over ...string) Options {
		return Options{GPUs: 8, Model: "config.json", ModelData: model("llama-3-8b.json"), Overrides: over}
	}
	titan := func(over ...string) Options { return Options{GPU: "A100-80GB", GPUs: 8, Nodes: 8, Overrides: over} }
	tune := func(over ...string) Options { return Options{Seq: 2048, Overrides: over} }
	anemoi := func(over ...string) Options {
		return Options{GPU: "H200", Overrides: append(append([]string{}, brisSizes...), over...), Getenv: getenv(brisEnv)}
	}
	swiftDense := func(over ...string) Options {
		return Options{GPUs: 2, Model: "dense.json", ModelData: model("qwen2.5-14b.json"), Overrides: over}
	}
	const hfZero = "max_grad_norm: 0 clips nothing, but the Trainer of transformers 5.5.0 on"
	const anemoiValue = "training.gradient_clip.algorithm: value, Lightning's clip_grad_value_"
	for _, tc := range []struct {
		name, file string
		opts       Options
		want       string // the plan's clip_grad_norm, "" for none
		note       string // a part of a not-modelled line, "" for none about clipping
	}{
		{"HF: TrainingArguments' max_grad_norm 1.0", "hf/zephyr_sft_full.yaml", hfOpts(), "1.0", ""},
		{"HF: max_grad_norm set", "hf/zephyr_sft_full.yaml", hfOpts("max_grad_norm=0.3"), "0.3", ""},
		{"HF: max_grad_norm 0 under transformers 5, its norm still taken", "hf/zephyr_sft_full.yaml", hfOpts("max_grad_norm=0"), "", hfZero},
		{"HF: max_grad_norm 0 under transformers 4.57.1: nothing", "hf/zephyr_sft_full.yaml", hfOpts("max_grad_norm=0", "memsh.transformers=4.57.1"), "", ""},
		{"HF: a number written as a string (a shell variable)", "hf/zephyr_sft_full.yaml", hfOpts(`max_grad_norm="2"`), "2.0", ""},
		{"HF under DeepSpeed: no gradient_clipping in its config, DeepSpeed's 1.0 whatever max_grad_norm", "hf/zephyr_sft_full.yaml",
			Options{GPUs: 8, Overrides: []string{"deepspeed=autotuning_z3.json", "max_grad_norm=0.5"}, ReadFile: readDS}, "1.0", ""},
		{"HF under DeepSpeed: gradient_clipping auto takes max_grad_norm", "hf/zephyr_sft_full.yaml",
			Options{GPUs: 8, Overrides: []string{"deepspeed.train_micro_batch_size_per_gpu=auto", "deepspeed.zero_optimization.stage=2",
				"deepspeed.gradient_clipping=auto", "max_grad_norm=0.5"}}, "0.5", ""},
		{"Axolotl: max_grad_norm unset, the Trainer's 1.0", "axolotl/llama3_qlora.yml", llama3(), "1.0", ""},
		{"Axolotl: max_grad_norm set", "axolotl/llama3_qlora.yml", llama3("max_grad_norm=0.7"), "0.7", ""},
		{"LLaMA-Factory: the Trainer's 1.0", "llamafactory/qwen3_lora_sft.yaml", qwen3(), "1.0", ""},
		{"LLaMA-Factory: max_grad_norm 0", "llamafactory/qwen3_lora_sft.yaml", qwen3("max_grad_norm=0"), "", hfZero},
		{"DeepSpeed: gradient_clipping 1.0 by default (v0.19.3 on)", "deepspeed/zero_infinity_config_json.json", dsOpts(), "1.0", ""},
		{"DeepSpeed: gradient_clipping 0", "deepspeed/alpaca_lora_zero3.json", dsOpts("gradient_clipping=0"), "", ""},
		{"DeepSpeed: gradient_clipping set", "deepspeed/alpaca_lora_zero3.json", dsOpts("gradient_clipping=0.25"), "0.25", ""},
		{"OpenRLHF: --max_norm 1.0", "openrlhf/train_sft.sh", openrlhf(), "1.0", ""},
		{"OpenRLHF: --max_norm 0", "openrlhf/train_sft.sh", openrlhf("max_norm=0"), "", ""},
		{"torchtitan: training.max_norm 1.0", "torchtitan/llama3_8b.toml", titan(), "1.0", ""},
		{"torchtitan: training.max_norm set", "torchtitan/llama3_8b.toml", titan("training.max_norm=2"), "2.0", ""},
		{"torchtitan: the optimizer stepped in backward frees the gradients first", "torchtitan/llama3_8b.toml",
			Options{GPUs: 8, Overrides: []string{"optimizer.early_step_in_backward=true"}}, "", ""},
		{"torchtune: clip_grad_norm null", "torchtune/llama3_1_8B_full_single_device.yaml", tune(), "", ""},
		{"torchtune: clip_grad_norm set", "torchtune/llama3_1_8B_full_single_device.yaml", tune("optimizer_in_bwd=False", "clip_grad_norm=1.5"), "1.5", ""},
		{"torchtune: clip_grad_norm inf logs the norm", "torchtune/llama3_1_8B_full_single_device.yaml", tune("optimizer_in_bwd=False", "clip_grad_norm=inf"), "", "clip_grad_norm: inf logs the norm"},
		{"anemoi: value clipping at 32, noted", "anemoi/finetune.yaml", anemoi(), "", anemoiValue},
		{"anemoi: norm clipping", "anemoi/finetune.yaml", anemoi("training.gradient_clip.algorithm=norm"), "32.0", ""},
		{"Megatron-LM: --clip-grad 1.0", "megatron/train_llama3_8b_h100_fp8.sh", Options{GPUs: 8}, "1.0", ""},
		{"Megatron-LM: --clip-grad 0", "megatron/train_llama3_8b_h100_fp8.sh", Options{GPUs: 8, Overrides: []string{"clip-grad=0"}}, "", ""},
		{"Megatron-LM: --clip-grad set", "megatron/train_llama3_8b_h100_fp8.sh", Options{GPUs: 8, Overrides: []string{"clip-grad=0.5"}}, "0.5", ""},
		{"Megatron-SWIFT: clip_grad 1.0", "swift/megatron_torchrun.sh", swiftDense(), "1.0", ""},
		{"Megatron-SWIFT: --clip_grad 0", "swift/megatron_torchrun.sh", swiftDense("clip_grad=0"), "", ""},
		{"anemoi: val 0 clips nothing", "anemoi/finetune.yaml", anemoi("training.gradient_clip.val=0"), "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			res, err := Import(tc.file, data, defaults(tc.opts))
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if m := regexp.MustCompile(`clip_grad_norm = ([^,\n]+)`).FindStringSubmatch(res.Script); m != nil {
				got = m[1]
			}
			if got != tc.want {
				t.Errorf("clip_grad_norm %q, want %q", got, tc.want)
			}
			clipNotes := slices.DeleteFunc(slices.Clone(res.NotModelled), func(n string) bool { return !strings.Contains(n, "clip") })
			switch {
			case tc.note == "" && len(clipNotes) > 0:
				t.Errorf("notes %q, want none on clipping", clipNotes)
			case tc.note != "" && !slices.ContainsFunc(clipNotes, func(n string) bool { return strings.Contains(n, tc.note) }):
				t.Errorf("notes %q, want one saying %q", clipNotes, tc.note)
			}
			for _, k := range res.Unknown {
				if strings.Contains(k, "clip") || strings.Contains(k, "norm") {
					t.Errorf("%s left not understood", k)
				}
			}
		})
	}
}

func TestClipErrors(t *testing.T) {
	const hf = `{"per_device_train_batch_size": 4, "bf16": true, "max_length": 512, "model_name_or_path": "mistralai/Mistral-7B-v0.1"`
	const tune = "model:\n  _component_: torchtune.models.llama3_2.llama3_2_1b\nbatch_size: 1\n"
	const hint = "a finite max norm such as 1.0, or 0 to clip nothing"
	runErrorCases(t, []errorCase{
		{name: "Megatron-LM: a negative --clip-grad", file: "run.sh", config: "torchrun pretrain_gpt.py --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 128 --max-position-embeddings 128 --vocab-size 1024 --micro-batch-size 1 --clip-grad -1\n",
			want: "run.sh: key clip-grad: want a max gradient norm >= 0, got -1", wantHint: hint},
		{name: "HF: a negative max_grad_norm", file: "args.json", config: hf + `, "max_grad_norm": -1}`,
			want: "args.json:1: key max_grad_norm: want a max gradient norm >= 0, got -1", wantHint: hint},
		{name: "HF: max_grad_norm not a number", file: "args.json", config: hf + `, "max_grad_norm": "big"}`,
			want: "args.json:1: key max_grad_norm: want a max gradient norm >= 0, got big", wantHint: hint},
		{name: "HF: max_grad_norm a bool", file: "args.json", config: hf + `, "max_grad_norm": true}`,
			want: "args.json:1: key max_grad_norm: want a max gradient norm >= 0, got true", wantHint: hint},
		{name: "HF: max_grad_norm infinite", file: "args.json", config: hf + `, "max_grad_norm": "inf"}`,
			want: "args.json:1: key max_grad_norm: want a max gradient norm >= 0, got inf", wantHint: hint},
		{name: "HF: an inline DeepSpeed config's gradient_clipping at odds with max_grad_norm", file: "args.json",
			config: hf + `, "gradient_checkpointing": true, "max_grad_norm": 0.5, "deepspeed": {"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto", "gradient_clipping": 1.0, "zero_optimization": {"stage": 2}}}`,
			want:   "args.json:1: key deepspeed.gradient_clipping: 1, and the Trainer's max_grad_norm 0.5", wantHint: "the Trainer refuses the mismatch"},
		{name: "DeepSpeed: a negative gradient_clipping", file: "ds.json", config: `{"train_micro_batch_size_per_gpu": 1, "gradient_clipping": -0.5}`,
			opts: Options{Model: "llama-2-7b.json", ModelData: []byte(`{"model_type": "llama"}`), Seq: 8},
			want: "ds.json:1: key gradient_clipping: want a max gradient norm >= 0, got -0.5", wantHint: hint},
		{name: "torchtitan: max_norm 0 zeroes the gradients", file: "t.toml", config: "[model]\nname = \"llama3\"\nflavor = \"8B\"\n[training]\nseq_len = 8\nmax_norm = 0\n",
			want: "t.toml: key training.max_norm: 0 scales every gradient to 0 (torchtitan has no switch to clip nothing)", wantHint: "a max norm such as 1.0"},
		{name: "torchtune: clip_grad_norm 0", file: "r.yaml", config: tune + "clip_grad_norm: 0\n", opts: Options{Seq: 8},
			want: "r.yaml:4: key clip_grad_norm: 0 scales every gradient to 0 (clip_grad_norm_ with max_norm 0)", wantHint: "null clips nothing"},
		{name: "torchtune: clip_grad_norm not a number", file: "r.yaml", config: tune + "clip_grad_norm: [1]\n", opts: Options{Seq: 8},
			want: "r.yaml:4: key clip_grad_norm: want a max gradient norm >= 0, got a list", wantHint: hint},
	})
}
