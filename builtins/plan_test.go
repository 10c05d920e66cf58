package builtins

import "testing"

const planPrelude = `
m = model("tiny", embedding(1000, 64), mlp(64, 256), vocab = 1000)
p = train(m, seq = 16)
`

func TestPlan(t *testing.T) {
	runPreludeCases(t, planPrelude, []evalCase{
		{expr: "p", want: `train(model="tiny", batch=1, seq=16, gpu="H100-80GB")`},
		{expr: "type(p)", want: `"plan"`},
		{expr: "p.model", want: `model("tiny", params=160768)`},
		{expr: "p.batch", want: "1"},
		{expr: "p.seq", want: "16"},
		{expr: "p.grad_accum", want: "1"},
		{expr: "p.members", want: "1"},
		{expr: "p.members_mode", want: `"stacked"`},
		{expr: "p.precision", want: `precision("fp32")`},
		{expr: "p.optimizer", want: "adamw()"},
		{expr: "p.checkpoint", want: `checkpoint("none")`},
		{expr: "p.lora", want: "None"},
		{expr: "p.quant", want: "None"},
		{expr: "p.gpu", want: `gpu("H100-80GB")`},
		{expr: "p.phase", want: `"train"`},
		{expr: "p.runtime", want: `"cuda"`},
		{expr: "p.parallel", want: "None"},
		{expr: "p.replace(batch = 4).batch", want: "4"},
		{expr: "p.replace(batch = 4).seq", want: "16"},
		{expr: "p.replace(batch = 4.0).batch", want: "4"},
		{expr: "p.batch", want: "1"},
		{expr: `p.replace(precision = "bf16-mixed", checkpoint = "full", optimizer = "adamw8bit", gpu = "A100")`,
			want: `train(model="tiny", batch=1, seq=16, precision="bf16-mixed", optimizer=adamw8bit(), checkpoint="full", gpu="A100-80GB")`},
		{expr: `p.replace(checkpoint = checkpoint(every = 2), lora = lora(), grad_accum = 4)`,
			want: `train(model="tiny", batch=1, seq=16, grad_accum=4, checkpoint=checkpoint(every=2), lora=lora(rank=8, alpha=16, targets=["q", "v"]), gpu="H100-80GB")`},
		// A policy with options is written as its call, which train() takes back (not a quoted call).
		{expr: `p.replace(checkpoint = checkpoint("full", reentrant = True))`,
			want: `train(model="tiny", batch=1, seq=16, checkpoint=checkpoint("full", reentrant=True), gpu="H100-80GB")`},
		{expr: `p.replace(checkpoint = checkpoint(policy = "op", save = ["mm"]))`,
			want: `train(model="tiny", batch=1, seq=16, checkpoint=checkpoint(policy="op", save=["mm"]), gpu="H100-80GB")`},
		{expr: `p.replace(checkpoint = checkpoint("selective"))`,
			want: `train(model="tiny", batch=1, seq=16, checkpoint="selective", gpu="H100-80GB")`},
		{expr: `p.replace(precision = precision(params = bf16, grads = fp32, master = fp32)).precision.name`, want: `"custom"`},
		{expr: `p.replace(gpu = gpu(name = "x", memory = 8 * GiB)).gpu.memory`, want: "8589934592"},
		{expr: `train(model("mlp", linear(8, 8))).seq`, want: "None"},
		{expr: `train(m, seq = 8, checkpoint = None).checkpoint`, want: `checkpoint("none")`},
		{expr: `checkpoint("full", reentrant = True, input_requires_grad = True)`, want: `checkpoint("full", reentrant=True, input_requires_grad=True)`},
		{expr: `[checkpoint("full", input_requires_grad = True).input_requires_grad, checkpoint().input_requires_grad]`, want: `[True, False]`},
		// Every flag shows in the value (equality and hashing compare it).
		{expr: `checkpoint("full", input_requires_grad = True)`, want: `checkpoint("full", input_requires_grad=True)`},
		{expr: `checkpoint("none", input_requires_grad = True)`, want: `checkpoint("none", input_requires_grad=True)`},
		{expr: `checkpoint(budget = 0.5, reentrant = True, input_requires_grad = True)`, want: `checkpoint(budget=0.5, reentrant=True, input_requires_grad=True)`},
		{expr: `checkpoint(policy = "op", input_requires_grad = True)`, want: `checkpoint(policy="op", input_requires_grad=True)`},
		{expr: `checkpoint(budget = 0.5, reentrant = True) == checkpoint(budget = 0.5)`, want: `False`},
		{expr: `train(m, seq = 8, checkpoint = checkpoint("full", input_requires_grad = True)).checkpoint`, want: `checkpoint("full", input_requires_grad=True)`},
		{expr: `train(m, seq = 8, zero_grad = "zeros").zero_grad`, want: `"zeros"`},
		{expr: `train(m, seq = 8).zero_grad`, want: `"none"`},
		{expr: `train(m, seq = 8, zero_grad = "zeros")`, want: `train(model="tiny", batch=1, seq=8, gpu="H100-80GB", zero_grad="zeros")`},
		{expr: `dir(p)[:3]`, want: `["attention_mask", "batch", "checkpoint"]`},
		{expr: `p.attention_mask`, want: "True"},
		{expr: `p.replace(attention_mask = False)`, want: `train(model="tiny", batch=1, seq=16, gpu="H100-80GB", attention_mask=False)`},
		{expr: `"replace" in dir(p)`, want: "True"},
		{expr: "p.compile", want: "False"},
		{expr: "p.replace(compile = True)", want: `train(model="tiny", batch=1, seq=16, compile=True, gpu="H100-80GB")`},
		{expr: `p.replace(compile = "blocks").compile`, want: `"blocks"`},
		{expr: `p.replace(compile = True, checkpoint = checkpoint(budget = 0.5)).checkpoint`, want: "checkpoint(budget=0.5)"},
	})
}

