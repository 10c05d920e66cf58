package lang

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"
)

// fuzzSeeds are scripts that reach most builtins: layers, models, plans,
// reports and their attributes, tables, graphs, hf_config, units.
var fuzzSeeds = []string{
	`m = model("tiny", embedding(1000, 64), repeat(sequential(residual(sequential(rmsnorm(64), attention(64, heads = 4, rope = True))), residual(sequential(rmsnorm(64), mlp(64, hidden = 256, act = "swiglu")))), 2), rmsnorm(64), vocab = 1000)
r = simulate(train(m, batch = 2, seq = 128, precision = "bf16-mixed", optimizer = adamw(), checkpoint = "full", gpu = "A100-80GB"))
print(r)
print(r.peak_allocated, r.peak_reserved, r.device_used, r.fits, r.breakdown, r.largest, r.oom, r.states, r.peak_at)
print(json.encode(r.as_dict()))
print(m.describe())
`,
	`m = model("lin", linear(1024, 4096), linear(4096, 1024), loss = "mse")
p = train(m, batch = 8, gpu = gpu(name = "custom", memory = 16 * GiB))
print(simulate(p.replace(batch = 16)).summary)
print(fmt_bytes(simulate(p).peak_allocated))
`,
	`m = model("moe", embedding(512, 64), moe(64, 128, experts = 8, top_k = 2), vocab = 512)
r = simulate(train(m, batch = 1, seq = 64, parallel = parallel(dp = 8, zero = 3)))
print(r.comm_bytes, r.traffic, r.step_time, r.mfu)
`,
	`m = hf_config("config.json", attn = "eager")
print(m.params)
r = simulate(train(m, batch = 1, seq = 16, lora = lora(rank = 8), quant = "nf4", precision = "bf16"))
print(r.states)
`,
	`t = table("ngram", rows = 100000, dim = 16, heads = 4, grad = "sparse", placement = "host")
m = model("t", embedding(1000, 64), residual(t), attention(64, 4), vocab = 1000, tie_embeddings = True)
print(simulate(train(m, batch = 4, seq = 16)).tables)
`,
	`g = grid("era", 4000)
mh = mesh("h", 1000)
enc = graph_transformer(g, mh, knn_edges(g, mh, 4), channels = 64, heads = 4)
proc = transformer_processor(mh, layers = 2, channels = 64, heads = 4)
dec = graph_transformer(mh, g, knn_edges(mh, g, 3), channels = 64, heads = 4)
m = encoder_processor_decoder("w", g, mh, enc, proc, dec, inputs = 10, outputs = 8)
print(simulate(train(m, members = 2, members_mode = "sequential")))
`,
	`g = grid("era", 4000)
mh = mesh("h", 1000)
enc = graph_transformer(g, mh, knn_edges(g, mh, 4), channels = 64, heads = 4, edge_attrs = 3, trainable_edge_attrs = 0)
proc = graph_transformer_processor(multiscale_edges(mh), 4, 64, 4, segments = 2, eval_chunks = 4)
dec = graph_transformer(mh, g, knn_edges(mh, g, 3), channels = 64, heads = 4)
m = encoder_processor_decoder("w", g, mh, enc, proc, dec, inputs = 10, outputs = 8, node_attrs = 0, data_variables = 12)
r = simulate(train(m, members = 2, validation = True, expandable_segments = True))
print(r.states, r.largest)
`,
	`load("lib.star", "block")
x = [block(d) for d in [64, 128]]
print(x, GiB, KiB, bf16.bits, fp32.name)
for b in [1, 2, 4]:
    print(b)
`,
	`emit(1)
expect(True, "ok")
def main():
    return [1, "a"]
`,
	`load("@stdlib//llm.star", "llama")
m = llama("7b")
print(m.params)
`,
}

