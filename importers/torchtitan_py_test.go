package importers

import (
	"fmt"
	"strings"
	"testing"
)

// Notes every config of torchtitan's own config_registry.py gets: the
// attention backend model_registry defaults to, the chunked loss under
// tensor or pipeline parallelism and the CUDA graphs, on by default
// (b5bcd76c6).
const (
	pyFlex      = "model_spec.attn_backend: flex, model_registry's default (memsh prices its kernel as flash-attn's over one causal row a sequence, train(doc_tokens=) per document, and leaves out its BlockMask's int32 tensors)"
	pyGraphs    = "training.disable_cuda_graphs: False, the default: forward and backward captured as a CUDA graph (distributed/cudagraph.py), its memory pool kept between steps (memsh replays the eager step, with the gradients zeroed, not freed)"
	pyRegistry  = "torchtitan/models/llama3/config_registry.py"
	pyRecipes   = "torchtitan/recipes/llama3_recipes.py"
	pyLlama8B   = `load("@stdlib//llm.star", "llama")` + "\n" + `plan = train(llama("llama3-8b", pad_labels = False, position_ids = False, attn = "flex"), `
	pyLlama70B  = `load("@stdlib//llm.star", "llama")` + "\n" + `plan = train(llama("llama3-70b", pad_labels = False, position_ids = False, attn = "flex"), `
	pyLlama405B = `load("@stdlib//llm.star", "llama")` + "\n" + `plan = train(llama("llama3-405b", pad_labels = False, position_ids = False, attn = "flex"), `
)

