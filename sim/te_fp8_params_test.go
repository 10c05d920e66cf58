package sim

import (
	"errors"
	"strings"
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/replay"
	"github.com/memsh/memsh/sim/units"
)

// teParamPlan is tePlan over two data-parallel ranks with Megatron's
// distributed optimizer, fp8 primary weights on or off.
func teParamPlan(recipe, gpu string, gather bool) *core.Plan {
	p := tePlan(recipe, gpu)
	p.Parallel = core.Parallelism{DP: 2, DistributedOptimizer: true}
	p.Float8.ParamGather = gather
	return p
}

// TestTEFloat8ParamGather hand-counts Megatron's --fp8-param-gather on
// the tiny GPT (te_fp8_params.go). Its seven TE weights hold 704,512
// elements; the rest (embedding and output layer 64 x 256 each, three
// norms of 256) 33,536. With fp8 primary weights the TE weights are
// stored in fp8, 704,512 B instead of 1,409,024 B in bf16, and no fp8
// workspace copy is kept (704,512 B); on Hopper the transposes stay
// (704,512 B either way). The distributed optimizer's all-gather moves
// 2·33,536 + 704,512 = 771,584 B instead of 2·738,048 = 1,476,096 B. The
// fp32 main weights (a shard of 738,048 elements per rank) do not change.
//
// MXFP8 primary weights (B200) are the MXFP8 copies the module kept as
// its workspace (1,458,176 B, TestTEMXFP8Linear): the parameters lose
// their bf16 storage (1,409,024 B: 2·33,536 B remain) and keep nothing
// else; the all-gather stays bf16 (through the gradient buffer).
func TestTEFloat8ParamGather(t *testing.T) {
	for _, c := range []struct {
		recipe, gpu         string
		params, buffers     int64 // saved by the fp8 primary weights
		workspaces          int   // .weight_fp8 buffers with fp8 primary weights
		transposesKept      int
		paramsOn, gatherOn  int64
		paramsOff, gatherOf int64
	}{
		{"te-tensorwise", "H100-80GB", 704_512, 704_512, 0, 7, 2*33_536 + 704_512, 771_584, 2 * 738_048, 1_476_096},
		{"te-tensorwise", "B200", 704_512, 704_512, 0, 0, 2*33_536 + 704_512, 771_584, 2 * 738_048, 1_476_096},
		{"te-mxfp8", "B200", 1_409_024, 0, 7, 0, 2 * 33_536, 1_476_096, 2 * 738_048, 1_476_096},
	} {
		var reps [2]*replay.Report
		for i, gather := range []bool{false, true} {
			p := teParamPlan(c.recipe, c.gpu, gather)
			rep, err := Evaluate(p, core.Options{})
			if err != nil {
				t.Fatal(err)
			}
			reps[i] = rep
			prog := lower(t, p)
			if n, _ := buffersNamed(prog, ".weight_fp8"); gather && n != c.workspaces {
				t.Errorf("%s %s: %d fp8 weight buffers with fp8 primary weights, want %d", c.recipe, c.gpu, n, c.workspaces)
			}
			if n, _ := buffersNamed(prog, ".weight_fp8_t"); n != c.transposesKept {
				t.Errorf("%s, gather %v: %d weight transposes, want %d", c.recipe+" "+c.gpu, gather, n, c.transposesKept)
			}
			var gathered int64
			for _, s := range rep.CommBytes { // tp=1: the only all-gather is the optimizer's
				if s.Name == "all_gather" {
					gathered += s.Bytes
				}
			}
			wantP, wantG := c.paramsOff, c.gatherOf
			if gather {
				wantP, wantG = c.paramsOn, c.gatherOn
			}
			if rep.States.Params != wantP || gathered != wantG {
				t.Errorf("%s, gather %v: parameters %d B, all-gather %d B, want %d and %d", c.recipe+" "+c.gpu, gather, rep.States.Params, gathered, wantP, wantG)
			}
		}
		off, on := reps[0], reps[1]
		if d := off.States.Buffers - on.States.Buffers; d != c.buffers {
			t.Errorf("%s %s: buffers shrink by %d B, want %d (the workspaces)", c.recipe, c.gpu, d, c.buffers)
		}
		if off.States.Master != on.States.Master || off.States.Optimizer != on.States.Optimizer || off.States.Grads != on.States.Grads {
			t.Errorf("%s %s: main weights, optimizer state or main gradients moved: %+v -> %+v", c.recipe, c.gpu, off.States, on.States)
		}
		if d := off.PeakAllocated - on.PeakAllocated; d != c.params+c.buffers {
			t.Errorf("%s %s: peak falls by %d B, want %d", c.recipe, c.gpu, d, c.params+c.buffers)
		}
	}
}

// TestTEFloat8ParamGatherErrors: combinations Megatron refuses or memsh
// does not model name their fix.
func TestTEFloat8ParamGatherErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(p *core.Plan)
		want string
	}{
		{"torchao", func(p *core.Plan) { p.Float8.Scaling = "tensorwise" }, "fsdp_float8_all_gather=True"},
		{"no float8", func(p *core.Plan) { p.Float8.Scaling = "" }, "needs a Transformer Engine recipe"},
		{"no distributed optimizer", func(p *core.Plan) { p.Parallel.DistributedOptimizer = false }, "needs Megatron's distributed optimizer"},
		{"blockwise", func(p *core.Plan) { p.Float8.Scaling = "te-blockwise" }, "with te-blockwise is not modelled"},
	} {
		p := teParamPlan("te-delayed", "H100-80GB", true)
		c.edit(p)
		err := p.Validate()
		var ue *units.Error
		if !errors.As(err, &ue) || !strings.Contains(ue.Msg+" "+ue.Hint, c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
}
