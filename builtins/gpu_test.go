package builtins

import (
	"testing"

	"github.com/memsh/memsh/builtins/plans"
	"go.starlark.net/starlark"
)

func TestGPU(t *testing.T) {
	runEvalCases(t, []evalCase{
		{expr: `gpu("H200").memory`, want: "150754820096"},
		{expr: `gpu("H200").memory // MiB`, want: "143771"},
		{expr: `gpu("A100").name`, want: `"A100-80GB"`},
		{expr: `gpu("a100").memory`, want: "85899345920"},
		{expr: `gpu("H100")`, want: `gpu("H100-80GB")`},
		{expr: `gpu("H100").bf16_tflops`, want: "989.4"},
		{expr: `gpu("H100").link_gbps`, want: "450.0"},
		{expr: `gpu("RTX-4090").link_gbps`, want: "0.0"},
		{expr: `gpu("V100-16GB").context // MiB`, want: "1343"},
		{expr: `type(gpu("H100"))`, want: `"gpu"`},
		{expr: `gpu("H100") == gpu("H100-80GB")`, want: "True"},
		{expr: `gpu("H100") != gpu("H200")`, want: "True"},
		{expr: `len(dict([(gpu("H100"), 1), (gpu("H100-80GB"), 2)]))`, want: "1"},
		{expr: `gpu(name="x", memory=24 * GiB)`, want: `gpu(name="x", memory=25769803776, context=524288000)`},
		{expr: `gpu(name="x", memory=24 * GiB, bf16_tflops=100, hbm_gbps=1000.5, context=0).hbm_gbps`, want: "1000.5"},
		{expr: `gpu(name="x", memory=80e9).memory`, want: "80000000000"},
		{expr: `gpu("H100", memory=96 * GiB).memory`, want: "103079215104"},
		{expr: `gpu("H100", memory=96 * GiB).bf16_tflops`, want: "989.4"},
		{expr: `gpu("H100", memory=96 * GiB).name`, want: `"H100-80GB"`},
		{expr: `gpu(name="x", memory=1 * GiB).source`, want: `"custom gpu() at test.star:1:4"`},
		{expr: `gpu("H300")`, err: `unknown gpu "H300" (close matches: H200, B200)`},
		{expr: `gpu("x", bf16_tflops=1)`, err: `a custom gpu needs memory=`},
		{expr: `gpu(name="x", memory=0)`, err: "memory must be positive (got 0 bytes)"},
		{expr: `gpu(name="x", memory=-1)`, err: "memory must be positive (got -1 bytes)"},
		{expr: `gpu(name="x", memory=1.5)`, err: "memory must be a whole number (got 1.5)"},
		{expr: `gpu(name="x", memory="80GB")`, err: "memory must be an int (got string)"},
		{expr: `gpu(name="x", memory=1 << 70)`, err: "memory out of range"},
		{expr: `gpu(name="x", memory=GiB, hbm_gbps=-1)`, err: "hbm_gbps must not be negative (got -1)"},
		{expr: `gpu(name="x", memory=GiB, context=2 * GiB)`, err: "context (2.00 GiB) must be smaller than memory (1.00 GiB)"},
		{expr: `gpu(name="", memory=GiB)`, err: "gpu name must not be empty"},
		{expr: `gpu("H100", 80)`, err: "gpu takes its figures by keyword"},
		{expr: `gpu()`, err: "gpu: missing argument for name"},
		{expr: `gpu("H100").nope`, err: "gpu has no .nope field or method"},
	})
}

func TestGPUUnpack(t *testing.T) {
	var g plans.GPU
	if err := g.Unpack(starlark.String("h200")); err != nil || g.Device().Name != "H200" {
		t.Fatalf("Unpack(h200) = %v, %v", g, err)
	}
	if err := g.Unpack(starlark.String("nope")); err == nil {
		t.Fatal("Unpack(nope) succeeded")
	}
	if err := g.Unpack(starlark.MakeInt(1)); err == nil || err.Error() != "got int, want gpu or string" {
		t.Fatalf("Unpack(1) = %v", err)
	}
}