// TestTorchtitanPy imports torchtitan's own Llama 3 config functions
// (testdata/torchtitan/models/llama3/config_registry.py, pytorch/torchtitan
// at b5bcd76c6) and the recipes of testdata/torchtitan/recipes, each plan
// checked against the one written by hand from the function and the
// defaults of torchtitan's config classes: tokens per micro-batch over
// max_context_length sequences, FSDP over the GPUs TP leaves, SelectiveAC
// as the per-op policy, FullAC as full, CUDA graphs' zero_grad.
func TestTorchtitanPy(t *testing.T) {
	runImportCases(t, []importCase{{
		name:        "llama3_8b on 8 H100s: 1 x 8192 tokens, FSDP over 8, per-op SAC",
		file:        pyRegistry,
		step:        torchtitanPyStep(-1, 1*8192, 1, 8),
		opts:        Options{Function: "llama3_8b", GPUs: 8},
		notModelled: []string{pyFlex, pyGraphs},
		hand: pyLlama8B + `batch = 1, seq = 8192, precision = "bf16-mixed", optimizer = adamw(fused = True), checkpoint = checkpoint(policy = "op", early_stop = False), loss_chunks = ("torchtitan", 8),
             zero_grad = "zeros", gpu = "H100-80GB", parallel = parallel(dp = 8, fsdp = True), clip_grad_norm = 1.0)`,
	}, {
		name:        "llama3_70b on 64 GPUs: 8 x 8192 tokens, TP 8, FSDP 8, full AC",
		file:        pyRegistry,
		step:        torchtitanPyStep(-1, 8*8192, 1, 64/8),
		opts:        Options{Function: "llama3_70b", GPUs: 8, Nodes: 8},
		notModelled: []string{pyFlex, pyGraphs},
		hand: pyLlama70B + `batch = 8, seq = 8192, precision = "bf16-mixed", optimizer = adamw(fused = True), checkpoint = checkpoint(mode = "full", early_stop = False), loss_chunks = ("torchtitan", 8),
             zero_grad = "zeros", gpu = "H100-80GB", parallel = parallel(dp = 8, fsdp = True, tp = 8, sequence_parallel = True, tp_runtime = "torch", loss_parallel = "torch"),
             cluster = cluster(nodes = 8, gpus_per_node = 8), clip_grad_norm = 1.0)`,
	}, {
		name: "llama3_405b on 128 GPUs: compiled, async TP, Float8 rowwise under TP not modelled",
		file: pyRegistry,
		step: torchtitanPyStep(-1, 2*8192, 1, 128/8),
		opts: Options{Function: "llama3_405b", GPUs: 8, Nodes: 16},
		notModelled: []string{pyFlex,
			"compile.enable_async_tensor_parallel: the collectives' overlap with the matmuls (the step time prices them as without it; the memory is replayed, async_tp=True)",
			"model_spec.converters[0].recipe_name: rowwise with tensor parallelism (the input gathered in bf16, then cast rowwise)",
			pyGraphs},
		hand: pyLlama405B + `batch = 2, seq = 8192, precision = "bf16-mixed", optimizer = adamw(fused = True), compile = True, checkpoint = "full", loss_chunks = ("torchtitan", 8),
             zero_grad = "zeros", gpu = "H100-80GB",
             parallel = parallel(dp = 16, fsdp = True, tp = 8, sequence_parallel = True, tp_runtime = "torch", async_tp = True, loss_parallel = "torch"),
             cluster = cluster(nodes = 16, gpus_per_node = 8), clip_grad_norm = 1.0)`,
	}, {
		name:        "llama3_8b_mxfp8: llama3_8b with the model compiled and MXFP8 linears (not modelled)",
		file:        pyRegistry,
		step:        torchtitanPyStep(-1, 1*8192, 1, 8),
		opts:        Options{Function: "llama3_8b_mxfp8", GPUs: 8},
		notModelled: []string{pyFlex, "model_spec.converters[0]: MXFP8 linears (torchao's MX formats)", pyGraphs},
		hand: pyLlama8B + `batch = 1, seq = 8192, precision = "bf16-mixed", optimizer = adamw(fused = True), compile = "blocks", checkpoint = "op", loss_chunks = ("torchtitan", 8),
             zero_grad = "zeros", gpu = "H100-80GB", parallel = parallel(dp = 8, fsdp = True), clip_grad_norm = 1.0)`,
	}, {
		name:        "a recipe: 2 x 8192 tokens per rank, 4 iterations per step, full AC, CUDA graphs off",
		file:        pyRecipes,
		step:        torchtitanPyStep(4*2*8192*16, 2*8192, 1, 16),
		opts:        Options{Function: "llama3_8b_fsdp_accum", GPUs: 8, Nodes: 2},
		notModelled: []string{pyFlex},
		hand: pyLlama8B + `batch = 2, seq = 8192, grad_accum = 4, precision = "bf16-mixed", optimizer = adamw(fused = True), checkpoint = checkpoint(mode = "full", early_stop = False),
             gpu = "H100-80GB", parallel = parallel(dp = 16, fsdp = True), cluster = cluster(nodes = 2, gpus_per_node = 8), clip_grad_norm = 1.0)`,
	}, {
		name:        "a recipe: Float8 rowwise without TP, lm_head filtered, torchao's size filter, blocks compiled",
		file:        pyRecipes,
		step:        torchtitanPyStep(-1, 2*8192, 1, 8),
		opts:        Options{Function: "llama3_8b_float8_compiled", GPUs: 8},
		notModelled: []string{pyFlex},
		hand: pyLlama8B + `batch = 2, seq = 8192, precision = "bf16-mixed", optimizer = adamw(fused = True), compile = "blocks",
             checkpoint = checkpoint(policy = "op", save = ["mm", "attention", "reduce_scatter", "max"]), float8 = "rowwise", float8_auto_filter = True,
             gpu = "H100-80GB", parallel = parallel(dp = 8, fsdp = True), clip_grad_norm = 1.0)`,
	}, {
		name:        "a recipe: TP 8 x interleaved PP 2, 8 micro-batches of one sequence, torchtitan's uneven split",
		file:        pyRecipes,
		step:        torchtitanPyStep(-1, 8192, 8, 16/(8*2)),
		opts:        Options{Function: "llama3_70b_tp_pp", GPUs: 8, Nodes: 2},
		notModelled: []string{pyFlex},
		hand: pyLlama70B + `batch = 1, seq = 8192, precision = "bf16-mixed", optimizer = adamw(fused = True), checkpoint = checkpoint(mode = "full", early_stop = False), gpu = "H100-80GB",
             parallel = parallel(dp = 1, tp = 8, sequence_parallel = True, tp_runtime = "torch", loss_parallel = "torch", pp = 2, schedule = "interleaved",
                                 virtual_stages = 2, micro_batches = 8, stage_layers = [20, 21, 20, 19], pp_runtime = "torch"),
             cluster = cluster(nodes = 2, gpus_per_node = 8), clip_grad_norm = 1.0)`,
	}, {
		name:        "a recipe: TP 8 x interleaved PP 2 with a 16-chunk loss on the last stage",
		file:        pyRecipes,
		step:        torchtitanPyStep(-1, 8192, 8, 16/(8*2)),
		opts:        Options{Function: "llama3_70b_tp_pp_chunked", GPUs: 8, Nodes: 2},
		notModelled: []string{pyFlex},
		hand: pyLlama70B + `batch = 1, seq = 8192, precision = "bf16-mixed", optimizer = adamw(fused = True), checkpoint = checkpoint(mode = "full", early_stop = False), loss_chunks = ("torchtitan", 16), gpu = "H100-80GB",
             parallel = parallel(dp = 1, tp = 8, sequence_parallel = True, tp_runtime = "torch", loss_parallel = "torch", pp = 2, schedule = "interleaved",
                                 virtual_stages = 2, micro_batches = 8, stage_layers = [20, 21, 20, 19], pp_runtime = "torch"),
             cluster = cluster(nodes = 2, gpus_per_node = 8), clip_grad_norm = 1.0)`,
	}, {
		name:        "a recipe: the memory budget policy on the compiled model, a 4-chunk loss, an if on the TP degree",
		file:        pyRecipes,
		step:        torchtitanPyStep(-1, 2*8192, 1, 8),
		opts:        Options{Function: "llama3_8b_budget", GPUs: 8},
		notModelled: []string{pyFlex, pyGraphs},
		hand: pyLlama8B + `batch = 2, seq = 8192, precision = "bf16-mixed", optimizer = adamw(fused = True), compile = True, checkpoint = checkpoint(budget = 0.3), loss_chunks = ("torchtitan", 4),
             zero_grad = "zeros", gpu = "H100-80GB", parallel = parallel(dp = 8, fsdp = True), clip_grad_norm = 1.0)`,
	}, {
		name:        "a recipe calling another: activation_checkpoint = None, training.dtype bfloat16",
		file:        pyRecipes,
		step:        torchtitanPyStep(4*2*8192*16, 2*8192, 1, 8),
		opts:        Options{Function: "llama3_8b_no_ac", GPUs: 8},
		notModelled: []string{pyFlex},
		hand: pyLlama8B + `batch = 2, seq = 8192, grad_accum = 8, precision = "bf16", optimizer = adamw(fused = True),
             gpu = "H100-80GB", parallel = parallel(dp = 8, fsdp = True), clip_grad_norm = 1.0)`,
	}, {
		// the two context-parallel ranks share each sequence: the step is
		// the 4 data-parallel ranks' sequences, not 8
		name: "llama3_8b with context_parallel_degree 2: 4 data-parallel ranks of one 8192-token sequence",
		file: pyRegistry,
		step: torchtitanPyStep(-1, 1*8192, 1, 8/2),
		opts: Options{Function: "llama3_8b", GPUs: 8, Overrides: []string{"parallelism.context_parallel_degree=2"}},
		notModelled: []string{pyFlex, pyGraphs,
			"parallelism.context_parallel_degree: the attention of distributed/context_parallel/api.py (memsh replays torch's all-gather context parallelism, the TOML generation's default)"},
		hand: pyLlama8B + `batch = 1, seq = 8192, precision = "bf16-mixed", optimizer = adamw(fused = True), checkpoint = checkpoint(policy = "op", early_stop = False), loss_chunks = ("torchtitan", 8),
             zero_grad = "zeros", gpu = "H100-80GB", parallel = parallel(dp = 4, fsdp = True, cp = 2, cp_mode = "allgather"), clip_grad_norm = 1.0)`,
	}, {
		// the expert-parallel ranks are data-parallel ranks: 4 of them, each
		// running 4 pipeline micro-batches of one sequence
		name:        "a MoE from its config.json at ep 2 and pp 2, 4 micro-batches",
		file:        pyRegistry,
		step:        torchtitanPyStep(-1, 1*8192, 4, 8/2),
		opts:        Options{Function: "llama3_8b", GPUs: 8, Model: "mixtral.json", Overrides: []string{"parallelism.expert_parallel_degree=2", "parallelism.pipeline_parallel_degree=2", "parallelism.num_pp_microbatches=4", "training.disable_cuda_graphs=true"}},
		files:       map[string]string{"mixtral.json": "../../sim/testdata/hf/mixtral-8x7b-v0.1.json"},
		notModelled: []string{pyFlexHF},
		hand: `plan = train(hf_config("mixtral.json", pad_labels = False, position_ids = False, attn = "flash"), batch = 1, seq = 8192, precision = "bf16-mixed", optimizer = adamw(fused = True), checkpoint = checkpoint(policy = "op", early_stop = False), loss_chunks = ("torchtitan", 8),
             gpu = "H100-80GB", parallel = parallel(dp = 4, fsdp = True, reshard_after_forward = False, ep = 2, pp = 2, schedule = "1f1b", micro_batches = 4, pp_runtime = "torch"), clip_grad_norm = 1.0)`,
	}})
}

