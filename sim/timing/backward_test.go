package timing

import (
	"math"
	"testing"

	"github.com/memsh/memsh/internal/testmodels"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/units"
)

// tensor is a value of a hand-built program: shape, dtype, whether it
// needs a gradient.
type tensor struct {
	shape []int64
	dt    units.DType
	grad  bool
}

// handOp is an op of a hand-built program over the tensors by index.
type handOp struct {
	kind   string
	in     []int
	out    int // -1: none
	params []int32
	bytes  float64 // forward bytes; 0: the sum of its tensors', -1: none (a view)
}

// handProgram builds a program of the tensors and ops (tensor i is
// Value i; a tensor no op makes is a leaf) with one trainable parameter
// of 1,024 elements.
func handProgram(ts []tensor, ops []handOp) *core.Program {
	p := &core.Program{Params: []core.ParamInfo{{Name: "bias", Shape: []int64{1024}, Numel: 1024, Trainable: true, TiedTo: -1}}}
	for _, x := range ts {
		n := core.Numel(x.shape)
		p.Values = append(p.Values, core.ValueInfo{Shape: x.shape, Dtype: x.dt, Bytes: x.dt.Bytes(n), Grad: x.grad, Producer: -1})
	}
	for i, o := range ops {
		op := core.OpInfo{Kind: o.kind, Name: o.kind, Params: o.params, Bytes: max(o.bytes, 0)}
		for _, v := range o.in {
			op.In = append(op.In, core.Value(v))
			if o.bytes == 0 {
				op.Bytes += float64(p.Values[v].Bytes)
			}
		}
		if o.out >= 0 {
			op.Out = []core.Value{core.Value(o.out)}
			p.Values[o.out].Producer = int32(i)
			if o.bytes == 0 {
				op.Bytes += float64(p.Values[o.out].Bytes)
			}
		}
		p.Ops = append(p.Ops, op)
	}
	return p
}

