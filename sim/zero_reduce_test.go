package sim

import (
	"fmt"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// oracleStack is tools/oracle/zero_reduce.py's model: Linear(64, 96) and
// Linear(96, 128) without bias, Linear(128, out) with one.
func oracleStack(out int64) *core.Model {
	return &core.Model{Name: "stack", InputDim: 64, Loss: "mse", Layers: []core.Layer{
		&nn.Linear{Name: "0", In: 64, Out: 96},
		&nn.Linear{Name: "1", In: 96, Out: 128},
		&nn.Linear{Name: "2", In: 128, Out: out, Bias: true},
	}}
}

// TestZeroReduceAsDeepSpeed holds the ZeRO replay's reductions to what
// DeepSpeed 0.19.8 allocates, measured on the CPU by
//
//	PYTHONPATH=/tmp/dspkg:/tmp/dsdeps DS_ACCELERATOR=cpu /work/venv-t/bin/python tools/oracle/zero_reduce.py
//
// (torch 2.15.0; one rank of world under the fake process group; the bytes
// each storage asks for, no 512-byte rounding), its rows in the backward
// (phase, op, bytes; the autograd tensors and the step's own apart):
//
//   - ZeRO-3, 4 ranks, bf16, reduce_bucket_size 13,000: the bucket takes
//     2.weight (6,400) and 2.bias (50); 1.weight's hook (12,288) reduces
//     them: reduce_scatter_coalesced's padding of the bias's last chunk
//     (empty, 2 elements, 4 B), then its flat buffer, cat 12,904 B (6,400 +
//     ceil(50/4) x 4 = 6,452 elements), the padding freed in
//     __avg_scatter_grads, the buffer when the reduction returns. 1.weight
//     (12,288, a multiple of 4) and 0.weight (6,144) are reduced alone, in
//     place: nothing allocated.
//   - the same with grad_accum_dtype fp32: the partitions' casts, 6,400 B
//     and 52 B (1,600 + 13 fp32 elements; the tracer's rows keep 64 B and
//     up), made before the flat buffer is freed, 12,288 B, then 6,144 B.
//   - ZeRO-2, rank 2 (the one memsh follows): allreduce_bucket's flattened
//     copies 12,900 B (2.weight's slices in partitions 2 and 3 and 2.bias's,
//     merged with the last) and 24,576 B (1.weight's three slices); 0.weight
//     lies in partition 0 alone, a view; grads_in_partition 37,376 B,
//     allocated at the first reduction (1.weight and 2.weight whole).
//   - ZeRO-3, 8 ranks, Linear(128, 5), reduce_bucket_size 10,000: padding 3
//     x 2 B (the bias's 5 elements, one a rank, the last three ranks a
//     chunk of padding each), cat 1,296 B (640 + 8 elements); 1.weight,
//     12,288 elements, does not fit the bucket: autograd's gradient stays
//     until 0.weight's hook reduces it, alone and in place.
func TestZeroReduceAsDeepSpeed(t *testing.T) {
	for _, c := range []struct {
		name        string
		zero, world int64
		out, bucket int64
		accum       bool
		want        string // the reduction's allocations and frees in the backward, in order
		keptUntil   string // where 1.weight's gradient is freed
	}{
		{"zero 3", 3, 4, 50, 13000, false,
			"+padding:4 +flat:12904 -padding -flat", "1"},
		{"zero 3 fp32 accumulation", 3, 4, 50, 13000, true,
			"+padding:4 +flat:12904 -padding +cast:6452 -flat -cast +cast:12288 -cast +cast:6144 -cast", "1"},
		{"zero 2", 2, 4, 50, 13000, false,
			"+reduced:12900 -reduced +partition:37376 +reduced:24576 -reduced", "1"},
		{"zero 3, 8 ranks, oversized gradient", 3, 8, 5, 10000, false,
			"+padding:2 +padding:2 +padding:2 +flat:1296 -padding -padding -padding -flat", "0"},
	} {
		p := distPlan(t, oracleStack(c.out), "bf16-mixed", core.Parallelism{DP: c.world, Zero: int(c.zero),
			ReduceBucketSize: core.ZeroSize{N: c.bucket, Set: true}})
		if c.zero == 3 {
			p.Parallel.ParamPersistenceThreshold = core.ZeroSize{Set: true}
		}
		if c.accum {
			p.Precision = accumPrecision
		}
		rep, err := Evaluate(p, core.Options{Trace: true})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		short := map[string]string{"reduce-scatter padding": "padding", "reduce-scatter flat buffer": "flat",
			"reduced partitions in fp32": "cast", "reduced bucket": "reduced", "grads_in_partition": "partition"}
		var got []string
		kept := ""
		for _, e := range rep.Trace.Events {
			if e.Phase.String() != "backward" {
				continue
			}
			if e.Tensor == "1.weight.grad" && e.Action == "free_completed" {
				kept = e.Op
			}
			s, ok := short[e.Tensor]
			switch {
			case !ok:
			case e.Action == "alloc":
				got = append(got, fmt.Sprintf("+%s:%d", s, e.Size))
			case e.Action == "free_completed":
				got = append(got, "-"+s)
			}
		}
		if g := strings.Join(got, " "); g != c.want {
			t.Errorf("%s: the reductions\n%s\nwant (DeepSpeed 0.19.8)\n%s", c.name, g, c.want)
		}
		if kept != c.keptUntil {
			t.Errorf("%s: 1.weight's gradient freed at %q, want %q", c.name, kept, c.keptUntil)
		}
	}
}
