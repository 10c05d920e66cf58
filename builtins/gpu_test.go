package builtins

import (
	"testing"

	"github.com/memsh/memsh/builtins/plans"
	"go.starlark.net/starlark"
)

func TestGPU(t *testing.T) {
	runEvalCases(t, []evalCase{
		// memory is PyTorch's total (sim/hw TestCatalogCapacities), smi_memory nvidia-smi's.
		{expr: `gpu("H200").memory`, want: "150109880320"},
		{expr: `gpu("H200").memory // MiB`, want: "143155"}, // 150,109,880,320 B, measured (sim/testdata/cuda_h200)
		{expr: `gpu("H200").smi_memory // MiB`, want: "143771"},
		{expr: `gpu("A100").name`, want: `"A100-80GB"`},
		{expr: `gpu("a100").memory`, want: "85100068864"},
		{expr: `gpu("A100").smi_memory // MiB`, want: "81920"},
		{expr: `gpu("H100")`, want: `gpu("H100-80GB")`},
		{expr: `gpu("H100").bf16_tflops`, want: "989.4"},
		{expr: `gpu("H100").link_gbps`, want: "450.0"},
		{expr: `gpu("RTX-4090").link_gbps`, want: "0.0"},
		{expr: `gpu("V100-16GB").context // MiB`, want: "363"}, // lazy module loading (sim/hw context_oom_test.go)
		{expr: `type(gpu("H100"))`, want: `"gpu"`},
		{expr: `gpu("H100") == gpu("H100-80GB")`, want: "True"},
		{expr: `gpu("H100") != gpu("H200")`, want: "True"},
		{expr: `len(dict([(gpu("H100"), 1), (gpu("H100-80GB"), 2)]))`, want: "1"},
		{expr: `gpu(name="x", memory=24 * GiB)`, want: `gpu(name="x", memory=25769803776, context=524288000)`},
		{expr: `gpu(name="x", memory=24 * GiB).smi_memory`, want: "25769803776"},
		{expr: `gpu(name="x", memory=24 * GiB, smi_memory=25 * GiB)`, want: `gpu(name="x", memory=25769803776, smi_memory=26843545600, context=524288000)`},
		{expr: `gpu("H100", memory=96 * GiB).smi_memory`, want: "103079215104"},
		{expr: `gpu("H100", memory=70 * GiB).smi_memory // MiB`, want: "81559"},
		// A custom gpu's figures not given: documented defaults.
		{expr: `gpu(name="x", memory=GiB, bf16_tflops=320).fp32_tflops`, want: "20.0"},
		{expr: `gpu(name="x", memory=GiB, bf16_tflops=320, fp32_tflops=50).fp32_tflops`, want: "50.0"},
		{expr: `[gpu(name="x", memory=GiB).link_gbps, gpu(name="x", memory=GiB).pcie_gbps]`, want: "[0.0, 32.0]"},
		{expr: `gpu(name="x", memory=GiB, link_gbps=450, pcie_gbps=64).pcie_gbps`, want: "64.0"},
		{expr: `gpu(name="x", memory=GiB, bf16_tflops=320) == gpu(name="x", memory=GiB, bf16_tflops=320)`, want: "True"},
		{expr: `gpu(name="x", memory=GiB, smi_memory=GiB // 2)`, err: "smi_memory (512.00 MiB) must be at least memory (1.00 GiB)"},
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

// A custom gpu() without link or PCIe figures gets documented defaults,
// and a report over several GPUs says they stood in (issue 24 item 4).
func TestCustomGPUDefaultsNoted(t *testing.T) {
	runPreludeCases(t, sweepPrelude+`
card = gpu(name = "mycard", memory = 80 * GiB, bf16_tflops = 989, hbm_gbps = 3350)
nvl = gpu(name = "mycard", memory = 80 * GiB, bf16_tflops = 989, hbm_gbps = 3350, link_gbps = 450, pcie_gbps = 64)
one = simulate(p.replace(gpu = card))
many = simulate(p.replace(gpu = card, parallel = parallel(dp = 16)))
linked = simulate(p.replace(gpu = nvl, parallel = parallel(dp = 16)))
node = simulate(p.replace(gpu = nvl, parallel = parallel(dp = 8)))
`, []evalCase{
		{expr: "one.notes", want: "[]"},
		{expr: "one.step_time > 0 and card.fp32_tflops == 989 / 16", want: "True"},
		{expr: "len(many.notes)", want: "2"},
		{expr: "many.notes[0].startswith(\"mycard: link_gbps was not given to gpu(): the default, 0 (no NVLink), has the 16 GPUs talk over PCIe peer-to-peer at the default pcie_gbps=32\")", want: "True"},
		{expr: "many.notes[1]", want: `"mycard is not a catalog card: the network between nodes is the time model's default for an unknown card, 12.5 GB/s per GPU and direction; pass cluster(inter=...) for yours"`},
		{expr: "many.step_time > linked.step_time", want: "True"},
		{expr: "len(linked.notes)", want: "1"},
		{expr: "node.notes", want: "[]"},
		{expr: "simulate(p.replace(gpu = nvl, parallel = parallel(dp = 16), cluster = cluster(nodes = 2, inter = 50))).notes", want: "[]"},
	})
}
