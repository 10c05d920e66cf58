package graph

import (
	"math"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/timing"
)

// TestChunkedAccumulateTime: each chunk's out += conv(...) is one add over
// all destination rows in fp32 (reading out and the chunk's scatter output,
// writing out), at the rate the accumulator's zero fill streams at, and
// its backward launches nothing (the gradient passes through). Before it
// was priced, the add cost nothing: 4 x 4.7 ms per decoder forward of
// Bris (1,359,281 rows of 1024 fp32 channels).
func TestChunkedAccumulateTime(t *testing.T) {
	for _, c := range []struct {
		name                    string
		precision               string
		src, dst, edges, chunks int64
		sBytes                  int64 // bytes per element of the chunk's scatter output
	}{
		{"Bris decoder, fp16 autocast, 4 chunks", "fp16-mixed", 261_634, 1_359_281, 4_077_843, 4, 4},
		{"Bris encoder, fp16 autocast, 4 chunks", "fp16-mixed", 1_359_281, 261_634, 3_139_608, 4, 4},
		{"Bris decoder, fp16, 16 chunks", "fp16", 261_634, 1_359_281, 4_077_843, 16, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			prec, err := core.LookupPrecision(c.precision)
			if err != nil {
				t.Fatal(err)
			}
			rt, err := core.LookupRuntime("cuda-2.6")
			if err != nil {
				t.Fatal(err)
			}
			dev, err := hw.LookupDevice("H200")
			if err != nil {
				t.Fatal(err)
			}
			a := &attentionAlone{g: edgeAttention{channels: 1024, heads: 16, backend: BackendPyG}, src: c.src, dst: c.dst, edges: c.edges, chunks: c.chunks}
			m := &core.Model{Name: "chunked", Layers: []core.Layer{a}, Loss: "mse", InputDim: 1024, InputGrad: true}
			p := &core.Plan{Model: m, Batch: 1, Seq: c.dst, GradAccum: 1, Precision: prec, Optimizer: core.Optimizer{Kind: core.AdamW},
				Checkpoint: core.Checkpoint{Mode: "none"}, Device: dev, Phase: core.Train, Runtime: rt}
			prog, err := p.LowerProgram()
			if err != nil {
				t.Fatal(err)
			}
			costs := timing.PriceOps(prog, p)
			acc := float64(4 * c.dst * 1024) // the fp32 accumulator's bytes
			var zeroRate float64             // bytes per second of the accumulator's zero fill
			var adds int64
			for i, op := range prog.Ops {
				switch {
				case op.Kind == "zeros" && op.Name == "out":
					zeroRate = costs[i].Bytes / costs[i].Fwd
				case op.Kind == "add_" && strings.HasPrefix(op.Name, "accumulate."):
					adds++
					want := 2*acc + float64(c.sBytes*c.dst*1024)
					if costs[i].Bytes != want {
						t.Errorf("%s moves %.0f bytes, want %.0f (out read and written, the scatter output read)", op.Name, costs[i].Bytes, want)
					}
					if costs[i].Bwd != 0 || costs[i].BwdK != 0 {
						t.Errorf("%s: backward %.3f ms in %.0f kernels, want none (the gradient passes through)", op.Name, 1e3*costs[i].Bwd, costs[i].BwdK)
					}
					if zeroRate <= 0 {
						t.Fatalf("%s priced before the accumulator's zero fill", op.Name)
					}
					if rate := costs[i].Bytes / costs[i].Fwd; math.Abs(rate/zeroRate-1) > 1e-9 {
						t.Errorf("%s streams %.3g B/s, the zero fill %.3g B/s: want the same copy rate", op.Name, rate, zeroRate)
					}
				}
			}
			if adds != c.chunks {
				t.Errorf("%d accumulating adds, want one per chunk (%d)", adds, c.chunks)
			}
		})
	}
}
