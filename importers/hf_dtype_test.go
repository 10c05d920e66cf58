package importers

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHFLoadedDtype: the weights' dtype of a run that does not set one,
// as transformers 4.x (float32) and 5 (the checkpoint's: the model's
// config.json's dtype, or torch_dtype) load it, and a run's own.
func TestHFLoadedDtype(t *testing.T) {
	const args = `{"per_device_train_batch_size": 2, "bf16": true, "gradient_checkpointing": true, "model_name_or_path": "mistralai/Mistral-7B-v0.1"}`
	const v4 = "memsh.transformers=4.57.1"
	for _, tc := range []struct {
		name      string
		model     string // the model's config.json; "" for none (the zoo's model)
		overrides []string
		precision string // train()'s precision=
		hfConfig  string // the model, when --model is given
		note      string // a part of the one note; "" for none
	}{
		{name: "5: torch_dtype", model: `{"torch_dtype": "bfloat16"}`, precision: `"bf16"`, hfConfig: `hf_config("m.json", attn = "sdpa")`},
		{name: "5: dtype", model: `{"dtype": "float16"}`, precision: `"fp16"`, hfConfig: `hf_config("m.json", attn = "sdpa")`},
		{name: "5: float32", model: `{"dtype": "float32"}`, precision: `"bf16-mixed"`},
		{name: "5: dtype wins over torch_dtype", model: `{"dtype": "float32", "torch_dtype": "bfloat16"}`, precision: `"bf16-mixed"`},
		{name: "5: a null dtype is none", model: `{"dtype": null, "torch_dtype": "bfloat16"}`, precision: `"bf16"`},
		{name: "5: Python's Infinity elsewhere", model: "{\"time_step_limit\": [0.0, Infinity],\n \"name\": \"NaN Infinity\", \"torch_dtype\": \"bfloat16\"}", precision: `"bf16"`},
		{name: "5: Mamba-2's config.json, time_step_limit [0.0, Infinity]", model: mambaCodestral(t), precision: `"bf16"`, hfConfig: `hf_config("m.json", attn = "sdpa")`},
		{name: "5: auto", model: `{"torch_dtype": "float16"}`, overrides: []string{"torch_dtype=auto"}, precision: `"fp16"`},
		{name: "5: the run's own dtype wins", model: `{"torch_dtype": "bfloat16"}`, overrides: []string{"dtype=float32"}, precision: `"bf16-mixed"`},
		{name: "5: no dtype in config.json", model: `{"model_type": "mistral"}`, precision: `"bf16-mixed"`,
			note: "torch_dtype: unset, so transformers 5 loads the checkpoint's own dtype (4.x float32: memsh.transformers=4.57.1 says a 4.x run): m.json has no dtype (or torch_dtype), so transformers reads the weights' own"},
		// a zoo model: its checkpoint's dtype, as its Hub config.json says
		// (Mistral-7B-v0.1 bfloat16, Llama-2-7b-hf float16)
		{name: "5: the zoo's model", precision: `"bf16"`},
		{name: "5: auto, the zoo's model", overrides: []string{"torch_dtype=auto"}, precision: `"bf16"`},
		{name: "5: the zoo's Llama 2, float16", overrides: []string{"model_name_or_path=meta-llama/Llama-2-7b-hf"}, precision: `"fp16"`},
		{name: "5: the zoo's Llama 3.2, a run's own float32", overrides: []string{"model_name_or_path=meta-llama/Llama-3.2-1B", "torch_dtype=float32"}, precision: `"bf16-mixed"`},
		{name: "4.x: float32", model: `{"torch_dtype": "bfloat16"}`, overrides: []string{v4}, precision: `"bf16-mixed"`,
			hfConfig: `hf_config("m.json", attn = "sdpa", transformers = "4.57.1")`},
		{name: "4.x: float32, no config.json", overrides: []string{v4}, precision: `"bf16-mixed"`},
		{name: "4.x: auto reads config.json", model: `{"torch_dtype": "bfloat16"}`, overrides: []string{v4, "torch_dtype=auto"}, precision: `"bf16"`},
		{name: "4.x: the run's own dtype", model: `{"torch_dtype": "float32"}`, overrides: []string{"memsh.transformers=4.46.1", "torch_dtype=float16"}, precision: `"fp16"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := defaults(Options{Seq: 512, Overrides: tc.overrides})
			if tc.model != "" {
				o.Model, o.ModelData = "m.json", []byte(tc.model)
			}
			res, err := Import("args.json", []byte(args), o)
			if err != nil {
				t.Fatal(err)
			}
			if want := "precision = " + tc.precision + ","; !strings.Contains(res.Script, want) {
				t.Errorf("want %s in\n%s", want, res.Script)
			}
			if tc.hfConfig != "" && !strings.Contains(res.Script, tc.hfConfig+",\n") {
				t.Errorf("want the model %s in\n%s", tc.hfConfig, res.Script)
			}
			switch {
			case tc.note == "" && len(res.NotModelled) > 0:
				t.Errorf("not modelled: %q, want none", res.NotModelled)
			case tc.note != "" && (len(res.NotModelled) != 1 || !strings.Contains(res.NotModelled[0], tc.note)):
				t.Errorf("not modelled: %q, want one saying %q", res.NotModelled, tc.note)
			}
		})
	}
}

// mambaCodestral is Mamba-Codestral-7B's config.json as the hub has it
// (sim/testdata/hf), "time_step_limit": [0.0, Infinity] among its lines.
func mambaCodestral(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "sim", "testdata", "hf", "mamba-codestral-7b.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "Infinity") {
		t.Fatal("mamba-codestral-7b.json has no Infinity")
	}
	return string(data)
}

func TestHFLoadedDtypeErrors(t *testing.T) {
	const args = `{"per_device_train_batch_size": 2, "bf16": true, "gradient_checkpointing": true, "model_name_or_path": "mistralai/Mistral-7B-v0.1"}`
	model := func(json string) Options { return Options{Seq: 512, Model: "m.json", ModelData: []byte(json)} }
	runErrorCases(t, []errorCase{
		{name: "a dtype memsh does not model", file: "args.json", config: args, opts: model("{\n  \"torch_dtype\": \"float8_e4m3fn\"\n}"),
			want: "m.json:2: key torch_dtype: the model's dtype float8_e4m3fn is not modelled", wantHint: "set torch_dtype (or dtype) in the training config"},
		{name: "dtype not a string", file: "args.json", config: args, opts: model(`{"dtype": 16}`),
			want: "m.json:1: key dtype: want a string, got 16"},
		{name: "auto in config.json", file: "args.json", config: args, opts: model(`{"dtype": "auto"}`),
			want: "m.json:1: key dtype: the model's dtype auto is not modelled"},
		{name: "config.json not JSON", file: "args.json", config: args, opts: model(`{"dtype": `),
			want: "m.json: not a valid JSON object: unexpected EOF"},
		// Python's json writes float('nan') and float('inf') unquoted: a
		// dtype that is one is no dtype memsh models, not an absent one.
		{name: "a NaN dtype", file: "args.json", config: args, opts: model("{\"torch_dtype\": NaN, \"model_type\": \"mamba2\"}"),
			want: "m.json:1: key torch_dtype: the model's dtype NaN is not modelled"},
		{name: "an Infinity dtype", file: "args.json", config: args, opts: model(`{"dtype": -Infinity, "torch_dtype": "bfloat16"}`),
			want: "m.json:1: key dtype: want a string, got -Inf"},
		{name: "fp16 autocast over the checkpoint's bf16", file: "args.json", config: strings.Replace(args, `"bf16"`, `"fp16"`, 1), opts: model(`{"dtype": "bfloat16"}`),
			want: "args.json:1: key fp16: with m.json's dtype bfloat16", wantHint: "use bf16: true"},
		{name: "fp16 autocast over the checkpoint's fp16, every weight trained", file: "args.json", config: strings.Replace(args, `"bf16"`, `"fp16"`, 1), opts: model(`{"dtype": "float16"}`),
			want: "args.json:1: key fp16: with m.json's dtype float16: the GradScaler refuses to unscale fp16 gradients (torch: \"Attempting to unscale FP16 gradients.\")", wantHint: "train LoRA adapters"},
		{name: "a release memsh does not read", file: "args.json", config: args, opts: model(`{"dtype": "bfloat16"}`), overrides: []string{"memsh.transformers=3.36.2"},
			want: "command line: key memsh.transformers: want a transformers 4.x or 5.x release, got 3.36.2", wantHint: "memsh.transformers=4.57.1"},
		{name: "a release after the newest memsh has read", file: "args.json", config: args, overrides: []string{"memsh.transformers=5.26.0"}, opts: Options{Seq: 512},
			want: "command line: key memsh.transformers: transformers 5.26.0 is newer than the releases memsh models", wantHint: "memsh.transformers=5.25.0"},
		{name: "a release that is no version", file: "args.json", config: args, overrides: []string{"memsh.transformers=latest"}, opts: Options{Seq: 512},
			want: "command line: key memsh.transformers: want a transformers 4.x or 5.x release, got latest", wantHint: "pip show transformers"},
		{name: "a release read as a number", file: "args.json", config: args, overrides: []string{"memsh.transformers=4.50"}, opts: Options{Seq: 512},
			want: "command line: key memsh.transformers: want a transformers release such as 4.57.1, got 4.5", wantHint: "whole release"},
		{name: "the run's unknown dtype", file: "args.json", config: args, overrides: []string{"dtype=half"}, opts: Options{Seq: 512},
			want: "command line: key dtype: unknown dtype half", wantHint: "bfloat16"},
	})
}

// TestHFFP16OverFP16LoRA: fp16 autocast over a float16 checkpoint is the
// Trainer's usual LoRA run (the adapters fp32, their gradients
// unscaled), not refused as it is when every weight trains.
func TestHFFP16OverFP16LoRA(t *testing.T) {
	const args = `{"per_device_train_batch_size": 2, "fp16": true, "gradient_checkpointing": true, "model_name_or_path": "mistralai/Mistral-7B-v0.1",
		"use_peft": true, "lora_r": 16, "lora_alpha": 32, "lora_target_modules": ["q_proj", "v_proj"]}`
	o := defaults(Options{Seq: 512, Model: "m.json", ModelData: []byte(`{"dtype": "float16"}`)})
	res, err := Import("args.json", []byte(args), o)
	if err != nil {
		t.Fatal(err)
	}
	if want := `precision = "fp16",`; !strings.Contains(res.Script, want) {
		t.Errorf("want %s in\n%s", want, res.Script)
	}
}
