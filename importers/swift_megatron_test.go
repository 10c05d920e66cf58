package importers

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// megatronRope is the note every Megatron-SWIFT run gets that leaves
// apply_rope_fusion at ms-swift's default.
const megatronRope = "apply_rope_fusion: false (ms-swift's default): Megatron's unfused rotary embedding (apply_rotary_pos_emb's torch ops), memsh lowers the fused one"

// TestMegatronSwift imports Megatron-SWIFT's scripts (ms-swift v4.5.2's
// examples/megatron, testdata/README.md) and checks each plan against
// one written by hand from MegatronArguments' defaults (swift_megatron.go):
// hf_config of the model under transformers 4.57.1 with Megatron's
// grouped experts, the distributed optimizer, 16 sequences a step, the
// router in fp32, the experts' tensor parallelism 1, packed rows of
// max_length without a mask. The rows' own figures are
// sim/calib_swift_check_test.go's.
func TestMegatronSwift(t *testing.T) {
	moe := map[string]string{"moe.json": "../../sim/testdata/hf/qwen1.5-moe-a2.7b.json"}
	dense := map[string]string{"dense.json": "../../sim/testdata/hf/qwen2.5-14b.json"}
	const moeModel = `hf_config("moe.json", attn = "flash", transformers = "4.57.1", experts = "megatron")`
	runImportCases(t, []importCase{{
		name: "Qwen1.5-MoE pp 2 ep 4, full recompute (megatron/moe/moe.sh)",
		file: "swift/megatron_moe.sh", opts: Options{GPUs: 8, GPU: "A100-80GB", Model: "moe.json"}, files: moe,
		step: megatronStep(16, 8192),
		hand: `plan = train(` + moeModel + `, batch = 1, seq = 8192, dataloader_mask = False, precision = "megatron",
             optimizer = "adamw", checkpoint = "full", gpu = "A100-80GB", expandable_segments = True,
             parallel = parallel(dp = 4, pp = 2, micro_batches = 4, stage_layers = [13, 11], ep = 4, expert_tp = 1, router_dtype = "fp32",
                                 shared_expert_overlap = True, distributed_optimizer = True, loss_parallel = "megatron_fused"), clip_grad_norm = 1.0)`,
		notModelled: []string{megatronRope},
	}, {
		name: "Qwen2.5-14B tp 4, selective recompute (megatron/base_to_chat.sh)",
		file: "swift/megatron_base_to_chat.sh", opts: Options{GPUs: 8, GPU: "A100-80GB", Model: "dense.json"}, files: dense,
		step: megatronStep(16, 8192),
		hand: `plan = train(hf_config("dense.json", attn = "flash", transformers = "4.57.1"), batch = 1, seq = 8192, dataloader_mask = False,
             precision = "megatron", optimizer = "adamw", checkpoint = "selective", gpu = "A100-80GB", expandable_segments = True, grad_accum = 8,
             parallel = parallel(dp = 2, tp = 4, sequence_parallel = True, distributed_optimizer = True,
                                 overlap_grad_reduce = False, overlap_param_gather = False, loss_parallel = "megatron_fused"), clip_grad_norm = 1.0)`,
		notModelled: []string{megatronRope},
	}, {
		name: "torchrun on swift/cli/_megatron/sft.py, unpacked rows, the defaults",
		file: "swift/megatron_torchrun.sh", opts: Options{GPUs: 2, Model: "dense.json"}, files: dense,
		step: megatronStep(16, 4096),
		hand: `plan = train(hf_config("dense.json", attn = "flash", transformers = "4.57.1"), batch = 1, seq = 4096, grad_accum = 8,
             dataloader_mask = False, precision = "megatron", optimizer = "adamw", checkpoint = "selective", gpu = "H100-80GB",
             parallel = parallel(dp = 2, distributed_optimizer = True, overlap_grad_reduce = False, overlap_param_gather = False, loss_parallel = "megatron_fused"), clip_grad_norm = 1.0)`,
		notModelled: []string{"padding_free: each micro-batch's rows joined without padding, up to 4096 tokens a row: memsh replays rows of 4096 (--seq N for another length)", megatronRope},
	}})
}

