package importers

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// assumed is the note of the release a flat script is read as.
func assumed(release, why, pin, from, to string) string {
	return "memsh.openrlhf: OpenRLHF " + release + " assumed, " + why + " (its defaults, its transformers " + pin +
		"): memsh.openrlhf= names another of the releases that take these arguments, " + from + " to " + to
}

// TestOpenRLHFFlat imports OpenRLHF's examples/scripts at flat releases
// (testdata/README.md: v0.9.1, v0.10.1.post2, v0.6.4, v0.5.0) against
// plans written by hand, as TestOpenRLHF does at v0.11.0: the same plan
// but for the transformers release the assumed OpenRLHF release pins
// (requirements.txt at its tag), the notes naming the flat arguments.
func TestOpenRLHFFlat(t *testing.T) {
	llama := map[string]string{"config.json": "../../sim/testdata/hf/llama-3-8b.json"}
	mixtral := map[string]string{"config.json": "../../sim/testdata/hf/mixtral-8x7b-v0.1.json"}
	sft := func(pin string) string {
		return `hf_config("config.json", attn = "flash", transformers = "` + pin + `", loss = "flash_cross_entropy", forward_upcast = True), keep_logits = "next"`
	}
	const contiguous = "deepspeed.zero_optimization.contiguous_gradients: the contiguous gradient buffer (on by default)"
	const z3 = "deepspeed.zero_optimization.reduce_scatter: ZeRO's all-gather bucket, reuse distance and sub-groups (memsh replays reduce_bucket_size, the stage-3 prefetch bucket, persistence threshold and live parameters, not these)"
	const overlap = "deepspeed.zero_optimization.overlap_comm: the overlapped reduction's extra buffers (on by default at stage 3)"
	runImportCases(t, []importCase{{
		// --bf16 (up to 0.9.1.post1) beside --attn_implementation (0.8.10 on)
		name: "v0.9.1 full SFT of Llama 3 8B, ZeRO-2, packed (train_sft_llama.sh)",
		file: "openrlhf/v0.9.1_train_sft_llama.sh",
		opts: openrlhfModelOpts(t, 8, "llama-3-8b.json"),
		step: openrlhfStep(256, 2048),
		notModelled: []string{
			assumed("0.9.1.post1", "the newest release whose train_sft.py takes --bf16", "4.57.3", "0.8.10", "0.9.1.post1"),
			"packing_samples: a micro-batch's 2 samples in one row of their own tokens, at most 4096: memsh replays 4096, attention causal over the whole row (flash's varlen kernel attends within each sample: less time)",
			contiguous,
		},
		files: llama,
		hand: `plan = train(` + sft("4.57.3") + `, batch = 1, seq = 4096, grad_accum = 16,
             checkpoint = "full", precision = "bf16-mixed", optimizer = adamw(fused = True), parallel = parallel(dp = 8, zero = 2), gpu = "H100-80GB", clip_grad_norm = 1.0)`,
	}, {
		name: "v0.9.1 full DPO of Llama 3 8B, ZeRO-3, packed (train_dpo_llama.sh)",
		file: "openrlhf/v0.9.1_train_dpo_llama.sh",
		opts: openrlhfModelOpts(t, 8, "llama-3-8b.json"),
		step: openrlhfStep(2*256, 8192),
		notModelled: []string{
			assumed("0.9.1.post1", "the newest release whose train_dpo.py takes --bf16", "4.57.3", "0.8.10", "0.9.1.post1"),
			"packing_samples: a micro-batch's 2 chosen and rejected rows in one row of their own tokens, at most 16384: memsh replays 2 rows of 8192 (the same tensors when every row is full), attention causal over each",
			z3, overlap, contiguous,
		},
		files: llama,
		hand: `plan = train(hf_config("config.json", attn = "flash", transformers = "4.57.3"), preference = dpo(trainer = "openrlhf"),
             batch = 1, seq = 8192, grad_accum = 32, checkpoint = "full",
             precision = "bf16-mixed", optimizer = adamw(fused = True), parallel = parallel(dp = 8, zero = 3), clip_grad_norm = 1.0, gpu = "H100-80GB")`,
	}, {
		name: "v0.10.1.post2 LoRA on Mixtral 8x7B, ZeRO-3, packed (train_sft_mixtral_lora.sh)",
		file: "openrlhf/v0.10.1.post2_train_sft_mixtral_lora.sh",
		opts: openrlhfModelOpts(t, 8, "mixtral-8x7b-v0.1.json"),
		step: openrlhfStep(128, 2048),
		notModelled: []string{
			assumed("0.10.1.post2", "the last release before the dotted names", "5.5.4", "0.9.2", "0.10.1.post2"),
			"aux_loss_coef: a MoE model's load-balancing loss over the router logits it returns (Actor sets output_router_logits for every model that has it)",
			"packing_samples: a micro-batch's 4 samples in one row of their own tokens, at most 8192: memsh replays 8192, attention causal over the whole row (flash's varlen kernel attends within each sample: less time)",
			z3, overlap, contiguous,
		},
		files: mixtral,
		hand: `plan = train(` + sft("5.5.4") + `, lora = lora(rank = 64, alpha = 64, targets = ["all-linear"], dropout = 0.0),
             batch = 1, seq = 8192, grad_accum = 4, checkpoint = checkpoint("full", input_requires_grad = True),
             precision = "bf16-mixed", optimizer = adamw(fused = True), parallel = parallel(dp = 8, zero = 3), gpu = "H100-80GB", clip_grad_norm = 1.0)`,
	}, {
		// a v0.6.4 script: --flash_attn bounds it to 0.8.9.post1, whose
		// loop memsh replays (memsh.openrlhf=0.6.4 is refused)
		name: "v0.6.4 full SFT of Llama 3 8B, ZeRO-2, unpacked (train_sft_llama.sh)",
		file: "openrlhf/v0.6.4_train_sft_llama.sh",
		opts: openrlhfModelOpts(t, 8, "llama-3-8b.json"),
		step: openrlhfStep(256, 2048),
		notModelled: []string{
			assumed("0.8.9.post1", "the newest release whose train_sft.py takes --flash_attn", "4.54.1", "0.7.0", "0.8.9.post1"),
			"max_len: unpacked rows are padded to the batch's longest, at most 2048 tokens: memsh replays rows of 2048 (--seq N for another length)",
			contiguous,
		},
		files: llama,
		hand: `plan = train(` + sft("4.54.1") + `, batch = 2, seq = 2048, grad_accum = 16,
             checkpoint = "full", precision = "bf16-mixed", optimizer = adamw(fused = True), parallel = parallel(dp = 8, zero = 2), gpu = "H100-80GB", clip_grad_norm = 1.0)`,
	}, {
		name: "v0.5.0 full DPO of Llama 3 8B, ZeRO-3, unpacked (train_dpo_llama.sh)",
		file: "openrlhf/v0.5.0_train_dpo_llama.sh",
		opts: openrlhfModelOpts(t, 8, "llama-3-8b.json"),
		step: openrlhfStep(2*256, 8192),
		notModelled: []string{
			assumed("0.8.9.post1", "the newest release whose train_dpo.py takes --flash_attn", "4.54.1", "0.7.0", "0.8.9.post1"),
			"max_len: unpacked rows are padded to the batch's longest, at most 8192 tokens: memsh replays rows of 8192 (--seq N for another length)",
			z3, overlap, contiguous,
		},
		files: llama,
		hand: `plan = train(hf_config("config.json", attn = "flash", transformers = "4.54.1"), preference = dpo(trainer = "openrlhf"),
             batch = 1, seq = 8192, grad_accum = 32, checkpoint = "full",
             precision = "bf16-mixed", optimizer = adamw(fused = True), parallel = parallel(dp = 8, zero = 3), clip_grad_norm = 1.0, gpu = "H100-80GB")`,
	}})
}