func TestPlanErrors(t *testing.T) {
	runPreludeCases(t, planPrelude, []evalCase{
		{expr: "train(m, batch = -1, seq = 8)", err: "batch must be positive (got -1)"},
		{expr: `train(m, seq = 8, compile = "fast")`, err: `unknown compile "fast" (known: True, False, "blocks", "loss")`},
		{expr: `train(m, seq = 8, compile = 1)`, err: `compile must be True, False, "blocks" or "loss" (got int)`},
		{expr: `train(m, seq = 8, compile = True, checkpoint = checkpoint(budget = 0.5, reentrant = True))`, err: "the budget is the partitioner's, no torch.utils.checkpoint runs"},
		{expr: "train(m, batch = 0, seq = 8)", err: "batch must be positive (got 0)"},
		{expr: "train(m, seq = 8, attention_mask = 1)", err: "attention_mask must be True or False (got int)"},
		{expr: `checkpoint("none", reentrant = True)`, err: `reentrant=True needs a checkpointing mode (got "none")`},
		{expr: "train(m)", err: `seq is required: model "tiny" reads tokens (it starts with an embedding)`},
		{expr: "train(m, seq = 0)", err: "seq must be positive (got 0)"},
		{expr: "train(m, seq = 8, grad_accum = 0)", err: "grad_accum must be positive (got 0)"},
		{expr: `train(m, seq = 8, zero_grad = True)`, err: `zero_grad must be "none" (set_to_none=True) or "zeros" (set_to_none=False) (got True)`},
		{expr: "train(m, seq = 8, members = 0)", err: "members must be at least 1 (got 0)"},
		{expr: `train(m, seq = 8, members_mode = "parallel")`, err: `unknown members_mode "parallel" (known: stacked, sequential, spread)`},
		{expr: `train(m, seq = 8, precision = "bf17")`, err: `unknown precision "bf17"`},
		{expr: `train(m, seq = 8, precision = bf16)`, err: "precision: got dtype, want a precision name or precision(...)"},
		{expr: `train(m, seq = 8, optimizer = "adamw9bit")`, err: `unknown optimizer "adamw9bit" (known: sgd, adam, adamw, adamw8bit, paged_adamw8bit, paged_adamw, adafactor, lion, sparse_adam, muon)`},
		{expr: `train(m, seq = 8, optimizer = 3)`, err: "optimizer: got int, want an optimizer such as adamw()"},
		{expr: `train(m, seq = 8, checkpoint = "some")`, err: `unknown checkpoint "some"`},
		{expr: `train(m, seq = 8, lora = True)`, err: "lora must be None or lora(...) (got bool)"},
		{expr: `train(m, seq = 8, quant = "nf3")`, err: `unknown quant "nf3" (known: nf4, nf4-dq, int8, torchao-nf4)`},
		{expr: `train(m, seq = 8, gpu = "H300")`, err: `unknown gpu "H300"`},
		{expr: `train(m, seq = 8, phase = "infer")`, err: `unknown phase "infer" (known: train, eval)`},
		{expr: `train(m, seq = 8, runtime = "rocm")`, err: `unknown runtime "rocm"`},
		{expr: `train(m, seq = 8, parallel = 1)`, err: "parallel must be None or parallel(dp=..., tp=..., ...) (got int)"},
		{expr: `train(m, seq = 8, offload = "cpu")`, err: "offload must be None or offload(...) (got string)"},
		{expr: `train(m, 8)`, err: "train takes the model, then keywords (got 2 positional arguments)"},
		{expr: `train(linear(8, 8))`, err: "model must be a model (got layer)"},
		{expr: `train(m, seq = "8")`, err: "seq must be an int (got string)"},
		{expr: `train(m, seq = 8, bacth = 2)`, err: `unexpected keyword argument "bacth"`},
		{expr: `p.replace(4)`, err: "replace takes keywords only"},
		{expr: `p.replace(batch = -4)`, err: "batch must be positive (got -4)"},
		{expr: `p.replace(nope = 1)`, err: `unexpected keyword argument "nope"`},
		{expr: `train(m, seq = 8, zero = 3)`, err: `train: unexpected keyword argument "zero"`},
		{expr: `p.replace(fsdp = True)`, err: `replace: unexpected keyword argument "fsdp"`},
	})
}

