package builtins

import "testing"

// Llama-2-7B as examples/quickstart.star builds it, on one A100-80GB with
// bf16 autocast and AdamW (128 GiB needed), and a small decoder that
// fits.
const advisePrelude = `
dim = 4096
block = sequential(
    residual(sequential(rmsnorm(dim), attention(dim, heads = 32, rope = True))),
    residual(sequential(rmsnorm(dim), mlp(dim, hidden = 11008, act = "swiglu"))),
)
llama = model("llama-2-7b", embedding(32000, dim), repeat(block, 32), rmsnorm(dim), vocab = 32000)
plan = train(llama, batch = 1, seq = 2048, precision = "bf16-mixed", optimizer = adamw(), gpu = "A100-80GB")
a = advise(plan)
fitting = plan.replace(precision = "bf16", checkpoint = "full")
fast = advise(fitting, goal = "speed")
blk = sequential(residual(sequential(rmsnorm(64), attention(64, 4))), residual(sequential(rmsnorm(64), mlp(64, 256, act = "swiglu"))))
tiny = train(model("tiny", embedding(1000, 64), repeat(blk, 4), rmsnorm(64), vocab = 1000), seq = 64, gpu = "A100-80GB")
mb = max_batch(fitting)
ms = max_seq(fitting, budget = 0.9)
cap = simulate(plan).capacity
by_hand = ["optimizer=adamw8bit()", "precision=\"bf16\"", "optimizer=adamw(impl=\"fused\")", "checkpoint=\"full\""]
`

func TestAdvise(t *testing.T) {
	runPreludeCases(t, advisePrelude, []evalCase{
		{expr: "type(a)", want: `"table"`},
		{expr: "a.columns", want: `["change", "fits", "device_used", "headroom", "step_time", "time_change", "tokens_per_s", "why", "cost", "plan", "report"]`},
		{expr: "len(a)", want: "10"},
		// The script's own changes (pure bf16, 8-bit or fused AdamW, full checkpointing) first, by step time.
		{expr: "all([c in by_hand for c in a[0][\"change\"].split(\", \")])", want: "True"},
		{expr: "[r[\"change\"] for r in a.rows[:3] if r[\"change\"] in by_hand]", want: `["precision=\"bf16\""]`},
		{expr: "all([r[\"fits\"] for r in a])", want: "True"},
		{expr: "[r[\"step_time\"] for r in a] == sorted([r[\"step_time\"] for r in a])", want: "True"},
		// Each row's plan is train()'s, from the keywords it shows; its replay is the row's.
		{expr: "all([simulate(r[\"plan\"]).device_used == r[\"device_used\"] and simulate(r[\"plan\"]).step_time == r[\"step_time\"] for r in a])", want: "True"},
		{expr: "a[0][\"plan\"].precision", want: `precision("bf16")`},
		{expr: "a[0][\"plan\"].optimizer", want: `adamw(impl="fused")`},
		{expr: "a[2][\"time_change\"] == a[2][\"step_time\"] / simulate(plan).step_time - 1", want: "True"},
		{expr: "a[2][\"headroom\"] == cap - a[2][\"device_used\"]", want: "True"},
		// params and the foreach temporaries both fall 12.55 GiB (fp32 -> bf16); the temporaries' per-tensor blocks round a little more
		{expr: "a[2][\"why\"]", want: `"optimizer -25.10 GiB; params -12.55 GiB; saved for backward -2.52 GiB"`},
		{expr: "a.title == \"advise: llama-2-7b on A100-80GB: batch 1 x seq 2048, bf16-mixed, adamw(), no checkpointing; \" + simulate(plan).summary.rstrip(\".\")", want: "True"},
		{expr: "simulate(plan).summary.startswith(\"does not fit: needs 128.04 GiB of \")", want: "True"},
		{expr: "a.notes[-1].startswith(\"16 single changes and 97 pairs replayed (4 rejected by the plan)\")", want: "True"},
		{expr: "len(advise(plan, top = None)) > len(a)", want: "True"},
		{expr: "all([r[\"device_used\"] <= 70 * GiB for r in advise(plan, budget = 70 * GiB)])", want: "True"},
		{expr: "all([r[\"device_used\"] <= 0.8 * 80 * GiB for r in advise(plan, budget = 0.8, max_changes = 1)])", want: "True"},
		// A plan that fits: nothing to change; goal="speed" finds faster ones.
		{expr: "len(advise(fitting))", want: "0"},
		{expr: "advise(fitting).notes[0] == \"the plan fits as it is: 65.15 GiB of %s used, %s headroom; advise(plan, goal=\\\"speed\\\") looks for faster plans that still fit\" % (fmt_bytes(cap), fmt_bytes(cap - simulate(fitting).device_used))", want: "True"},
		{expr: "fast[0][\"change\"].startswith(\"checkpoint=\\\"none\\\"\")", want: "True"},
		{expr: "all([r[\"fits\"] and r[\"step_time\"] < simulate(fitting).step_time for r in fast])", want: "True"},
		// max_batch and max_seq: the value fits, one more does not.
		{expr: "type(mb)", want: `"limit"`},
		{expr: "[simulate(mb.plan).fits, simulate(fitting.replace(batch = mb.value + 1)).fits, mb.next == mb.value + 1]", want: "[True, False, True]"},
		{expr: "mb.report.device_used == simulate(mb.plan).device_used and mb.plan.batch == mb.value", want: "True"},
		{expr: "mb.next_report.oom.tensor == simulate(fitting.replace(batch = mb.next)).oom.tensor", want: "True"},
		{expr: "mb.replays < 50 and not mb.capped and mb.next_error == None", want: "True"},
		{expr: "str(mb).startswith(\"max_batch %d: batch %d runs out of memory at \" % (mb.value, mb.next))", want: "True"},
		{expr: "[ms.value > 2048, ms.report.device_used <= int(0.9 * cap), simulate(fitting.replace(seq = ms.value + 1)).device_used > int(0.9 * cap)]", want: "[True, True, True]"},
		{expr: "str(ms).endswith(\"uses %s, over the budget; %d replays\" % (fmt_bytes(ms.next_report.device_used), ms.replays))", want: "True"},
	})
}