// TestOpenRLHFFlatScript holds the generated Starlark of v0.9.1's
// train_sft_llama.sh changed one argument or the release at a time: the
// release's defaults where they differ, and flat overrides.
func TestOpenRLHFFlatScript(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "openrlhf", "v0.9.1_train_sft_llama.sh"))
	if err != nil {
		t.Fatal(err)
	}
	base := string(data)
	edit := func(old, new string) string {
		if !strings.Contains(base, old) {
			t.Fatalf("train_sft_llama.sh has no %q", old)
		}
		return strings.Replace(base, old, new, 1)
	}
	for _, tc := range []struct {
		name, script string
		overrides    []string
		want, not    []string // in the script, and not in it
		note         string   // the note of the release assumed (its start), "-" for none
	}{
		{name: "as it is", script: base, want: []string{`transformers = "4.57.3"`, `attn = "flash"`, "parallel = parallel(dp = 8, zero = 2)"},
			note: "memsh.openrlhf: OpenRLHF 0.9.1.post1 assumed"},
		{name: "the release named", script: base, overrides: []string{"memsh.openrlhf=0.8.10"}, want: []string{`transformers = "4.55.2"`}, note: "-"},
		{name: "the release and transformers named", script: base, overrides: []string{"memsh.openrlhf=0.9.0", "memsh.transformers=4.57.1"}, want: []string{`transformers = "4.57.1"`}, note: "-"},
		// v0.8.9's Actor: eager attention without --flash_attn (unpacked)
		{name: "0.8.9 without --flash_attn", script: edit("   --attn_implementation flash_attention_2 \\\n   --learning_rate 5e-6 \\\n   --load_checkpoint \\\n   --packing_samples \\\n", "   --load_checkpoint \\\n"),
			overrides: []string{"memsh.openrlhf=0.8.9"}, want: []string{`attn = "eager"`, `transformers = "4.54.1"`, "batch = 2,"}},
		{name: "0.8.9 packed without --flash_attn", script: edit("   --attn_implementation flash_attention_2 \\\n", ""),
			overrides: []string{"memsh.openrlhf=0.8.9"}, want: []string{`attn = "flash"`, "seq = 4096,"}},
		{name: "--flash_attn", script: edit("--attn_implementation flash_attention_2", "--flash_attn"), want: []string{`attn = "flash"`, `transformers = "4.54.1"`},
			note: "memsh.openrlhf: OpenRLHF 0.8.9.post1 assumed, the newest release whose train_sft.py takes --flash_attn"},
		// 0.9.2 and later: --param_dtype, bf16 by default
		{name: "no dtype at 0.10.1", script: edit("   --bf16 \\\n", ""), want: []string{`precision = "bf16-mixed"`, `transformers = "5.5.4"`},
			note: "memsh.openrlhf: OpenRLHF 0.10.1.post2 assumed, the last release before the dotted names"},
		{name: "--param_dtype fp16", script: edit("--bf16", "--param_dtype fp16"), want: []string{`precision = "fp16-mixed"`}},
		{name: "flat overrides", script: base, overrides: []string{"zero_stage=3", "adam_offload=true", "micro_train_batch_size=4"},
			want: []string{"parallel = parallel(dp = 8, zero = 3)", `offload = offload(optimizer = "cpu")`, "grad_accum = 8,", "seq = 8192,"}},
		{name: "LoRA", script: edit("--zero_stage 2", "--zero_stage 2 --lora_rank 16 --lora_alpha 32 --target_modules q_proj v_proj --lora_dropout 0.05"),
			want: []string{`lora = lora(rank = 16, alpha = 32, targets = ["q", "v"], dropout = 0.05)`}},
		{name: "reentrant, grad_accum_dtype, overlap", script: edit("--zero_stage 2", "--zero_stage 2 --gradient_checkpointing_use_reentrant --grad_accum_dtype fp32 --overlap_comm"),
			want: []string{`checkpoint = checkpoint("full", reentrant = True)`, `precision = precision(params = "bf16", grads = "fp32", master = "fp32")`, "overlap_comm = True"}},
		{name: "the advice names the flat arguments", script: base, want: []string{`"checkpoint": "gradient_checkpointing"`}},
		{name: "no checkpointing", script: edit(" \\\n   --gradient_checkpointing", ""), not: []string{"checkpoint ="}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := openrlhfModelOpts(t, 8, "llama-3-8b.json")
			o.Top = 5
			o.Overrides = tc.overrides
			res, err := Import("train_sft_llama.sh", []byte(tc.script), defaults(o))
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Unknown) > 0 {
				t.Errorf("not understood: %q", res.Unknown)
			}
			for _, w := range tc.want {
				if !strings.Contains(res.Script, w) {
					t.Errorf("the script has no %q:\n%s", w, res.Script)
				}
			}
			for _, w := range tc.not {
				if strings.Contains(res.Script, w) {
					t.Errorf("the script has %q:\n%s", w, res.Script)
				}
			}
			first := ""
			if len(res.NotModelled) > 0 && strings.HasPrefix(res.NotModelled[0], "memsh.openrlhf") {
				first = res.NotModelled[0]
			}
			if (tc.note == "-" && first != "") || (tc.note != "-" && !strings.HasPrefix(first, tc.note)) {
				t.Errorf("notes %q, want the first %q...", res.NotModelled, tc.note)
			}
		})
	}
}

