package timing

import (
	"math"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/units"
)

// The work on the gradients beside the update, counted by hand for
// bert-large's 393 fp32 gradient tensors (335,143,938 elements) on a V100
// (a stream at 0.87 of 900 GB/s): clipping is a pass to read the
// gradients and one to read and write them, 2 launches per tensor in a
// for-loop (PyTorch 1.x) or per chunk of at most 110 tensors and 320 x
// 65,536 elements (foreach), and 4 scalar kernels; GradScaler's unscale_
// under fp16 autocast reads and writes them once per chunk; zeroing in
// place writes them, a kernel per tensor in a for-loop.
func TestGradientWorkByHand(t *testing.T) {
	v100, err := hw.LookupDevice("V100-16GB")
	if err != nil {
		t.Fatal(err)
	}
	const tensors, elems = 393.0, 335_143_938.0
	bytes := 4 * elems
	stream := 900e9 * 0.87
	chunks := math.Ceil(elems / (320 * 65536)) // 16 chunks: more than ceil(393/110) = 4
	for _, c := range []struct {
		name      string
		precision string
		impl      string
		clip      float64
		keep      bool
		gpu, cpu  float64
	}{
		{"nothing", "fp32", "for-loop", 0, false, 0, 0},
		{"clip, for-loop", "fp32", "for-loop", 1, false, 3 * bytes / stream, (2*tensors + 4) * 10e-6},
		{"clip, foreach", "fp32", "foreach", 1, false, 3 * bytes / stream, (2*chunks + 4) * 10e-6},
		{"bf16 autocast: no GradScaler", "bf16-mixed", "for-loop", 0, false, 0, 0},
		{"fp16 autocast: unscale_", "fp16-mixed", "for-loop", 0, false, 2 * bytes / stream, chunks * 10e-6},
		{"zeroed in place, for-loop", "fp32", "for-loop", 0, true, bytes / stream, tensors * 10e-6},
		{"all three, for-loop", "fp16-mixed", "for-loop", 1, true, 6 * bytes / stream, (3*tensors + 4 + chunks) * 10e-6},
	} {
		prec, err := core.LookupPrecision(c.precision)
		if err != nil {
			t.Fatal(err)
		}
		p := &core.Plan{Device: v100, Precision: prec, KeepGrads: c.keep,
			Optimizer: core.Optimizer{Kind: core.AdamW, Impl: c.impl}, Overheads: core.Overheads{ClipGradNorm: c.clip}}
		gpu, cpu := gradientWork(p, OptimizerWork{Traffic: 1, Tensors: tensors, Elements: elems})
		if math.Abs(gpu-c.gpu) > 1e-9 || math.Abs(cpu-c.cpu) > 1e-9 {
			t.Errorf("%s: GPU %.3f ms, CPU %.3f ms; want %.3f and %.3f", c.name, 1e3*gpu, 1e3*cpu, 1e3*c.gpu, 1e3*c.cpu)
		}
	}
}

// TestGradientWorkBF16Optimizer: DeepSpeed's BF16_Optimizer adds each
// bf16 gradient into its fp32 buffer at every micro-batch's backward end
// (update_hp_grads), on bert-large's 393 tensors and 335,143,938 elements
// of TestGradientWorkByHand, whole, on a V100 (a stream at 0.87 of
// 900 GB/s): read 2 bytes and write 4 (lp.grad.to(fp32)), read 4 and 4
// and write 4 (add_), 18 bytes an element, and two kernels a parameter,
// each micro-batch.
func TestGradientWorkBF16Optimizer(t *testing.T) {
	v100, err := hw.LookupDevice("V100-16GB")
	if err != nil {
		t.Fatal(err)
	}
	const tensors, elems = 393.0, 335_143_938.0
	stream := 900e9 * 0.87
	prec := core.Precision{Name: "custom", Params: units.BF16, Compute: units.BF16, Grads: units.FP32, Master: units.FP32, States: units.FP32}
	for _, accum := range []int64{1, 4} {
		p := &core.Plan{Device: v100, Precision: prec, GradAccum: accum, Optimizer: core.Optimizer{Kind: core.AdamW, Impl: "fused"}}
		gpu, cpu := gradientWork(p, OptimizerWork{Traffic: 1, Tensors: tensors, Elements: elems / 8, HPGrads: elems})
		m := float64(accum)
		if want, wantCPU := m*18*elems/stream, m*2*tensors*10e-6; math.Abs(gpu-want) > 1e-9 || math.Abs(cpu-wantCPU) > 1e-9 {
			t.Errorf("accum %d: GPU %.3f ms, CPU %.3f ms; want %.3f and %.3f", accum, 1e3*gpu, 1e3*cpu, 1e3*want, 1e3*wantCPU)
		}
	}
}