// TestTorchtitanPyErrors checks what memsh does not read, and configs it
// cannot plan, name the file's line and give a hint.
func TestTorchtitanPyErrors(t *testing.T) {
	const head = "from torchtitan.config import TrainingConfig, ParallelismConfig\nfrom torchtitan.models.llama3 import model_registry\nfrom torchtitan.trainer import Trainer\n"
	const hint = "memsh reads config functions of constructor calls"
	runErrorCases(t, []errorCase{{
		name: "an f-string", file: "x.py", opts: Options{Function: "f"},
		config: head + "def f() -> Trainer.Config:\n    name = f\"llama{3}\"\n    return name\n",
		want:   "x.py:5: an f-string at column 12", wantHint: hint,
	}, {
		name: "a loop", file: "x.py", opts: Options{Function: "f"},
		config: head + "def f():\n    c = Trainer.Config()\n    for d in [1, 2]:\n        c.parallelism.tensor_parallel_degree = d\n    return c\n",
		want:   "x.py:6: a for loop", wantHint: hint,
	}, {
		name: "a class", file: "x.py", opts: Options{Function: "f"},
		config: head + "class C:\n    pass\n",
		want:   "x.py:4: a class definition at column 1", wantHint: "save_config_file",
	}, {
		name: "a function of another module", file: "x.py", opts: Options{Function: "f"},
		config: head + "from torchtitan_recipes.llama3 import llama3_8b\n\ndef f():\n    return llama3_8b()\n",
		want:   "x.py:7: llama3_8b comes from torchtitan_recipes.llama3, another module, which memsh does not read (it reads one file): check the module that defines it", wantHint: hint,
	}, {
		name: "a relative import outside torchtitan/models/<model>/", file: "config_registry.py", opts: Options{Function: "f"},
		config:   "from . import model_registry\nfrom torchtitan.trainer import Trainer\n\ndef f():\n    return Trainer.Config(model_spec=model_registry(\"8B\"))\n",
		want:     "config_registry.py:5: model_registry comes from ., a module beside this file, which memsh does not read (it reads one file)",
		wantHint: "pass it as .../models/<model>/config_registry.py",
	}, {
		name: "a def whose parameters never close", file: "x.py", opts: Options{Function: "f"},
		config: head + "def f(:\n    return Trainer.Config()\n",
		want:   "x.py:4: a def whose parameters never close (no matching ')')", wantHint: hint,
	}, {
		name: "an unknown function", file: "x.py", opts: Options{Function: "llama3_9b"},
		config: head + "def llama3_8b():\n    pass\n\ndef _helper():\n    pass\n",
		want:   "command line: --config llama3_9b: x.py defines no such function", wantHint: "its functions: llama3_8b",
	}, {
		name: "no --config", file: "x.py",
		config: head + "def llama3_8b():\n    pass\n",
		want:   "command line: x.py is a Python module: say which function returns the config with --config NAME", wantHint: "its functions: llama3_8b",
	}, {
		name: "--trainer torchtitan on a .py file: the Python reader", file: "x.py", opts: Options{Trainer: "torchtitan"},
		config: head + "def llama3_8b():\n    pass\n",
		want:   "command line: x.py is a Python module: say which function returns the config with --config NAME", wantHint: "its functions: llama3_8b",
	}, {
		name: "a field the class lacks", file: "x.py", opts: Options{Function: "f"},
		config:   head + "def f():\n    c = Trainer.Config()\n    c.training.seq_len = 4096\n    return c\n",
		want:     "x.py:6: TrainingConfig has no field seq_len (torchtitan raises the same); its fields: num_tokens_per_microbatch_per_dp_rank, num_tokens_per_train_step, max_context_length, max_norm, steps, enable_cpu_offload, disable_cuda_graphs, dtype, mixed_precision_param, mixed_precision_reduce, gc_freq, gc_debug",
		wantHint: hint,
	}, {
		name: "a flavor outside the zoo", file: "x.py", opts: Options{Function: "f"},
		config: head + "def f():\n    return Trainer.Config(\n        model_spec=model_registry(\"debugmodel\"),\n    )\n",
		want:   "x.py:6: key model_spec.flavor: memsh's zoo has no model for llama3 flavor debugmodel", wantHint: "llama3 8B, 70B and 405B",
	}, {
		name: "not a Trainer.Config", file: "x.py", opts: Options{Function: "f"},
		config: head + "def f():\n    return TrainingConfig()\n",
		want:   "x.py:4: f() returns TrainingConfig, not a Trainer.Config", wantHint: hint,
	}, {
		name: "pipelining under CUDA graphs", file: "x.py", opts: Options{Function: "f", GPUs: 8},
		config: head + "from torchtitan.components.loss import CrossEntropyLoss\ndef f():\n    c = Trainer.Config(model_spec=model_registry(\"8B\"), loss=CrossEntropyLoss.Config())\n    c.parallelism.pipeline_parallel_degree = 2\n    return c\n",
		want:   "x.py: key training.disable_cuda_graphs: CUDA graphs (on by default) do not support pipeline parallelism", wantHint: "disable_cuda_graphs = True",
	}, {
		name: "tokens per micro-batch not whole sequences", file: "x.py", opts: Options{Function: "f", GPUs: 8},
		config: head + "def f():\n    return Trainer.Config(\n        model_spec=model_registry(\"8B\"),\n        training=TrainingConfig(num_tokens_per_microbatch_per_dp_rank=5000, max_context_length=4096),\n    )\n",
		want:   "x.py:7: key training.num_tokens_per_microbatch_per_dp_rank: 5000 tokens per micro-batch are not a whole number of 4096-token sequences", wantHint: "whole sequences",
	}})
}