// TestBackwardRulesHandCounted prices hand-built programs in eager
// dispatch against their backward bytes and kernels counted by hand
// from autograd's rules (backward.go). R x C = 4,096 x 1,024 elements
// (n), bf16 unless named.
func TestBackwardRulesHandCounted(t *testing.T) {
	const r, c = 4096, 1024
	n := float64(r * c)
	rc := []int64{r, c}
	bf := func(grad bool) tensor { return tensor{rc, units.BF16, grad} }
	f32 := tensor{rc, units.FP32, true}
	row := tensor{[]int64{c}, units.BF16, true}
	for _, x := range []struct {
		name    string
		ts      []tensor
		ops     []handOp
		op      int     // the op whose backward is counted
		bytes   float64 // its backward's HBM bytes
		kernels float64
	}{
		{"add, same shape and dtype: the gradient passed through",
			[]tensor{bf(true), bf(true), bf(true)}, []handOp{{"add", []int{0, 1}, 2, nil, 0}}, 0, 0, 0},
		{"add of a broadcast row: sum_to reads the gradient, writes the row",
			[]tensor{bf(true), row, bf(true)}, []handOp{{"add", []int{0, 1}, 2, nil, 0}}, 0, 2*n + 2*c, 1},
		{"add, bf16 + fp32 into fp32: the bf16 operand's gradient cast (4 bytes in, 2 out)",
			[]tensor{bf(true), f32, f32}, []handOp{{"add", []int{0, 1}, 2, nil, 0}}, 0, 6 * n, 1},
		{"add, promoted operand needing no gradient: nothing",
			[]tensor{bf(false), f32, f32}, []handOp{{"add", []int{0, 1}, 2, nil, 0}}, 0, 0, 0},
		{"add of a trainable bias parameter: sum over the rows",
			[]tensor{bf(true), bf(true)}, []handOp{{"add", []int{0}, 1, []int32{0}, 0}}, 0, 2*n + 2*c, 1},
		{"scalar add (x + 1): passed through",
			[]tensor{bf(true), bf(true)}, []handOp{{"add", []int{0}, 1, nil, 0}}, 0, 0, 0},
		{"cast bf16 to fp32: one cast back, the forward's 6 bytes an element",
			[]tensor{bf(true), f32}, []handOp{{"cast", []int{0}, 1, nil, 0}}, 0, 6 * n, 1},
		{"cast to fp8 (not _to_copy): the general rule, twice its 3 bytes an element",
			[]tensor{bf(true), {rc, units.FP8, true}}, []handOp{{"cast", []int{0}, 1, nil, 0}}, 0, 6 * n, 1},
		{"mul: the general rule, twice its bytes",
			[]tensor{bf(true), bf(true), bf(true)}, []handOp{{"mul", []int{0, 1}, 2, nil, 0}}, 0, 12 * n, 1},
		{"x used by x * y and then an add (a residual): the mul's backward sums x's two gradients (2n in, n out)",
			[]tensor{bf(true), bf(true), bf(true), bf(true)},
			[]handOp{{"mul", []int{0, 1}, 2, nil, 0}, {"add", []int{2, 0}, 3, nil, 0}}, 0, 12*n + 3*2*n, 2},
		{"... and the add, the last use, sums nothing",
			[]tensor{bf(true), bf(true), bf(true), bf(true)},
			[]handOp{{"mul", []int{0, 1}, 2, nil, 0}, {"add", []int{2, 0}, 3, nil, 0}}, 1, 0, 0},
		{"x * x: one node, two gradients for one tensor: one sum",
			[]tensor{bf(true), bf(true)}, []handOp{{"mul", []int{0, 0}, 1, nil, 0}}, 0, 12*n + 3*2*n, 2},
		{"x used by three ops: each of the first two sums once",
			[]tensor{bf(true), bf(true), bf(true), bf(true)},
			[]handOp{{"neg", []int{0}, 1, nil, 0}, {"neg", []int{0}, 2, nil, 0}, {"neg", []int{0}, 3, nil, 0}}, 1, 8*n + 3*2*n, 2},
		{"a keep_alive is no use",
			[]tensor{bf(true), bf(true)},
			[]handOp{{"neg", []int{0}, 1, nil, 0}, {"keep_alive", []int{0}, -1, nil, 0}}, 0, 8 * n, 1},
		{"x used whole and by two views (tensor_split's chunks): the views are one use, one sum",
			[]tensor{bf(true), bf(true), {[]int64{r / 2, c}, units.BF16, true}, {[]int64{r / 2, c}, units.BF16, true}},
			[]handOp{{"neg", []int{0}, 1, nil, 0}, {"view", []int{0}, 2, nil, -1}, {"view", []int{0}, 3, nil, -1}}, 0, 8*n + 3*2*n, 2},
		{"... the first view sums nothing",
			[]tensor{bf(true), bf(true), {[]int64{r / 2, c}, units.BF16, true}, {[]int64{r / 2, c}, units.BF16, true}},
			[]handOp{{"neg", []int{0}, 1, nil, 0}, {"view", []int{0}, 2, nil, -1}, {"view", []int{0}, 3, nil, -1}}, 1, 0, 0},
		{"... nor do casts of its chunks (autocast's copy of each)",
			[]tensor{bf(true), bf(true), {[]int64{r / 2, c}, units.FP32, true}, {[]int64{r / 2, c}, units.FP32, true}},
			[]handOp{{"neg", []int{0}, 1, nil, 0}, {"cast", []int{0}, 2, nil, 3 * n}, {"cast", []int{0}, 3, nil, 3 * n}}, 1, 3 * n, 1},
	} {
		d, err := hw.LookupDevice("H100")
		if err != nil {
			t.Fatal(err)
		}
		prog := handProgram(x.ts, x.ops)
		var s Prices
		costs := s.Of(prog, &core.Plan{Device: d})
		got := costs[x.op]
		want := 0.0
		if x.kernels > 0 {
			want, _ = streamTime(&d, x.bytes)
			want = max(want, x.kernels*kernelFloor)
		}
		if got.BwdK != x.kernels || math.Abs(got.Bwd-want) > 1e-12 {
			t.Errorf("%s: backward %g kernels, %.3f µs; want %g, %.3f µs (%.0f bytes)", x.name, got.BwdK, 1e6*got.Bwd, x.kernels, 1e6*want, x.bytes)
		}
	}
}

// In an eager Llama block the residual adds hand their gradient through
// (no backward kernel), and the residual stream's two gradients (from
// the add and from the norm) are summed where the norm's input cast is
// undone: its backward is the cast back and that sum. The norm's output
// feeds three projections (q, k, v): the first two sum.
func TestResidualAddPassesGradient(t *testing.T) {
	m := testmodels.Llama(1024, 2, 8, 8, 4096, 32000, "flash")
	prog, costs := price(t, testmodels.LlamaPlan(m, 1, 2048, "bf16", "none", "H100"))
	adds := 0
	for i := range prog.Ops {
		if op := &prog.Ops[i]; op.Kind == "add" && op.Name == "layers.1.residual" {
			adds++
			if costs[i].BwdK != 0 || costs[i].Bwd != 0 {
				t.Errorf("%s: backward %g kernels, %.2f µs; want none", op.Name, costs[i].BwdK, 1e6*costs[i].Bwd)
			}
		}
	}
	if adds != 2 {
		t.Fatalf("%d residual adds in layers.1, want 2", adds)
	}
	for _, x := range []struct {
		kind, name string
		k          float64
	}{
		{"cast", "layers.1.post_attention_layernorm.to_fp32", 2},
		{"matmul", "layers.1.self_attn.q_proj", 3},
		{"matmul", "layers.1.self_attn.k_proj", 3},
		{"matmul", "layers.1.self_attn.v_proj", 2},
	} {
		if c := opNamed(t, prog, costs, x.kind, x.name); c.BwdK != x.k {
			t.Errorf("%s: %g backward kernels, want %g", x.name, c.BwdK, x.k)
		}
	}
}