func TestPrecision(t *testing.T) {
	runEvalCases(t, []evalCase{
		{expr: `precision("bf16-mixed")`, want: `precision("bf16-mixed")`},
		{expr: `precision("bf16-mixed").autocast`, want: "True"},
		{expr: `precision("bf16-mixed").params`, want: "fp32"},
		{expr: `precision("bf16-mixed").compute`, want: "bf16"},
		{expr: `precision("bf16").optimizer_states`, want: "bf16"},
		{expr: `precision("megatron").master`, want: "fp32"},
		{expr: `precision("fp32").master`, want: "None"},
		// Megatron's --bf16 dtypes without its runtime: bf16 params, fp32
		// main grads, fp32 master and states on PyTorch's eager kernels.
		{expr: `precision(params = bf16, grads = fp32, master = fp32)`,
			want: "precision(params=bf16, compute=bf16, grads=fp32, master=fp32, optimizer_states=fp32)"},
		{expr: `precision(params = bf16, grads = fp32, master = fp32).megatron`, want: "False"},
		{expr: `precision("megatron").megatron`, want: "True"},
		// Megatron's runtime under other dtypes (--grad-reduce-in-bf16,
		// --fp16): printed so that it reads back as the same policy.
		{expr: `precision("megatron", grads = bf16)`,
			want: `precision("megatron", params=bf16, compute=bf16, grads=bf16, master=fp32, optimizer_states=fp32)`},
		{expr: `precision("megatron", params = "fp16", compute = "fp16").megatron`, want: "True"},
		{expr: `precision("megatron", params = fp16, compute = fp16, grads = fp32, master = fp32, optimizer_states = fp32) == precision("megatron", params = "fp16", compute = "fp16")`, want: "True"},
		{expr: `precision(params = "fp16")`, want: "precision(params=fp16, compute=fp16, grads=fp16, optimizer_states=fp16)"},
		{expr: `precision("bf16-mixed", optimizer_states = bf16)`,
			want: "precision(params=fp32, compute=bf16, grads=fp32, optimizer_states=bf16, autocast=True)"},
		{expr: `precision("bf16-mixed") == precision("bf16-mixed")`, want: "True"},
		{expr: `precision()`, err: "precision needs a policy name or params="},
		{expr: `precision(params = "int9")`, err: `params: unknown dtype "int9"`},
		{expr: `precision(params = int8)`, err: "params dtype must be a float type (got int8)"},
		{expr: `precision(params = bf16, master = int8)`, err: "master dtype must be a float type (got int8)"},
		{expr: `precision(params = bf16, autocast = 1)`, err: "autocast must be True or False (got int)"},
		{expr: `precision("fp12")`, err: `unknown precision "fp12"`},
	})
}