// TestTorchtitanPyBounds checks configs that are not configs end in an
// error, not a hang or a crash: an object that holds itself, a list
// doubled on every call.
func TestTorchtitanPyBounds(t *testing.T) {
	const head = "from torchtitan.models.llama3 import model_registry\nfrom torchtitan.components.loss import CrossEntropyLoss\nfrom torchtitan.trainer import Trainer\n"
	for _, tc := range []struct{ name, src, want, msg string }{{
		name: "a cycle",
		src:  head + "def f():\n    c = Trainer.Config(model_spec=model_registry(\"8B\"), loss=CrossEntropyLoss.Config())\n    c.profiler.again = c\n    return c\n",
	}, {
		name: "a doubling recursion",
		src:  head + "def g(x):\n    return g(x + x)\ndef f():\n    return g([1])\n",
		want: "x.py:5: ",
	}, {
		// 11 open objects, each of the first ten held 6 times by the one
		// before: 6^10 paths, which pyFlatten stops at pyMaxLen objects
		name: "objects shared level after level",
		src:  head + "from torchtitan.components.metrics import Metrics\ndef f():\n    c = Trainer.Config(model_spec=model_registry(\"8B\"), loss=CrossEntropyLoss.Config())\n" + sharedLevels(10, 6) + "    c.metrics = o0\n    return c\n",
		want: "x.py:",
		msg:  "more than 65536 values",
	}, {
		// a list of ten of the list before, twelve deep: 10^12 items
		name: "lists shared level after level",
		src: head + "def f():\n    c = Trainer.Config(model_spec=model_registry(\"8B\"), loss=CrossEntropyLoss.Config())\n    l = [1, 2]\n" +
			strings.Repeat("    l = [l, l, l, l, l, l, l, l, l, l]\n", 12) + "    c.profiler.x = l\n    return c\n",
		want: "x.py:19: key profiler.x:",
		msg:  "more than 65536 values",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Import("x.py", []byte(tc.src), defaults(Options{Function: "f", GPUs: 8}))
			if tc.want == "" && err != nil {
				t.Fatal(err)
			}
			if tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.msg)) {
				t.Fatalf("error %v, want %s...%s", err, tc.want, tc.msg)
			}
		})
	}
}