// TestMegatronSwiftErrors: what ms-swift or Megatron refuses, and what
// memsh check does not read of Megatron-SWIFT, each named at its argument
// with a hint.
func TestMegatronSwiftErrors(t *testing.T) {
	const cmd = "NPROC_PER_NODE=8 megatron sft --model Qwen/Qwen2.5-7B-Instruct --max_length 2048"
	runErrorCases(t, []errorCase{
		{name: "megatron rlhf", file: "run.sh", config: "NPROC_PER_NODE=2 megatron rlhf --rlhf_type dpo --model Qwen/Qwen2.5-7B-Instruct\n",
			want: "run.sh:1: key launcher.command: Megatron-SWIFT's `megatron rlhf` is not read", wantHint: "`megatron sft` and `megatron pt`"},
		{name: "no config.json", file: "run.sh", config: cmd + "\n", opts: Options{GPUs: 8},
			want: "run.sh:1: key model: Megatron-SWIFT builds Qwen/Qwen2.5-7B-Instruct from its config.json, which memsh does not have", wantHint: "--model config.json"},
		{name: "Megatron-SWIFT's LoRA", file: "run.sh", config: cmd + " --tuner_type lora\n", opts: Options{GPUs: 8},
			want: "run.sh:1: key tuner_type: Megatron-SWIFT's lora (PEFT's adapters on Megatron's parallel linears) is not read", wantHint: "lora(...)"},
		{name: "Muon", file: "run.sh", config: cmd + " --optimizer muon\n", opts: Options{GPUs: 8},
			want: "run.sh:1: key optimizer: optimizer muon is not read", wantHint: "FusedAdam"},
		{name: "one process, --gpus 8", file: "run.sh", config: "megatron sft --model Qwen/Qwen2.5-7B-Instruct\n", opts: Options{GPUs: 8},
			want: "run.sh: key env.NPROC_PER_NODE: unset: ms-swift runs Megatron-SWIFT as one process on one GPU, where --gpus says 8", wantHint: "NPROC_PER_NODE=8"},
	})
}

// TestMegatronSwiftModelErrors: the model's config.json decides what is
// read: expert parallelism of a dense model, the experts' kernels and
// dispatcher memsh does not replay.
func TestMegatronSwiftModelErrors(t *testing.T) {
	moe := readTestdata(t, "../../sim/testdata/hf/qwen1.5-moe-a2.7b.json")
	dense := readTestdata(t, "../../sim/testdata/hf/qwen2.5-14b.json")
	const cmd = "NPROC_PER_NODE=8 megatron sft --model m --max_length 2048"
	for _, tc := range []struct {
		name, args string
		model      []byte
		want       string
	}{
		{"ep on a dense model", " --expert_model_parallel_size 2", dense, "run.sh:1: key expert_model_parallel_size: 2 expert ranks for a dense model"},
		{"SequentialMLP", " --moe_grouped_gemm false", moe, "run.sh:1: key moe_grouped_gemm: Megatron's SequentialMLP (an MLP per local expert) is not modelled"},
		{"the allgather dispatcher", " --moe_token_dispatcher_type allgather", moe, "run.sh:1: key moe_token_dispatcher_type: the allgather dispatcher is not modelled"},
		{"an unknown router dtype", " --moe_router_dtype bf16", moe, "run.sh:1: key moe_router_dtype: unknown dtype bf16"},
		{"selective recompute with a method", " --recompute_method uniform", dense, "run.sh:1: key recompute_method: recompute method is not supported for selective recompute"},
		{"an unknown attention backend", " --attention_backend sdpa", moe, "run.sh:1: key attention_backend: unknown backend sdpa"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Import("run.sh", []byte(cmd+tc.args+"\n"), defaults(Options{GPUs: 8, Model: "config.json", ModelData: tc.model}))
			if err == nil || err.Error() != tc.want {
				t.Errorf("error\n  %v\nwant\n  %s", err, tc.want)
			}
		})
	}
}

// readTestdata reads a file under testdata.
func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestMegatronSwiftArguments: every argument of ms-swift v4.5.2's
// MegatronArguments and MegatronTunerMixin (their dataclass fields with
// their defaults, testdata/swift/megatron_args_v4.5.2.txt) is read,
// refused at its name, listed as not modelled, or of no effect: none is
// left not understood. A field given a value (its default, or 1 where the
// default is None) must not be listed as not understood, and an error
// must name the field.
func TestMegatronSwiftArguments(t *testing.T) {
	fields := strings.Split(strings.TrimSpace(string(readTestdata(t, "swift/megatron_args_v4.5.2.txt"))), "\n")
	if len(fields) < 200 {
		t.Fatalf("%d fields: want MegatronArguments' 215", len(fields))
	}
	cfg := readTestdata(t, "../../sim/testdata/hf/qwen1.5-moe-a2.7b.json")
	for _, line := range fields {
		name, def, _ := strings.Cut(line, "\t")
		v := strings.Trim(def, "'")
		switch {
		case def == "None" || strings.HasPrefix(def, "field("):
			v = "1"
		case def == "True" || def == "False":
			v = strings.ToLower(def)
		}
		if name == "model" {
			continue // the command's own
		}
		cmd := "NPROC_PER_NODE=8 megatron sft --model m --max_length 2048 --" + name + " " + v + "\n"
		res, err := Import("run.sh", []byte(cmd), defaults(Options{GPUs: 8, Model: "config.json", ModelData: cfg}))
		var ie *Error
		switch {
		case errors.As(err, &ie):
			if ie.Key != name && !(name == "fp16" && ie.Key == "bf16") { // --fp16 beside the bf16 config's bf16, as Megatron refuses both
				t.Errorf("--%s %s: the error names %s: %v", name, v, ie.Key, err)
			}
		case err != nil:
			t.Errorf("--%s %s: %v", name, v, err)
		case slices.Contains(res.Unknown, name):
			t.Errorf("--%s is listed as not understood", name)
		}
	}
}