func TestOptimizers(t *testing.T) {
	runEvalCases(t, []evalCase{
		{expr: "adamw()", want: "adamw()"},
		{expr: "adamw().impl", want: `None`},
		{expr: "adamw(impl = None).impl", want: `None`},
		{expr: `adamw(impl = "foreach") == adamw()`, want: `False`}, // torch's foreach, named, against the trainer's
		{expr: `adamw(impl = "")`, err: `impl "" is not an implementation`},
		{expr: `adamw(impl = 1)`, err: `impl must be a string or None (got int)`},
		{expr: "adamw(fused = True)", want: `adamw(impl="fused")`},
		{expr: `adamw(impl = "for-loop", in_backward = True)`, want: `adamw(impl="for-loop", in_backward=True)`},
		{expr: "adam(fused = False).impl", want: `"foreach"`},
		{expr: "sgd(momentum = 0.9)", want: "sgd(momentum=0.9)"},
		{expr: "sgd().momentum", want: "0.0"},
		{expr: "adamw8bit().kind", want: `"adamw8bit"`},
		{expr: "paged_adamw8bit()", want: "paged_adamw8bit()"},
		{expr: "adafactor().impl", want: "None"},
		{expr: "lion()", want: "lion()"},
		{expr: "sparse_adam()", want: "sparse_adam()"},
		{expr: "adamw() == adamw()", want: "True"},
		{expr: "adamw() != adam()", want: "True"},
		{expr: `adamw(impl = "fast")`, err: `unknown optimizer implementation "fast" (known: foreach, fused, for-loop)`},
		{expr: `adamw(impl = "for-loop", fused = True)`, err: `fused=True conflicts with impl="for-loop"`},
		{expr: `adamw(impl = "fused", fused = False)`, err: `fused=False conflicts with impl="fused"`},
		{expr: "sgd(momentum = 1.5)", err: "momentum must be in [0, 1) (got 1.5)"},
		{expr: "sgd(impl = \"fused\")", err: `unexpected keyword argument "impl"`},
		{expr: "adamw8bit(momentum = 0.9)", err: `unexpected keyword argument "momentum"`},
		{expr: "muon()", want: "muon()"},
		{expr: "muon().momentum", want: "0.95"},
		{expr: "muon().ns_steps", want: "5"},
		{expr: "muon().nesterov", want: "True"},
		{expr: `muon().impl`, want: `None`},
		{expr: `muon(fused = True)`, want: `muon(impl="fused")`},
		{expr: `muon(newton_schulz = "reference")`, want: `muon(newton_schulz="reference")`},
		{expr: `muon().newton_schulz`, want: `"torch"`},
		{expr: `muon(newton_schulz = "torch")`, want: `muon()`},
		{expr: `adamw().newton_schulz`, want: "None"},
		{expr: `muon(newton_schulz = "polar")`, err: `newton_schulz "polar" is not a form memsh knows`},
		{expr: `muon(newton_schulz = "")`, err: `newton_schulz "" is not a form memsh knows`},
		{expr: "muon(ns_steps = 0)", err: "ns_steps must be in [1, 100) (got 0)"},
		{expr: "muon(ns_steps = 100)", err: "torch.optim.Muon refuses 100 or more"},
		{expr: "muon(momentum = 1)", err: "momentum must be in [0, 1) (got 1)"},
		{expr: "muon(in_backward = True)", err: `unexpected keyword argument "in_backward"`},
		{expr: "adamw(ns_steps = 5)", err: `unexpected keyword argument "ns_steps"`},
		{expr: `train(model("m", embedding(100, 64), linear(64, 64), vocab = 100), seq = 16, optimizer = muon(), parallel = parallel(dp = 2, zero = 2), cluster = cluster(gpus_per_node = 2))`,
			err: "muon() with zero=: Muon orthogonalizes whole matrices"},
	})
}