// TestTorchtitanDict imports a resolved config as debug.save_config_file
// writes it (testdata/torchtitan/llama3_8b_to_dict.json: llama3_8b's
// Trainer.Config.to_dict() written here from trainer.py and the classes'
// fields at b5bcd76c6): the same plan as the Python function's, the
// policy and the loss told by their fields, the converters and the
// attention backend listed as lost.
func TestTorchtitanDict(t *testing.T) {
	lost := []string{
		"model_spec.converters: not in Trainer.Config.to_dict() (a Float8 or MXFP8 model reads as bf16)",
		"model_spec.attn_backend: not in Trainer.Config.to_dict() (memsh replays model_registry's default, flex: memsh prices its kernel as flash-attn's over one causal row a sequence, train(doc_tokens=) per document, and leaves out its BlockMask's int32 tensors)",
		pyGraphs,
	}
	runImportCases(t, []importCase{{
		name:        "llama3_8b's dump on 8 H100s: as llama3_8b",
		file:        "torchtitan/llama3_8b_to_dict.json",
		step:        torchtitanPyStep(-1, 8192, 1, 8),
		opts:        Options{GPUs: 8},
		notModelled: lost,
		hand: pyLlama8B + `batch = 1, seq = 8192, precision = "bf16-mixed", optimizer = adamw(fused = True), checkpoint = checkpoint(policy = "op", early_stop = False), loss_chunks = ("torchtitan", 8),
             zero_grad = "zeros", gpu = "H100-80GB", parallel = parallel(dp = 8, fsdp = True), clip_grad_norm = 1.0)`,
	}, {
		name:        "the dump with a field overridden: 2 sequences per micro-batch",
		file:        "torchtitan/llama3_8b_to_dict.json",
		step:        torchtitanPyStep(-1, 16384, 1, 8),
		opts:        Options{GPUs: 8, Overrides: []string{"training.num_tokens_per_microbatch_per_dp_rank=16384"}},
		notModelled: lost,
		hand: pyLlama8B + `batch = 2, seq = 8192, precision = "bf16-mixed", optimizer = adamw(fused = True), checkpoint = checkpoint(policy = "op", early_stop = False), loss_chunks = ("torchtitan", 8),
             zero_grad = "zeros", gpu = "H100-80GB", parallel = parallel(dp = 8, fsdp = True), clip_grad_norm = 1.0)`,
	}})
	const dump = `{"model_spec": {"name": "llama3", "flavor": "8B"}, "training": {"num_tokens_per_microbatch_per_dp_rank": 8192, "max_context_length": 8192},
 "activation_checkpoint": {"preserve_rng_state": true, "memory_budget": 0.5}, "loss": {"global_vocab_size": 128256}}`
	runErrorCases(t, []errorCase{{
		name: "MemoryBudgetAC told by its field, the model not compiled", file: "config.json", config: dump, opts: Options{GPUs: 8},
		want: "config.json: key activation_checkpoint: memory budget activation checkpointing needs the model compiled", wantHint: "compile.enable = True",
	}})
}

// sharedLevels is Python lines making open objects o0..o<levels>, each
// o<l> holding o<l+1> in fields x1..x<fields>.
func sharedLevels(levels, fields int) string {
	var b strings.Builder
	for l := 0; l <= levels; l++ {
		fmt.Fprintf(&b, "    o%d = Metrics.Config()\n", l)
	}
	for l := 0; l < levels; l++ {
		for i := 1; i <= fields; i++ {
			fmt.Fprintf(&b, "    o%d.x%d = o%d\n", l, i, l+1)
		}
	}
	return b.String()
}