// FuzzScript runs arbitrary source through the interpreter with the memsh
// builtins, a small step limit and a timeout: it must never panic, hang or
// hit an internal error, and its errors must format.
func FuzzScript(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	if fuzzing() { // the examples are slow seeds: only when fuzzing
		examples, _ := filepath.Glob(filepath.Join("..", "examples", "*.star"))
		for _, name := range examples {
			if src, err := os.ReadFile(name); err == nil {
				f.Add(string(src))
			}
		}
	}
	config, err := os.ReadFile(filepath.Join("..", "sim", "testdata", "hf", "llama-2-7b.json"))
	if err != nil {
		f.Fatal(err)
	}
	files := tree("lib.star", "def block(d):\n    return mlp(d, 4 * d)\n", "config.json", string(config))
	f.Fuzz(func(t *testing.T, src string) {
		runFuzzScript(t, files, src)
	})
}

// runFuzzScript runs src as main.star over files with a step limit and a
// one-second timeout, and fails on a hang, an internal error or an error
// that does not format.
func runFuzzScript(t *testing.T, files fstest.MapFS, src string) {
	t.Helper()
	in := New(Options{MaxSteps: 100_000, Files: files})
	defer in.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := in.ExecFile(ctx, "main.star", []byte(src))
		done <- err
	}()
	// While fuzzing, an input past the window is a hang; a plain go test
	// of the seeds leaves hangs to go test's -timeout, since a wall clock
	// on a loaded machine says nothing.
	var hang <-chan time.Time
	if fuzzing() {
		// Go's fuzz worker panics on an input past 10 s and records no
		// crasher (internal/fuzz/worker.go, RunFuzzWorker): fail first.
		hang = time.After(8 * time.Second)
	}
	var err error
	select {
	case err = <-done:
	case <-hang:
		// The timeout stops Starlark between steps; one builtin call can
		// run on. The caps keep the longest (a simulate() at maxOps) to a
		// second or two, about three times that in the fuzzer's
		// instrumented build (see sim's failSlow): 7 s past it is a
		// builtin that neither finishes nor heeds cancellation.
		t.Fatalf("script still running 7 s after its timeout")
	}
	if err == nil {
		return
	}
	var msg strings.Builder
	in.FormatError(&msg, err, false)
	if strings.Contains(msg.String(), "internal error") || strings.Contains(msg.String(), "goroutine ") {
		t.Fatalf("script error is a bug:\n%s", msg.String())
	}
	in.FormatError(io.Discard, err, true)
}

// fuzzing reports whether the test binary runs with -test.fuzz.
func fuzzing() bool {
	f := flag.Lookup("test.fuzz")
	return f != nil && f.Value.String() != ""
}

// FuzzScriptSizes puts arbitrary numbers (huge, zero, negative) into a
// script that builds a transformer and simulates a plan through the
// builtins: layer constructors, model(), train(), parallel(), simulate()
// and the report's attributes. Every input must run or fail with a
// script error, never panic or hit an internal error.
func FuzzScriptSizes(f *testing.F) {
	f.Add(int64(1000), int64(64), int64(4), int64(2), int64(256), int64(2), int64(2), int64(128), int64(1), int64(1), uint8(0))
	f.Add(int64(32000), int64(4096), int64(32), int64(8), int64(11008), int64(32), int64(1), int64(4096), int64(8), int64(2), uint8(0x55))
	f.Add(int64(1)<<40, int64(1)<<20, int64(1), int64(1), int64(1)<<20, int64(1)<<20, int64(1)<<30, int64(1)<<30, int64(1)<<10, int64(3), uint8(0xaa))
	f.Add(int64(-1), int64(0), int64(-4), int64(0), int64(-256), int64(0), int64(-2), int64(0), int64(-1), int64(-1), uint8(0xff))
	f.Add(int64(9223372036854775807), int64(-9223372036854775808), int64(3), int64(5), int64(7), int64(11), int64(13), int64(17), int64(19), int64(23), uint8(0x0f))
	f.Fuzz(func(t *testing.T, vocab, dim, heads, kvHeads, hidden, layers, batch, seq, dp, tp int64, opt uint8) {
		acts := []string{"gelu", "swiglu", "relu", "geglu"}
		impls := []string{"flash", "sdpa", "eager", "flash"}
		precs := []string{"bf16-mixed", "fp32", "bf16", "fp16-mixed"}
		ckpts := []string{"none", "full", "selective", "none"}
		src := fmt.Sprintf(`block = sequential(
    residual(sequential(rmsnorm(%[2]d), attention(%[2]d, heads = %[3]d, kv_heads = %[4]d, impl = %[12]q, rope = True))),
    residual(sequential(layernorm(%[2]d), mlp(%[2]d, hidden = %[5]d, act = %[11]q))),
)
m = model("fuzz", embedding(%[1]d, %[2]d), repeat(block, %[6]d), rmsnorm(%[2]d), vocab = %[1]d, tie_embeddings = %[15]s)
print(m.params, m.describe())
p = train(m, batch = %[7]d, seq = %[8]d, precision = %[13]q, checkpoint = %[14]q,
          parallel = parallel(dp = %[9]d, tp = %[10]d, zero = %[16]d), grad_accum = %[17]d)
r = simulate(p)
print(r, r.summary, r.breakdown, r.largest, r.oom, r.states, r.peak_at, r.traffic, r.step_time, r.mfu)
print(json.encode(r.as_dict()))
print(simulate(p.replace(batch = %[7]d * 2)).peak_allocated)
`, vocab, dim, heads, kvHeads, hidden, layers, batch, seq, dp, tp,
			acts[opt%4], impls[opt>>2%4], precs[opt>>4%4], ckpts[opt>>6%4],
			[]string{"False", "True"}[opt&1], int(opt>>1)%4, 1+int64(opt>>3&1))
		runFuzzScript(t, fstest.MapFS{}, src)
	})
}

