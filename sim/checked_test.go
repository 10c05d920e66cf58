package sim

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/replay"
	"github.com/memsh/memsh/sim/units"
)

func TestCheckedArithmetic(t *testing.T) {
	type result struct {
		n  int64
		ok bool
	}
	r := func(n int64, ok bool) result { return result{n, ok} }
	cases := []struct {
		name      string
		got, want result
	}{
		{"2^31 * 2^31", r(units.MulChecked64(1<<31, 1<<31, units.MaxBytes)), result{1 << 62, true}},
		{"2^31 * 2^32 is past 2^62", r(units.MulChecked64(1<<31, 1<<32, units.MaxBytes)), result{}},
		{"negative factor", r(units.MulChecked64(-1, 5, units.MaxBytes)), result{}},
		{"zero times anything", r(units.MulChecked64(0, math.MaxInt64, units.MaxBytes)), result{0, true}},
		{"sum at the limit", r(units.AddChecked64(units.MaxBytes-1, 1, units.MaxBytes)), result{units.MaxBytes, true}},
		{"sum past the limit", r(units.AddChecked64(units.MaxBytes, 1, units.MaxBytes)), result{}},
		{"product", r(units.CheckedProduct(4096, 4096, 32, 2)), result{1 << 30, true}},
		{"product past 2^62", r(units.CheckedProduct(1<<40, 1<<40)), result{}},
		{"numel at 2^59", r(units.ShapeNumel([]int64{1 << 20, 1 << 20, 1 << 19})), result{units.MaxElements, true}},
		{"numel past 2^59", r(units.ShapeNumel([]int64{1 << 20, 1 << 20, 1 << 20})), result{}},
		{"negative dimension", r(units.ShapeNumel([]int64{4, -1})), result{}},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("%s: got %+v, want %+v", c.name, c.got, c.want)
		}
	}
}