// TestOpenRLHFFlatErrors: flat scripts memsh does not read, each refused
// at the argument the script names, with its line and a hint.
func TestOpenRLHFFlatErrors(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "openrlhf", "v0.9.1_train_sft_llama.sh"))
	if err != nil {
		t.Fatal(err)
	}
	base := string(data)
	edit := func(old, new string) string {
		if !strings.Contains(base, old) {
			t.Fatalf("train_sft_llama.sh has no %q", old)
		}
		return strings.Replace(base, old, new, 1)
	}
	for _, tc := range []struct {
		name, script string
		overrides    []string
		want, hint   string
	}{
		{"flat beside dotted", edit("--zero_stage 2", "--zero_stage 2 --ds.adam_offload"), nil,
			"key attn_implementation: is OpenRLHF's flat argument (before v0.10.2), beside its dotted --ds.adam_offload (v0.10.2 and later): no release takes both", "--adam_offload (before v0.10.2)"},
		{"before 0.7.0", readOpenRLHF(t, "v0.6.4_train_sft_llama.sh"), []string{"memsh.openrlhf=0.6.4"}, "key memsh.openrlhf: OpenRLHF 0.6.4 is not modelled: before 0.7.0 the SFT loop scores output.logits with GPTLMLoss", "memsh.openrlhf=0.10.1.post2"},
		{"only before 0.7.0", edit("--zero_stage 2", "--zero_stage 2 --disable_trace_cache"), nil, "no OpenRLHF release's train_sft.py takes both --attn_implementation (0.8.10 and later) and --disable_trace_cache (up to 0.5.4)", "one release"},
		{"a v0.5 flag, v0.5 named", edit("--attn_implementation flash_attention_2", "--flash_attn --disable_trace_cache"), []string{"memsh.openrlhf=0.5.4"}, "key memsh.openrlhf: OpenRLHF 0.5.4 is not modelled", "0.7.0 to 0.10.1"},
		{"a release without the flag", base, []string{"memsh.openrlhf=0.10.1"}, "key bf16: OpenRLHF 0.10.1's train_sft.py has no --bf16 (argparse stops at it)", "memsh.openrlhf=0.9.1.post1"},
		{"--bf16 and --param_dtype", edit("--bf16", "--bf16 --param_dtype bf16"), nil, "no OpenRLHF release's train_sft.py takes both --param_dtype (0.9.2 and later) and --bf16 (up to 0.9.1.post1)", ""},
		{"no --bf16 before 0.9.2", edit("   --bf16 \\\n", ""), []string{"memsh.openrlhf=0.9.1"}, "key pretrain: without --bf16, OpenRLHF 0.9.1 loads the model in its checkpoint's dtype", "--bf16"},
		{"a dotted release on a flat script", base, []string{"memsh.openrlhf=0.11.0"}, "key memsh.openrlhf: OpenRLHF 0.11.0 takes the dotted arguments", "before 0.10.2"},
		{"a flat release on a dotted script", readOpenRLHF(t, "train_sft.sh"), []string{"memsh.openrlhf=0.9.1"}, "key memsh.openrlhf: OpenRLHF 0.9.1 takes the flat arguments", "leave it out"},
		{"a release not out", readOpenRLHF(t, "train_sft.sh"), []string{"memsh.openrlhf=0.12.0"}, "key memsh.openrlhf: OpenRLHF 0.12.0 is newer than the releases memsh reads", "0.11.0"},
		{"a release as a number", base, []string{"memsh.openrlhf=0.9"}, "key memsh.openrlhf: want a release such as 0.9.1, got 0.9", "pip show openrlhf"},
		{"a release misspelt", base, []string{"memsh.openrlhf=0.9.1-rc1"}, "want a release such as 0.9.1 or 0.10.1.post2, got 0.9.1-rc1", ""},
		{"torch_compile", edit("--attn_implementation flash_attention_2", "--flash_attn --torch_compile"), nil, "key torch_compile: torch.compile of the model is not modelled", "leave it out"},
		{"ZeRO stage out of range", edit("--zero_stage 2", "--zero_stage 4"), nil, "key zero_stage: 4 is out of range", ""},
		{"a batch that does not divide", edit("--train_batch_size 256", "--train_batch_size 100"), nil, "key train_batch_size: 100 does not divide into micro batches of 2 on 8 GPUs", "a multiple of --micro_train_batch_size x GPUs"},
		{"a negative max_len", edit("--max_len 2048", "--max_len -5"), nil, "key max_len:", ""},
		{"QLoRA", edit("--zero_stage 2", "--zero_stage 2 --load_in_4bit --lora_rank 8"), nil, "key load_in_4bit: OpenRLHF's QLoRA", "nf4-dq"},
		{"ring attention", edit("--zero_stage 2", "--zero_stage 2 --ring_attn_size 2"), nil, "key ring_attn_size: ring attention over 2 GPUs", ""},
		{"AutoTP", edit("--zero_stage 2", "--zero_stage 2 --ds_tensor_parallel_size 2"), nil, "key ds_tensor_parallel_size: DeepSpeed's AutoTP over 2 GPUs", ""},
		{"fp32 weights", edit("--bf16", "--param_dtype fp32"), nil, "key param_dtype: unknown dtype fp32", "bf16 or fp16"},
		{"no model", edit("--pretrain meta-llama/Meta-Llama-3-8B", ""), nil, "key pretrain: missing", "--pretrain meta-llama/Meta-Llama-3-8B"},
		{"LoRA targets not names", edit("--zero_stage 2", "--zero_stage 2 --lora_rank 8 --target_modules 1 2"), nil, "key target_modules: want a list of names, got an item 1", ""},
		{"packed rows out of range", edit("--max_len 2048", "--max_len 16777216"), nil, "key packing_samples: a row of 33554432 tokens", "a shorter --max_len or a smaller --micro_train_batch_size"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := defaults(openrlhfModelOpts(t, 8, "llama-3-8b.json"))
			o.Overrides = tc.overrides
			_, err := Import("r.sh", []byte(tc.script), o)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("got %v, want an *Error", err)
			}
			if !strings.Contains(e.Error(), tc.want) {
				t.Errorf("got %q, want %q", e.Error(), tc.want)
			}
			if !strings.Contains(e.Hint, tc.hint) {
				t.Errorf("hint %q, want %q", e.Hint, tc.hint)
			}
		})
	}
}