func TestCheckpointAndLoRA(t *testing.T) {
	runEvalCases(t, []evalCase{
		{expr: `checkpoint()`, want: `checkpoint("full")`},
		{expr: `checkpoint("selective")`, want: `checkpoint("selective")`},
		{expr: `checkpoint(every = 2)`, want: "checkpoint(every=2)"},
		{expr: `checkpoint(every = 2).every`, want: "2"},
		{expr: `checkpoint(modules = ["attention", "mlp"]).modules`, want: `("attention", "mlp")`},
		{expr: `checkpoint(modules = "decoder").mode`, want: `"modules"`},
		{expr: `bool(checkpoint("none"))`, want: "False"},
		{expr: `checkpoint(every = 0)`, err: "checkpoint: every must be a positive number of blocks (got 0)"},
		{expr: `checkpoint(every = 1 << 31)`, err: "checkpoint: every=2147483648 is more blocks than memsh counts (up to 2^30)"},
		{expr: `checkpoint(every = 2, modules = ["mlp"])`, err: "checkpoint takes one of mode, every or modules (got 2)"},
		{expr: `checkpoint(modules = [])`, err: "modules must name at least one layer"},
		{expr: `checkpoint(modules = [1])`, err: "modules[0] must be a string (got int)"},
		{expr: `checkpoint("most")`, err: `unknown checkpoint "most"`},
		{expr: `checkpoint("op")`, want: `checkpoint("op")`},
		{expr: `checkpoint(policy = "op")`, want: `checkpoint("op")`},
		{expr: `checkpoint(policy = "op").save`, want: `("mm", "attention", "reduce_scatter", "abs", "max")`},
		{expr: `checkpoint(policy = "op", save = ["attention"])`, want: `checkpoint(policy="op", save=["attention"])`},
		{expr: `checkpoint(policy = "op", save = ["attention"]).mode`, want: `"op"`},
		{expr: `checkpoint(policy = "layer", every = 2)`, want: `checkpoint(every=2)`},
		{expr: `checkpoint(policy = "layer", every = 2) == checkpoint(every = 2)`, want: `True`},
		{expr: `checkpoint("full").policy`, want: "None"},
		{expr: `checkpoint(policy = "op", every = 2)`, err: `every= is policy="layer"'s`},
		{expr: `checkpoint(policy = "op", save = ["mm", "mm"])`, err: `"mm" is listed twice`},
		// A save list's op by its PyTorch name, or a typo: did you mean.
		{expr: `checkpoint(policy = "op", save = ["sdpa"])`, err: `save: unknown op "sdpa" (did you mean "attention"? known: mm, bmm, attention, reduce_scatter, all_to_all, topk, abs, max)`},
		{expr: `checkpoint(policy = "op", save = ["torch.ops.aten.mm.default"])`, err: `unknown op "torch.ops.aten.mm.default" (did you mean "mm"?`},
		{expr: `checkpoint(policy = "op", save = ["torch.ops._c10d_functional.reduce_scatter_tensor.default"])`, err: `(did you mean "reduce_scatter"?`},
		{expr: `checkpoint(policy = "op", save = ["aten._scaled_dot_product_flash_attention.default"])`, err: `(did you mean "attention"?`},
		{expr: `checkpoint(policy = "op", save = ["mm", "atention"])`, err: `unknown op "atention" (did you mean "attention"?`},
		{expr: `checkpoint(policy = "op", save = ["convolution"])`, err: `save: unknown op "convolution" (known: mm, bmm, attention, reduce_scatter, all_to_all, topk, abs, max)`},
		{expr: `checkpoint(policy = "op", save = ["sdpa", "sdpa"])`, err: `unknown op "sdpa" (did you mean "attention"?`},
		{expr: `checkpoint(policy = "layer", every = 2, save = ["mm"])`, err: `policy="layer" takes every=k`},
		{expr: `checkpoint(policy = 1)`, err: `policy must be "op" or "layer" (got int)`},
		{expr: `checkpoint(policy = "op", modules = ["mlp"])`, err: "not both"},
		{expr: `checkpoint(budget = 0.25)`, want: "checkpoint(budget=0.25)"},
		{expr: `checkpoint(budget = 0.25).budget`, want: "0.25"},
		{expr: `checkpoint(budget = 1.5)`, err: "a fraction must be in [0, 1] (got 1.5)"},
		{expr: `checkpoint(budget = 0.5, policy = "op")`, err: "checkpoint takes budget= alone"},
		{expr: `checkpoint(budget = "half")`, err: "budget must be a fraction in [0, 1] or bytes (got string)"},
		{expr: `lora()`, want: `lora(rank=8, alpha=16, targets=["q", "v"])`},
		{expr: `lora(rank = 16, alpha = 32, targets = "all-linear", dropout = 0.05)`, want: `lora(rank=16, alpha=32, targets=["all-linear"], dropout=0.05)`},
		{expr: `lora().targets`, want: `("q", "v")`},
		{expr: `lora().autocast_adapter_dtype`, want: `True`},
		{expr: `lora(autocast_adapter_dtype = False)`, want: `lora(rank=8, alpha=16, targets=["q", "v"], autocast_adapter_dtype=False)`},
		{expr: `lora(autocast_adapter_dtype = "no")`, err: `autocast_adapter_dtype must be True or False (got string)`},
		{expr: `lora(autocast_adapter_dtype = None)`, err: `autocast_adapter_dtype must be True or False (got NoneType)`},
		{expr: `lora(rank = 0)`, err: "rank must be positive (got 0)"},
		{expr: `lora(targets = ["query", "attention.self.value"]).targets`, want: `("query", "attention.self.value")`},
		{expr: `lora(targets = ["layer.3.query"])`, err: `names one layer`},
		{expr: `lora(targets = ["q.*"])`, err: `no patterns`},
		{expr: `lora(targets = [])`, err: "targets must name at least one module role"},
		{expr: `lora(dropout = 1)`, err: "dropout must be in [0, 1) (got 1)"},
	})
}