// knobTemplates are scripts with eight numeric holes (%[1]d ... %[8]d) that
// reach the knobs FuzzScriptSizes does not: experts and tables, graph
// models, pipeline layouts, fine-tuning options, sweeps, searches and step
// series. Counts like experts, heads, chunks and stages are where a
// builtin could allocate per item before checking sizes.
var knobTemplates = []string{
	`m = model("moe", embedding(%[1]d, 64), moe(64, %[2]d, experts = %[3]d, top_k = %[4]d, shared_experts = %[5]d, capacity = %[6]d / 4.0), vocab = %[1]d)
print(simulate(train(m, batch = %[7]d, seq = %[8]d, parallel = parallel(dp = %[3]d, ep = %[4]d))).summary)
`,
	`t = table("t", rows = %[1]d, dim = %[2]d, heads = %[3]d, reads_per_token = %[4]d, grad = "sparse")
m = model("t", embedding(100, %[2]d * %[3]d), residual(t), vocab = 100)
p = train(m, batch = %[5]d, seq = %[6]d)
print(simulate(p).summary)
print(table_steps(p, [%[7]d] * %[8]d))
`,
	`g = grid("g", %[1]d)
me = mesh("me", %[2]d)
enc = graph_transformer(g, me, knn_edges(g, me, %[3]d), channels = 16, heads = 2, chunks = %[4]d, eval_chunks = %[5]d)
proc = transformer_processor(me, layers = %[6]d, channels = 16, heads = 2)
dec = graph_transformer(me, g, knn_edges(me, g, %[3]d), channels = 16, heads = 2)
m = encoder_processor_decoder("w", g, me, enc, proc, dec, inputs = 4, outputs = 4)
print(simulate(train(m, members = %[7]d, members_mode = "sequential", validation = True, expandable_segments = True)).summary)
print(simulate(train(m, members = %[8]d, phase = "eval")).summary)
`,
	`m = model("m", embedding(100, 64), repeat(sequential(residual(attention(64, 4)), residual(mlp(64, 128))), %[1]d), rmsnorm(64), vocab = 100)
p = train(m, batch = %[2]d, seq = %[3]d, parallel = parallel(pp = %[4]d, virtual_stages = %[5]d, micro_batches = %[6]d, cp = %[7]d, tp = %[8]d))
print(simulate(p).summary)
`,
	`m = model("m", embedding(100, 64), repeat(sequential(residual(attention(64, 4)), residual(mlp(64, 128))), 2), vocab = 100)
p = train(m, batch = %[1]d, seq = %[2]d, loss_chunks = %[3]d, tokens_per_batch = %[4]d, lora = lora(rank = %[5]d), grad_accum = %[6]d, first_step = True)
print(simulate(p).summary)
t = sweep(p, batch = list(range(1, %[7]d)), max = %[8]d)
print(t)
`,
	`g = grid("g", %[1]d)
me = mesh("me", %[2]d)
enc = graph_transformer(g, me, knn_edges(g, me, %[3]d), channels = 16, heads = 2, edge_attrs = 3, trainable_edge_attrs = 0, chunks = %[4]d)
proc = graph_transformer_processor(multiscale_edges(me), %[5]d, 16, 2, segments = %[6]d, eval_chunks = %[4]d)
dec = graph_transformer(me, g, knn_edges(me, g, %[3]d), channels = 16, heads = 2)
m = encoder_processor_decoder("w", g, me, enc, proc, dec, inputs = 4, outputs = 4, data_variables = %[7]d, data_dates = %[8]d)
print(simulate(train(m, members = 2, members_mode = "sequential", validation = True, rollout = %[6]d)).summary)
`,
	`m = model("m", embedding(100, 64), repeat(sequential(residual(attention(64, 4)), residual(mlp(64, 128))), %[1]d), vocab = 100)
print(search(m, gpus = %[2]d, global_batch = %[3]d, seq = %[4]d, nodes = %[5]d, gpus_per_node = %[6]d, top = %[7]d, max_layouts = %[8]d))
`,
	`m = model("m", embedding(100, 64), repeat(sequential(residual(attention(64, 4)), residual(mlp(64, 128))), 2), vocab = 100)
p = parallel(dp = %[1]d, zero = %[2]d, reduce_bucket_size = %[3]d, stage3_prefetch_bucket_size = %[4]d,
             stage3_param_persistence_threshold = %[5]d, stage3_max_live_parameters = %[6]d)
print(simulate(train(m, batch = %[7]d, seq = %[8]d, parallel = p)).summary)
`,
	`m = model("m", embedding(%[1]d, 64), repeat(sequential(residual(attention(64, 4)), residual(mlp(64, 128))), %[2]d), rmsnorm(64), vocab = %[1]d)
tr = ["trl", "torchtune", "llamafactory"][%[3]d %% 3]
trl = ["1.15", "1.8"][%[3]d %% 2] if tr == "trl" else None
ref0 = ["model", "adapters", "precomputed", "none"][%[4]d %% 4]
ref = "none" if tr != "trl" and ref0 == "precomputed" else ref0
l = lora(rank = 4) if ref == "adapters" else None
print(simulate(train(m, batch = %[5]d, seq = %[6]d, lora = l, preference = dpo(reference = ref, trl = trl, trainer = tr), parallel = parallel(dp = %[7]d),
                     trainable = None if l else ["layers\\.%[8]d"])).summary)
`,
}