func readOpenRLHF(t *testing.T, name string) string {
	t.Helper()
	d, err := os.ReadFile(filepath.Join("testdata", "openrlhf", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(d)
}

// TestOpenRLHFFlatArguments gives train_sft.py and train_dpo.py each flat
// argument their argparse took at v0.7.0 to v0.10.1.post2
// (testdata/openrlhf/flat_args.tsv, read from every tag), alone beside
// --pretrain, at the last release that takes it: each is read, of no
// effect, listed not modelled, or refused naming itself, never left not
// understood; and each is in the renaming table or spelt alike by the
// dotted releases.
func TestOpenRLHFFlatArguments(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "openrlhf", "flat_args.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 5 {
			t.Fatalf("line %q: want 5 fields", line)
		}
		entry, name, release, kind, def := f[0], f[1], f[2], f[3], strings.Trim(f[4], "'")
		n++
		if openrlhfFlatNames[name] == "" && !openrlhfShared[name] {
			t.Errorf("--%s (%s): in neither openrlhfFlatNames nor openrlhfShared", name, entry)
		}
		if name == "pretrain" {
			continue // given
		}
		arg := "--" + name
		switch {
		case kind == "store_true":
		case name == "param_dtype":
			arg += " bf16"
		case name == "adam_betas":
			arg += " 0.9 0.95"
		case name == "grad_accum_dtype":
			arg += " fp32"
		case def != "" && def != "None" && !strings.ContainsAny(def, "(%"):
			arg += " " + def
		case kind == "int":
			arg += " 1"
		case kind == "float":
			arg += " 0.1"
		default:
			arg += " x"
		}
		dtype := "--bf16"
		if !rel(release).less(rel("0.9.2")) {
			dtype = "--param_dtype bf16"
		}
		if name == "bf16" || name == "param_dtype" {
			dtype = ""
		}
		script := "deepspeed --module openrlhf.cli." + entry + " --pretrain meta-llama/Meta-Llama-3-8B " + dtype + " " + arg + "\n"
		o := defaults(openrlhfModelOpts(t, 1, "llama-3-8b.json"))
		o.Overrides = []string{"memsh.openrlhf=" + release}
		res, err := Import("r.sh", []byte(script), o)
		var ie *Error
		switch {
		case errors.As(err, &ie):
			if ie.Key != name {
				t.Errorf("%s %s: the error names %s: %v", entry, arg, ie.Key, err)
			}
		case err != nil:
			t.Errorf("%s %s: %v", entry, arg, err)
		case len(res.Unknown) > 0:
			t.Errorf("%s %s: not understood %q", entry, arg, res.Unknown)
		case slices.ContainsFunc(res.NotModelled, func(s string) bool { return strings.HasPrefix(s, "ds.") || strings.HasPrefix(s, "model.") }):
			t.Errorf("%s %s: a note names the dotted argument: %q", entry, arg, res.NotModelled)
		}
	}
	if n < 140 {
		t.Errorf("%d arguments: want train_sft.py's and train_dpo.py's 148", n)
	}
}