// TestPlanWithoutSeq checks plans of models that do not read tokens: seq
// stays None (the engine uses one position per sample).
func TestPlanWithoutSeq(t *testing.T) {
	runPreludeCases(t, `q = train(model("mlp", linear(8, 8), loss = "mse"), batch = 4)`, []evalCase{
		{expr: "q", want: `train(model="mlp", batch=4, gpu="H100-80GB")`},
		{expr: "q.seq", want: "None"},
		{expr: "q.replace(seq = 16)", want: `train(model="mlp", batch=4, seq=16, gpu="H100-80GB")`},
		{expr: `str(simulate(q)).split("\n")[0]`, want: `"mlp on H100-80GB: batch 4, fp32, adamw(), no checkpointing"`},
	})
}

// TestPlanTitleZeroPrecision: a custom autocast policy under ZeRO is
// titled with the dtypes DeepSpeed holds (the model in bf16, its master
// copy), not the policy's fp32 parameters; without ZeRO as written.
func TestPlanTitleZeroPrecision(t *testing.T) {
	runPreludeCases(t, `q = train(model("mlp", linear(8, 8), loss = "mse"), batch = 4, precision = precision("bf16-mixed", master = "bf16", optimizer_states = "bf16"))`, []evalCase{
		{expr: `str(simulate(q.replace(parallel = parallel(zero = 2)))).split("\n")[0]`,
			want: `"mlp on H100-80GB: batch 4, params bf16, compute bf16, grads bf16, master bf16, states bf16, adamw(), no checkpointing"`},
		{expr: `str(simulate(q.replace(precision = precision("bf16-mixed", optimizer_states = "fp32"), parallel = parallel(zero = 2)))).split("\n")[0]`,
			want: `"mlp on H100-80GB: batch 4, params bf16, compute bf16, grads bf16, master fp32, states fp32, adamw(), no checkpointing"`},
		{expr: `str(simulate(q)).split("\n")[0]`,
			want: `"mlp on H100-80GB: batch 4, params fp32, compute bf16, grads fp32, master bf16, states bf16, adamw(), no checkpointing"`},
	})
}
