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
	var err error
	select {
	case err = <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("script still running 4 s after its timeout")
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