func TestAdviseErrors(t *testing.T) {
	runPreludeCases(t, `
blk = sequential(residual(sequential(rmsnorm(64), attention(64, 4))), residual(sequential(rmsnorm(64), mlp(64, 256, act = "swiglu"))))
tiny = train(model("tiny", embedding(1000, 64), repeat(blk, 4), rmsnorm(64), vocab = 1000), seq = 64, gpu = "A100-80GB")
mlp_only = train(model("m", linear(16, 16)), gpu = "A100-80GB")
`, []evalCase{
		{expr: "advise(3)", err: "advise: plan must be a plan from train() (got int)"},
		{expr: "advise(tiny, goal = \"fast\")", err: `advise: unknown goal "fast" (known: fit, speed)`},
		{expr: "advise(tiny, max_changes = 3)", err: "advise: max_changes must be 1 or 2 (got 3)"},
		{expr: "advise(tiny, top = 0)", err: "top must be at least 1, or None for every row (got 0)"},
		{expr: "advise(tiny, budget = 1.5)", err: "budget must be a fraction in (0, 1] or bytes up to the GPU's 79.26 GiB (got 1.5)"},
		{expr: "advise(tiny, budget = 200 * GiB)", err: "budget must be a fraction in (0, 1] or bytes up to the GPU's 79.26 GiB"},
		{expr: "advise(tiny, budget = 200.0 * GiB)", err: "budget must be a fraction in (0, 1] or bytes up to the GPU's 79.26 GiB"},
		// A float of bytes, as arithmetic on a report makes it: the same budget as the int.
		{expr: "advise(tiny, budget = 0.99 * simulate(tiny).device_used).notes == advise(tiny, budget = int(0.99 * simulate(tiny).device_used)).notes", want: "True"},
		{expr: "advise(tiny, budget = \"half\")", err: "budget must be None, bytes or a fraction of the GPU's memory (got string)"},
		{expr: "advise(tiny, goal = \"speed\", budget = 501 * MiB)", err: `goal="speed" looks for faster plans that still fit, but this one does not fit (528.00 MiB used of 501.00 MiB)`},
		{expr: "advise(tiny, budget = 1000)", err: "advise: a budget of 1000 B is no more than the CUDA context alone (500.00 MiB on the A100-80GB)"},
		{expr: "max_batch(\"p\")", err: "max_batch: plan must be a plan from train() (got string)"},
		{expr: "max_seq(mlp_only)", err: `model "m" reads no sequences (seq is unset)`},
		{expr: "max_seq(tiny.replace(tokens_per_batch = 128))", err: "the plan packs sequences into tokens_per_batch"},
		{expr: "max_batch(tiny, budget = -1)", err: "budget must be a fraction in (0, 1] or bytes"},
		{expr: "max_batch(tiny, budget = 501 * MiB).value", want: "0"},
		{expr: "max_seq(tiny, budget = 1)", err: "max_seq: a budget of 1 B is no more than the CUDA context alone"},
	})
}