// A 10^15-parameter model is counted exactly (no wrapped products), and
// sizes past 2^62 bytes are errors, never wrapped numbers.
func TestHugeSizes(t *testing.T) {
	fp32, _ := core.LookupPrecision("fp32")
	plan := func(m *core.Model, batch int64) *core.Plan {
		return &core.Plan{Model: m, Batch: batch, Seq: 1, GradAccum: 1, Members: 1, Precision: fp32,
			Optimizer: core.Optimizer{Kind: core.AdamW}, Device: hw.Device{Name: "test", Memory: 80 << 30}}
	}
	// 2 x 10^15 weights: fp32 params and grads 8e15 B each, AdamW's two
	// moments 1.6e16 B.
	big := &core.Model{Name: "big", Loss: "mse", Layers: []core.Layer{&nn.Linear{In: 1e8, Out: 1e7}, &nn.Linear{In: 1e7, Out: 1e8}}}
	if n := big.Params(); n != 2e15 {
		t.Fatalf("params %d, want 2e15", n)
	}
	rep, err := Evaluate(plan(big, 1), core.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := replay.States{Params: 8e15, Grads: 8e15, Optimizer: 16e15}
	if rep.States != want || rep.Fits || rep.PeakAllocated < 32e15 || rep.PeakReserved < rep.PeakAllocated {
		t.Errorf("10^15 params: states %+v (want %+v), fits %v, peak %d, reserved %d", rep.States, want, rep.Fits, rep.PeakAllocated, rep.PeakReserved)
	}

	errs := []struct {
		name string
		err  func() error
		want string
	}{
		{"linear(2^31, 2^31): 2^62 weights", func() error {
			return core.ValidateLayer(&nn.Linear{In: 1 << 31, Out: 1 << 31}, "linear")
		}, "shape [2147483648 2147483648] is too large to count in bytes"},
		{"linear(2^32, 2^32): 2^64 weights wrap to 0 unchecked", func() error {
			return core.ValidateLayer(&nn.Linear{In: 1 << 32, Out: 1 << 32}, "linear")
		}, "too large to count in bytes"},
		{"repeat(linear(2^28, 2^28), 2^9): 2^65 weights in all", func() error {
			return core.ValidateLayer(&core.Repeat{Layer: &nn.Linear{In: 1 << 28, Out: 1 << 28}, N: 1 << 9}, "repeat")
		}, "3.69e+19 parameters are more than memsh can count in bytes"},
		{"moe capacity 1e30: int64 of the padded count was undefined (a negative shape)", func() error {
			return core.ValidateLayer(&nn.MoE{Dim: 64, Hidden: 128, Experts: 4, TopK: 2, Act: "swiglu", Capacity: 1e30}, "moe")
		}, "moe: capacity=1e+30 pads 2e+30 token copies to the experts, too many to count in bytes"},
		{"a runaway repeat of a layer without parameters: an error at model()", func() error {
			m := &core.Model{Name: "m", Loss: "mse", Layers: []core.Layer{&nn.Linear{In: 8, Out: 8}, &core.Repeat{Layer: &nn.Act{Fn: "relu"}, N: 1 << 20}}}
			return m.CheckShapes()
		}, "the model lowers to more than 200000 ops"},
		{"moe with 2^40 experts: one tensor each was a fatal out-of-memory", func() error {
			return core.ValidateLayer(&nn.MoE{Dim: 64, Hidden: 128, Experts: 1 << 40, TopK: 2, Act: "swiglu"}, "moe")
		}, "moe.experts: more than 200000 parameter tensors"},
		{"a table with 2^40 heads", func() error {
			return core.ValidateLayer(&replay.Table{Name: "t", Rows: 100, Dim: 16, Heads: 1 << 40}, "t")
		}, "t: heads must be at most 65536 (got 1099511627776)"},
		{"a runaway repeat count is cheap to build: only model() lowers it", func() error {
			l := core.Layer(&core.Repeat{Layer: &nn.Linear{In: 8, Out: 8}, N: 60000})
			for i := 0; i < 200; i++ {
				l = &core.Sequential{Layers: []core.Layer{l}}
				if err := core.ValidateLayer(l, "sequential"); err != nil {
					return err
				}
			}
			return fmt.Errorf("built")
		}, "built"},
		{"a DAG of 2^70 linears is refused before validate walks it", func() error {
			l := core.Layer(&nn.Linear{In: 8, Out: 8})
			for i := 0; i < 70; i++ {
				l = &core.Sequential{Layers: []core.Layer{l, l}}
				if err := core.ValidateLayer(l, "sequential"); err != nil {
					return err
				}
			}
			return nil
		}, "the layer has more than 200000 layers below it (a layer used twice counts twice)"},
		{"batch 2^50 of 2^20 features", func() error {
			m := &core.Model{Name: "x", Loss: "mse", Layers: []core.Layer{&nn.Linear{In: 1 << 20, Out: 1 << 20}}}
			_, err := Evaluate(plan(m, 1<<50), core.Options{})
			return err
		}, "shape [1125899906842624 1 1048576] is too large to count in bytes"},
		{"activations that add up past 2^62", func() error {
			// Each [2^44, 1, 2^10] fp32 activation is 2^56 B; 2^10 blocks
			// make 2^66 B of them.
			m := &core.Model{Name: "x", Loss: "mse", Layers: []core.Layer{&core.Repeat{Layer: &nn.Linear{In: 1 << 10, Out: 1 << 10}, N: 1 << 10}}}
			_, err := Evaluate(plan(m, 1<<44), core.Options{})
			return err
		}, "the step's tensors add up to more bytes than memsh can count"},
		{"grad_accum 2^62: per-step collectives would wrap", func() error {
			m := &core.Model{Name: "x", Loss: "mse", Layers: []core.Layer{&nn.Linear{In: 8, Out: 8}}}
			p := plan(m, 1)
			p.GradAccum = 1 << 62
			_, err := Evaluate(p, core.Options{})
			return err
		}, "train: grad_accum=4611686018427387904 is more micro-batches a step than memsh simulates (16777216)"},
		{"micro_batches near 2^62 times 4 virtual stages wrapped to a negative count (makeslice panic)", func() error {
			m := &core.Model{Name: "x", Loss: "mse", Layers: []core.Layer{&core.Repeat{Layer: &nn.Linear{In: 8, Out: 8}, N: 8}}}
			p := plan(m, 1)
			p.Parallel = core.Parallelism{PP: 2, VirtualStages: 4, Schedule: "interleaved", MicroBatches: 4611686018427387818}
			_, err := Evaluate(p, core.Options{})
			return err
		}, "parallel: micro_batches=4611686018427387818 is more micro-batches a step than memsh simulates (16777216)"},
		{"dp 2^62", func() error {
			m := &core.Model{Name: "x", Loss: "mse", Layers: []core.Layer{&nn.Linear{In: 8, Out: 8}}}
			p := plan(m, 1)
			p.Parallel = core.Parallelism{DP: 1 << 62, Zero: 3}
			_, err := Evaluate(p, core.Options{})
			return err
		}, "parallel: dp*tp*pp*cp is 4.61e+18 GPUs, more than memsh simulates (16777216)"},
		{"a cluster of 2^40 x 2^40 GPUs wrapped to 0", func() error {
			m := &core.Model{Name: "x", Loss: "mse", Layers: []core.Layer{&nn.Linear{In: 8, Out: 8}}}
			p := plan(m, 1)
			p.Cluster = hw.Cluster{Nodes: 1 << 40, GPUsPerNode: 1 << 40}
			_, err := Evaluate(p, core.Options{})
			return err
		}, "cluster: nodes*gpus_per_node is 1.21e+24 GPUs"},
		{"parameters that add up past the bound", func() error {
			m := &core.Model{Name: "x", Loss: "mse", Layers: []core.Layer{&core.Repeat{Layer: &nn.Linear{In: 1 << 27, Out: 1 << 27}, N: 1 << 9}}}
			_, err := Evaluate(plan(m, 1), core.Options{})
			return err
		}, "9.22e+18 parameters are more than memsh can count in bytes (at most 9.61e+16)"},
	}
	for _, c := range errs {
		err := c.err()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.want)
		}
	}
}