// TestOpenRLHFDottedRelease: memsh.openrlhf on a dotted script (0.10.2 and
// later) sets the transformers release it pins; memsh.transformers wins.
func TestOpenRLHFDottedRelease(t *testing.T) {
	for _, tc := range []struct {
		overrides []string
		want      string
	}{
		{nil, `transformers = "5.15.0"`},
		{[]string{"memsh.openrlhf=0.10.3"}, `transformers = "5.7.0"`},
		{[]string{"memsh.openrlhf=0.10.2"}, `transformers = "5.5.4"`},
		{[]string{"memsh.openrlhf=0.10.3", "memsh.transformers=5.6.0"}, `transformers = "5.6.0"`},
	} {
		o := defaults(openrlhfModelOpts(t, 8, "llama-3-8b.json"))
		o.Overrides = tc.overrides
		res, err := Import("train_sft.sh", []byte(readOpenRLHF(t, "train_sft.sh")), o)
		if err != nil {
			t.Fatalf("%q: %v", tc.overrides, err)
		}
		if !strings.Contains(res.Script, tc.want) {
			t.Errorf("%q: the script has no %q:\n%s", tc.overrides, tc.want, res.Script)
		}
		if slices.ContainsFunc(res.NotModelled, func(s string) bool { return strings.HasPrefix(s, "memsh.openrlhf") }) {
			t.Errorf("%q: a dotted script assumes no release: %q", tc.overrides, res.NotModelled)
		}
	}
}