// FuzzScriptKnobs fills knobTemplates with arbitrary numbers: every input
// must run or fail with a script error, within the timeout.
func FuzzScriptKnobs(f *testing.F) {
	seeds := [][8]int64{
		{100, 128, 8, 2, 1, 4, 2, 16},
		{1000, 16, 4, 4, 2, 16, 3, 5},
		{400, 40, 4, 2, 2, 2, 2, 2},
		{4, 2, 64, 2, 1, 4, 1, 1},
		{2, 64, 2, 128, 8, 2, 10, 100},
		{4, 8, 8, 16, 1, 8, 3, 200000},
		{1 << 40, 1 << 40, 1 << 40, 1 << 40, 1 << 40, 1 << 40, 1 << 40, 1 << 40},
		{-1, 0, -1 << 40, 0, -1, 0, -1, 0},
	}
	for i, s := range seeds {
		f.Add(uint8(i), s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7])
	}
	dpo := uint8(len(knobTemplates) - 1) // DPO's references and releases, trainable patterns
	f.Add(dpo, int64(1000), int64(2), int64(0), int64(0), int64(2), int64(64), int64(1), int64(1))
	f.Add(dpo, int64(1000), int64(2), int64(1), int64(1), int64(1), int64(32), int64(2), int64(0))
	f.Add(dpo, int64(1000), int64(2), int64(0), int64(2), int64(1), int64(1), int64(1), int64(9))
	f.Fuzz(func(t *testing.T, sel uint8, a, b, c, d, e, g, h, k int64) {
		src := fmt.Sprintf(knobTemplates[int(sel)%len(knobTemplates)], a, b, c, d, e, g, h, k)
		runFuzzScript(t, fstest.MapFS{}, src)
	})
}