// TestModulePathRanges: a layer shared by blocks that are not contiguous
// is named by its index ranges, at most 64 of them, so that a config with
// a million alternating layers (the fuzz seed gemma3_million_layers took
// 9.5 minutes building megabyte paths) names it in linear time.
func TestModulePathRanges(t *testing.T) {
	a, b := &nn.Norm{Dim: 8}, &nn.Norm{Dim: 8, Bias: true}
	for _, c := range []struct {
		blocks int
		want   string
	}{
		{6, "0,2,4"},
		{128, "0,2,4"},
		{130, "0,2,4"},
	} {
		rep := &core.Repeat{Name: "layers"}
		for i := 0; i < c.blocks; i++ {
			rep.Blocks = append(rep.Blocks, []core.Layer{a, b}[i%2])
		}
		path := core.ChildPath("layers", rep, a)
		idx := strings.TrimSuffix(strings.TrimPrefix(path, "layers."), "."+core.ModuleName(a))
		ranges := strings.Split(idx, ",")
		wantRanges, wantMore := c.blocks/2, false
		if wantRanges > 64 {
			wantRanges, wantMore = 64, true
		}
		if more := ranges[len(ranges)-1] == "..."; more != wantMore || len(ranges)-btoi(more) != wantRanges || !strings.HasPrefix(idx, c.want) {
			t.Errorf("%d blocks: path %q, want %d ranges from %q (then ... : %v)", c.blocks, path, wantRanges, c.want, wantMore)
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