// TestBackwardKernelsAgainstH200 prices one op's backward as the
// hand-built programs above and compares it with the kernels its
// backward launched on one H200 (sim/testdata/cuda_h200/bwd_kernels.jsonl,
// tools/oracle/cuda_bwd_kernels.py, run 19: torch.autograd.grad of the
// op alone, torch.profiler's device time of its backward kernels, memsets
// left out; torch 2.11.0+cu130) at [16384, 4096]. The kernel counts are
// autograd's rules and must match where memsh prices each kernel apart;
// the times are held to the bound each row names.
func TestBackwardKernelsAgainstH200(t *testing.T) {
	d := isolatedH200(t)
	const r, c = 16384, 4096
	rc := []int64{r, c}
	bf := tensor{rc, units.BF16, true}
	f32 := tensor{rc, units.FP32, true}
	for _, x := range []struct {
		name     string
		ts       []tensor
		ops      []handOp
		kernels  float64 // measured backward kernels (-1: memsh lumps them, not compared)
		measured float64 // their device time, s
		within   float64 // |memsh / measured - 1| at most (0: not asserted)
		why      string
	}{
		{"add_same_bf16", []tensor{bf, bf, bf}, []handOp{{"add", []int{0, 1}, 2, nil, 0}}, 0, 0, 0,
			"AddBackward0 passes the gradient through: no kernel"},
		{"add_same_fp32", []tensor{f32, f32, f32}, []handOp{{"add", []int{0, 1}, 2, nil, 0}}, 0, 0, 0, "as above"},
		{"add_broadcast_bf16", []tensor{bf, {[]int64{c}, units.BF16, true}, bf}, []handOp{{"add", []int{0, 1}, 2, nil, 0}}, 1, 49.407e-6, 0.30,
			"the row's sum_to: one reduce_kernel, at 2.7 TB/s against the stream rate's 3.56 (memsh fast)"},
		{"add_twice_bf16 (a + a)", []tensor{bf, bf}, []handOp{{"add", []int{0, 0}, 1, nil, 0}}, 1, 67.391e-6, 0,
			"the two gradients summed: one add; both are the same tensor here (the gradient passed through twice), read once, so memsh's three passes are not the traffic: time not compared"},
		{"cast_bf16_to_fp32", []tensor{bf, f32}, []handOp{{"cast", []int{0}, 1, nil, 0}}, 1, 94.272e-6, 0.25,
			"the cast back, fp32 -> bf16: the vectorized bfloat16_copy_kernel_cuda, above the median streaming kernel (memsh slow)"},
		{"cast_fp32_to_bf16", []tensor{f32, bf}, []handOp{{"cast", []int{0}, 1, nil, 0}}, 1, 192.668e-6, 0.03,
			"the cast back is the upcast: unrolled_elementwise_kernel<direct_copy_kernel_cuda> (hw.EagerKernels.Upcast)"},
		{"mul_same_bf16", []tensor{bf, bf, bf}, []handOp{{"mul", []int{0, 1}, 2, nil, 0}}, -1, 184.767e-6, 0.25,
			"two multiplies (grad * b, grad * a), memsh one kernel of their bytes at the stream rate (memsh slow)"},
	} {
		prog := handProgram(x.ts, x.ops)
		var s Prices
		got := s.Of(prog, &core.Plan{Device: d})[0]
		e := 0.0
		if x.measured > 0 {
			e = got.Bwd/x.measured - 1
		}
		t.Logf("%-24s memsh %g kernels %7.1f µs, measured %7.1f µs (%+5.1f %%): %s", x.name, got.BwdK, 1e6*got.Bwd, 1e6*x.measured, 100*e, x.why)
		if x.kernels >= 0 && got.BwdK != x.kernels {
			t.Errorf("%s: memsh %g backward kernels, measured %g", x.name, got.BwdK, x.kernels)
		}
		if x.within > 0 && math.Abs(e) > x.within {
			t.Errorf("%s: memsh %+.1f %% off the measured backward (want within %.0f %%)", x.name, 100*e, 100*x.within)
		}
	}
}