// checkpoint(budget=...): a fraction of the saved activations or bytes of
// device memory, solved per block when the plan is simulated.
func TestCheckpointBudget(t *testing.T) {
	runPreludeCases(t, `
blk = sequential(residual(sequential(rmsnorm(256), attention(256, 4))), residual(sequential(rmsnorm(256), mlp(256, 1024, act = "swiglu"))))
p = train(model("tiny", embedding(8000, 256), repeat(blk, 8), rmsnorm(256), vocab = 8000), batch = 8, seq = 512, gpu = "A100-80GB")
half = simulate(p.replace(checkpoint = checkpoint(budget = 0.5)))
none = simulate(p)
full = simulate(p.replace(checkpoint = "full"))
`, []evalCase{
		{expr: "checkpoint(budget = 0.5)", want: "checkpoint(budget=0.5)"},
		{expr: "[checkpoint(budget = 70 * GiB), checkpoint(budget = 3 * MiB), checkpoint(budget = 1000)]", want: "[checkpoint(budget=70 * GiB), checkpoint(budget=3 * MiB), checkpoint(budget=1000)]"},
		{expr: "[checkpoint(budget = 0.25).budget, checkpoint(budget = 0.25).mode, checkpoint(budget = 2 * GiB).budget, checkpoint(\"full\").budget]", want: `[0.25, "budget", 2147483648, None]`},
		{expr: "p.replace(checkpoint = checkpoint(budget = 0.5)).checkpoint", want: "checkpoint(budget=0.5)"},
		{expr: "str(p.replace(checkpoint = checkpoint(budget = 0.5))).endswith(\"checkpoint=checkpoint(budget=0.5), gpu=\\\"A100-80GB\\\")\")", want: "True"},
		{expr: "half.notes[0].startswith(\"checkpoint(budget=0.5) chose checkpoint(blocks: \")", want: "True"},
		{expr: "full.saved_activations < half.saved_activations and half.saved_activations < none.saved_activations", want: "True"},
		{expr: "none.step_time < half.step_time and half.step_time < full.step_time", want: "True"},
		{expr: "checkpoint(budget = 1.5)", err: "checkpoint budget: a fraction must be in [0, 1] (got 1.5)"},
		{expr: "checkpoint(budget = 0)", err: "checkpoint: budget bytes must be positive (got 0)"},
		{expr: "checkpoint(budget = \"half\")", err: "checkpoint: budget must be a fraction in [0, 1] or bytes (got string)"},
		{expr: "checkpoint(\"full\", budget = 0.5)", err: "checkpoint takes budget= alone"},
		{expr: "simulate(p.replace(checkpoint = checkpoint(budget = 0.5), parallel = parallel(pp = 2)))", err: "checkpoint(budget=...) is solved for plans without pipeline stages"},
	})
}

// A small ensemble graph model with a validation pass: the rows that
// change the model's chunks or the members are train()'s plans too. PyG's
// message passing, whose per-edge tensors make the validation pass fail
// (the Triton kernel has none: it fails in training first).
func TestAdviseGraph(t *testing.T) {
	runPreludeCases(t, `
g = grid("g", 20000)
m = icosahedral_mesh("m", 4)
enc = graph_transformer(g, m, knn_edges(g, m, 4), 256, 4, chunks = 2, attention_backend = "pyg")
dec = graph_transformer(m, g, knn_edges(m, g, 3), 256, 4, attention_backend = "pyg")
proc = graph_transformer_processor(multiscale_edges(m), 4, 256, 4, segments = 1, edge_attrs = 3, trainable_edge_attrs = 0, attention_backend = "pyg")
model = encoder_processor_decoder("tiny", g, m, enc, proc, dec, inputs = 10, outputs = 5)
p = train(model, batch = 2, members = 2, gpu = gpu("A100-80GB", memory = 2 * GiB), validation = True)
a = advise(p, top = None)
chunked = [r for r in a if "eval_chunks" in r["change"]]
`, []evalCase{
		{expr: "len(a) > 0 and all([r[\"fits\"] for r in a])", want: "True"},
		{expr: "all([simulate(r[\"plan\"]).device_used == r[\"device_used\"] and simulate(r[\"plan\"]).step_time == r[\"step_time\"] for r in a])", want: "True"},
		{expr: "len(chunked) > 0 and all([r[\"plan\"].model != p.model for r in chunked])", want: "True"},
		{expr: "[r[\"plan\"].members_mode for r in a if r[\"change\"] == \"members_mode=\\\"sequential\\\"\"]", want: `["sequential"]`},
		{expr: "[n for n in a.notes if \"gets past the failure in validation\" in n] != []", want: "True"},
	})
}

// TestAdviseAdapterDType: a PEFT LoRA plan on a bf16 model is offered its
// adapters in bf16 (lora(autocast_adapter_dtype=False)); the row's plan is
// train()'s with that lora() and replays as the row says.
func TestAdviseAdapterDType(t *testing.T) {
	runPreludeCases(t, `
blk = sequential(residual(sequential(rmsnorm(256), attention(256, 4))), residual(sequential(rmsnorm(256), mlp(256, 1024, act = "swiglu"))))
tl = train(model("tiny", embedding(1000, 256), repeat(blk, 4), rmsnorm(256), vocab = 1000), batch = 8, seq = 512, precision = "bf16",
           gpu = "A100-80GB", lora = lora(rank = 16, targets = ["all-linear"]))
bf = tl.replace(lora = lora(rank = 16, targets = ["all-linear"], autocast_adapter_dtype = False))
a = advise(tl, budget = simulate(bf).device_used, max_changes = 1, top = None)
rows = [r for r in a if r["change"].startswith("lora=")]
`, []evalCase{
		{expr: "simulate(bf).peak_allocated < simulate(tl).peak_allocated", want: "True"},
		{expr: "[r[\"change\"] for r in rows]", want: `["lora=lora(rank=16, alpha=16, targets=[\"all-linear\"], autocast_adapter_dtype=False)"]`},
		{expr: "rows[0][\"plan\"].lora.autocast_adapter_dtype", want: "False"},
		{expr: "simulate(rows[0][\"plan\"]).device_used == rows[0][\"device_used\"]", want: "True"},
	})
}
