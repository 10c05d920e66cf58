package sim

import (
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
	"github.com/memsh/memsh/sim/replay"
	"github.com/memsh/memsh/sim/units"
)

// The compile rows of the first H200 run: ../shared/oracle/measure.py's
// llama stack (4 LlamaBlocks, h=2048 a=32 kv=4 ffn=5632, s=2048 b=4, bf16,
// attn=sdpa) and gpt2 stack (4 GPT2Blocks, h=1024 a=16, s=1024 b=8, bf16,
// attn=sdpa, dropout 0.1 native), each eager and under torch.compile
// (Inductor, default mode), 4 steps of forward, backward(gout) and AdamW
// (torch's default: foreach on CUDA). Measured on one H200 (torch
// 2.11.0+cu130, cuDNN 9.19), sim/testdata/cuda_h200/extra.jsonl part
// "compile", tools/oracle/cuda_run.sh (tools/oracle/cuda_extra.py
// compile_stack); step 2 (steps 2 to 4 are identical to the byte).
//
// What torch.compile compiled there is not one graph per stack: measure.py's
// sdpa() reads y.grad_fn to name the attention kernel, which Dynamo cannot
// trace ("Tensor with grad_fn()"), so every block runs as four graphs
// (the first norm; the projections, RoPE and repeat_kv; the output
// projection; the residual, second norm and MLP) around an eager SDPA call
// (cuDNN attention on Hopper: the suite's sdpa_backward_nodes). For these
// blocks the partitioner's saved set is the one memsh computes for a whole
// compiled block: the attention kernel's inputs and outputs are saved
// either way, and each norm's input is a graph input or a value saved
// already (torch 2.15 on the CPU, the same blocks scaled down: 14.04 of
// 21.29 output-sized units saved per llama block, gpt2 unchanged).
type cudaCompileRow struct {
	kind    string // llama | gpt2
	compile bool
	// measured, step 2: torch.cuda.memory_allocated at the start and after
	// the forward, max_memory_allocated after the forward and for the step,
	// max_memory_reserved
	atStart, afterFwd, peakFwd, peak, reserved int64
	// named gaps (measured minus memsh) in output-sized tensors (b x s x h
	// bf16), beyond the cuDNN seed blocks: TestCudaCompileCalibration
	fwdPeakGap, peakGap int64
	// and in bytes: Inductor's RNG seed block, a gap memsh does not explain
	fwdPeakBytes, peakBytes int64
}

// cudaCompileProbeRows: run 4 (sim/testdata/cuda_h200/compile_probe.jsonl,
// tools/oracle/cuda_compile_probe.py; step 3 of 3), the same stacks built
// by the probe itself with an SDPA call Dynamo traces: each block compiled
// on its own (per_block, what memsh models), and the stack as one graph
// (whole). Both ran without a graph break (Dynamo's counters).
var cudaCompileProbeRows = []struct {
	name string
	row  cudaCompileRow
}{
	{"per_block", cudaCompileRow{kind: "llama", compile: true, atStart: 1_211_203_584, afterFwd: 3_396_702_208, peakFwd: 3_396_702_208, peak: 3_512_045_568, reserved: 3_990_880_256}},
	{"per_block", cudaCompileRow{kind: "gpt2", compile: true, atStart: 408_215_552, afterFwd: 1_551_691_776, peakFwd: 1_551_692_288, peak: 1_585_215_488, reserved: 1_721_761_792}},
	{"whole", cudaCompileRow{kind: "llama", compile: true, atStart: 1_211_203_584, afterFwd: 3_396_702_208, peakFwd: 3_396_702_208, peak: 3_555_009_024, reserved: 4_097_835_008}},
	{"whole", cudaCompileRow{kind: "gpt2", compile: true, atStart: 408_215_552, afterFwd: 1_551_691_776, peakFwd: 1_551_692_288, peak: 1_592_766_976, reserved: 1_688_207_360}},
}

var cudaCompileRows = []cudaCompileRow{
	{kind: "llama", atStart: 1_210_155_008, afterFwd: 4_335_177_728, peakFwd: 4_435_841_024, peak: 4_542_795_776, reserved: 5_203_034_112,
		fwdPeakGap: 1, peakGap: -1},
	{kind: "llama", compile: true, atStart: 1_210_155_008, afterFwd: 3_395_653_632, peakFwd: 3_429_208_064, peak: 3_510_996_992, reserved: 4_093_640_704},
	{kind: "gpt2", atStart: 408_215_552, afterFwd: 1_551_691_776, peakFwd: 1_568_468_992, peak: 1_702_689_280, reserved: 1_811_939_328,
		peakBytes: 48<<20 + 512},
	{kind: "gpt2", compile: true, atStart: 408_215_552, afterFwd: 1_551_691_776, peakFwd: 1_568_469_504, peak: 1_568_471_040, reserved: 1_621_098_496,
		fwdPeakGap: 1, fwdPeakBytes: 512},
}

// cudaStack is measure.py's stack in memsh: its blocks as oracleBlock
// builds them, SDPA for the attention, and the module buffers the oracle's
// blocks register (harnessBuffers).
// cudaStackPlan is the plan of one of cudaStack's stacks as cuda_extra.py
// trains it: bf16 parameters, torch.optim.AdamW's default (foreach on
// CUDA), runtime "cuda" on the H200, each block compiled when compile is
// set.
func cudaStackPlan(t *testing.T, kind string, compile bool) (plan *core.Plan, b, s, h int64) {
	t.Helper()
	m, b, s, h := cudaStack(kind)
	plan = &core.Plan{Model: m, Batch: b, Seq: s, GradAccum: 1, Members: 1, Precision: mustPrecision(t, "bf16"),
		Optimizer: core.Optimizer{Kind: core.AdamW, Impl: "foreach"}, Runtime: mustRuntime(t, "cuda"), Device: mustDevice(t, "H200")}
	if compile {
		plan.Compile = core.Compile{Blocks: true}
	}
	return plan, b, s, h
}

func cudaStack(kind string) (m *core.Model, b, s, h int64) {
	c := oracleCase{kind: kind, h: 2048, a: 32, kv: 4, f: 5632, s: 2048, b: 4}
	if kind == "gpt2" {
		c = oracleCase{kind: kind, h: 1024, a: 16, s: 1024, b: 8}
	}
	blk := oracleBlock(c)
	core.Walk(blk, "", func(_ string, l core.Layer) {
		if a, ok := l.(*nn.Attention); ok {
			a.Impl = "sdpa"
		}
	})
	blk = &core.Sequential{Layers: []core.Layer{&harnessBuffers{kind: kind, s: c.s, d: c.h / c.a}, blk}}
	return &core.Model{Name: kind, Layers: []core.Layer{&core.Repeat{Layer: blk, N: 4}}, Loss: "none", InputGrad: true}, c.b, c.s, c.h
}

// harnessBuffers registers the buffers of one measure.py block: the causal
// mask (bool [1, 1, s, s], both blocks; unused by SDPA, which masks in the
// kernel) and LlamaBlock's RoPE tables cos and sin ([s, d], fp32 built,
// cast to bf16 by the stack's .to(bf16)). Real models compute them
// differently; the oracle's figures include them, so its replay does.
type harnessBuffers struct {
	kind string
	s, d int64
}

func (l *harnessBuffers) Kind() string               { return "harness_buffers" }
func (l *harnessBuffers) Label() string              { return "" }
func (l *harnessBuffers) Params() int64              { return 0 }
func (l *harnessBuffers) Children() []core.Layer     { return nil }
func (l *harnessBuffers) Summary() string            { return "measure.py's block buffers" }
func (l *harnessBuffers) Validate(path string) error { return nil }
func (l *harnessBuffers) Lower(b *core.Builder, x core.Value) core.Value {
	b.Buffer("causal", []int64{1, 1, l.s, l.s}, units.BOOL, "measure.py's causal mask")
	if l.kind == "llama" {
		b.Buffer("cos", []int64{l.s, l.d}, units.BF16, "measure.py's RoPE table")
		b.Buffer("sin", []int64{l.s, l.d}, units.BF16, "measure.py's RoPE table")
	}
	return x
}

// oracleStep reads a replay as measure.py's step measures it: allocated
// after the setup and after the forward, the forward's peak and the step's
// (torch.cuda.memory_allocated and max_memory_allocated, which count
// 512-byte blocks). memsh's model ends in a sum (Loss "none") whose
// backward seeds the output's gradient; the oracle calls out.backward(gout)
// with gout made before the step and holds out until the backward ends.
// So the sum's scalar, its seed and the output's gradient it allocates
// are left out, gout is counted from the start, and the output stays
// allocated until the optimizer step.
func oracleStep(r *replay.Report, gout int64) (atStart, afterFwd, peakFwd, peak int64) {
	block := func(n int64) int64 { return (n + 511) / 512 * 512 }
	level := block(gout)
	skip := map[int64]bool{}
	var held int64 // the output, held by the oracle's out
	for _, e := range r.Trace.Events {
		if e.Phase == replay.PhaseOptimizer && held > 0 {
			level -= held // del out
			held = 0
		}
		switch e.Action {
		case "alloc":
			if e.Op == "loss.sum" || e.Op == "loss.backward" {
				skip[e.Addr] = true
				continue
			}
			level += block(e.Size)
		case "free_completed":
			if skip[e.Addr] {
				delete(skip, e.Addr)
				continue
			}
			if e.Phase == replay.PhaseForward && e.Op == "loss.sum" {
				held = block(e.Size)
				continue
			}
			level -= block(e.Size)
		default:
			continue
		}
		switch e.Phase {
		case replay.PhaseSetup:
			atStart = level
		case replay.PhaseForward:
			afterFwd = level
			peakFwd = max(peakFwd, level)
		}
		peak = max(peak, level)
	}
	return atStart, afterFwd, peakFwd, peak
}

// TestCudaCompileCalibration replays the four rows and compares what the
// oracle reads (oracleStep) to the byte, up to named terms:
//
//   - cuDNN's seeds: cuDNN attention returns an int64 philox seed and
//     offset, which its backward node saves (the suite's sdpa rows: 16 B of
//     int64 saved per layer), two 512-byte blocks per layer that memsh
//     does not model: 4,096 B on every figure after the setup. (Eager
//     SDPA on CUDA is the cudamem calibration's.)
//   - llama eager, forward peak +1: nn.Sequential's loop variable
//     (input = module(input)) holds each block's input until the block
//     returns, where memsh frees it at its last use; LlamaBlock's RMSNorm
//     saves its fp32 copy, not its input, so the input is held for nothing
//     but the loop (GPT-2's LayerNorm saves it anyway, and so does a
//     compiled block).
//   - llama eager, peak -1: memsh's eager add allocates a gradient for its
//     first input in the backward; AddBackward0 hands the output's
//     gradient to both (no copy). memsh's compiled graphs pass it on
//     (core's gradInPlace).
//   - gpt2 eager, peak +48 MiB + 512 B: not explained (the suite's 12-layer
//     gpt2 sdpa row shows the same gap, the cudamem calibration's).
//   - gpt2 compiled, forward peak +1: the graph break (see
//     cudaCompileRow's comment) leaves the attention branch's output, an
//     input of the graph that adds it to the residual and runs the MLP, held
//     by the resumed Python frame until that graph returns; memsh compiles
//     the whole block, which frees it at the add. And +512 B: the graph's
//     RNG seed for native_dropout, an int64 [1] tensor Inductor makes with
//     aten.randint (torch 2.15's output code for that graph: "buf10 =
//     empty_strided_cpu((1, ), (1, ), torch.int64)"), not modelled.
//
// Before core's weightGradFirst and gradInPlace (compiled linears make the
// weight's gradient first and free their saved input before the input's
// gradient; an activation's and an add's backward reuse the output
// gradient's buffer) memsh's compiled llama peaked one output-sized tensor
// (32 MiB) above the measurement and its compiled gpt2 80 MiB above.
//
// max_memory_reserved is not asserted: the measured step 2 starts with
// the segments step 1 (and, compiled, the compilation) cached, memsh
// replays one steady-state step from an empty cache. memsh against the
// measurement: llama eager 4.62 GB / 5.20 GB, compiled 3.56 / 4.09, gpt2
// eager 1.686 / 1.812, compiled 1.602 / 1.621.
func TestCudaCompileCalibration(t *testing.T) {
	const seeds = 4 * 2 * 512 // cuDNN's philox seed and offset, per layer
	for _, row := range cudaCompileRows {
		plan, b, s, h := cudaStackPlan(t, row.kind, row.compile)
		r, err := Evaluate(plan, core.Options{Trace: true})
		if err != nil {
			t.Fatal(err)
		}
		out := units.BF16.Bytes(b * s * h)
		atStart, afterFwd, peakFwd, peak := oracleStep(r, out)
		for _, f := range []struct {
			name          string
			measured, got int64
			named         int64
		}{
			{"at_start", row.atStart, atStart, 0},
			{"after_forward", row.afterFwd, afterFwd, seeds},
			{"peak_forward", row.peakFwd, peakFwd, seeds + row.fwdPeakGap*out + row.fwdPeakBytes},
			{"max_memory_allocated", row.peak, peak, seeds + row.peakGap*out + row.peakBytes},
		} {
			if gap := f.measured - f.got; gap != f.named {
				t.Errorf("%s compile=%v %s: measured %d, memsh %d: gap %+d B, named terms %+d B", row.kind, row.compile, f.name, f.measured, f.got, gap, f.named)
			}
		}
		t.Logf("%s compile=%v: max_memory_allocated %d, memsh %d (%+.2f%%); max_memory_reserved %d, memsh %d (%+.1f%%)", row.kind, row.compile,
			row.peak, peak, 100*float64(peak-row.peak)/float64(row.peak), row.reserved, r.PeakReserved, 100*float64(r.PeakReserved-row.reserved)/float64(row.reserved))
	}
}

// TestCudaCompileProbe compares the probe's rows as TestCudaCompileCalibration
// does. Gaps (measured minus memsh), named:
//
//   - llama, every figure: +1 MiB in all three probe modes and not in run 1
//     (the same stack, compiled with the break): not explained.
//   - cuDNN's seeds: 4,096 B after the setup (TestCudaCompileCalibration).
//   - llama per_block, forward peak -1 output: Inductor writes the
//     block's last residual sum over down_proj's output, which dies there
//     (an in-place reuse, "buf13 = reinterpret_tensor(buf9, ...); del buf9
//     # reuse" in torch 2.15's output code of the same graph); memsh
//     allocates the sum beside it. The gpt2 block's dropout fuses into the
//     sum, so memsh frees the matmul's output first there.
//   - gpt2 per_block and whole, forward peak +512 B: the graph's RNG seed.
//   - gpt2 per_block, peak +16,744,448 B (1.06 %): not modelled; the
//     probe's backward code allocates the LayerNorm backward's 32 MiB fp32
//     buffer (buf11) before c_fc2's 64 MiB input gradient.
//   - whole, peak (llama +42,963,456 B, 1.24 %; gpt2 +24,295,936 B, 1.53 %):
//     one graph for the stack, which Inductor orders across the blocks;
//     memsh compiles each block (what torchtune and torchtitan compile).
//
// Without the graph break the forward peak loses run 1's held input (gpt2:
// 1,568,469,504 B broken, 1,551,692,288 B per block), as memsh has it; the
// probe's backward code runs every linear's weight gradient first, with a
// bias (addmm) or without (core's weightGradFirst).
func TestCudaCompileProbe(t *testing.T) {
	const mib, seeds = 1 << 20, 4 * 2 * 512
	for _, pr := range cudaCompileProbeRows {
		row := pr.row
		plan, b, s, h := cudaStackPlan(t, row.kind, true)
		r, err := Evaluate(plan, core.Options{Trace: true})
		if err != nil {
			t.Fatal(err)
		}
		out := units.BF16.Bytes(b * s * h)
		atStart, afterFwd, peakFwd, peak := oracleStep(r, out)
		var offset, fwd, pk int64
		switch pr.name + " " + row.kind {
		case "per_block llama":
			offset, fwd = mib, -out
		case "whole llama":
			offset, fwd, pk = mib, -out, 42_963_456
		case "per_block gpt2":
			fwd, pk = 512, 16_744_448
		case "whole gpt2":
			fwd, pk = 512, 24_295_936
		}
		for _, f := range []struct {
			name          string
			measured, got int64
			named         int64
		}{
			{"at_start", row.atStart, atStart, offset},
			{"after_forward", row.afterFwd, afterFwd, offset + seeds},
			{"peak_forward", row.peakFwd, peakFwd, offset + seeds + fwd},
			{"max_memory_allocated", row.peak, peak, offset + seeds + pk},
		} {
			if gap := f.measured - f.got; gap != f.named {
				t.Errorf("%s %s %s: measured %d, memsh %d: gap %+d B, named terms %+d B", pr.name, row.kind, f.name, f.measured, f.got, gap, f.named)
			}
		}
		t.Logf("%s %s: max_memory_allocated %d, memsh %d (%+.2f%%); max_memory_reserved %d, memsh %d (%+.1f%%)", pr.name, row.kind,
			row.peak, peak, 100*float64(peak-row.peak)/float64(row.peak), row.reserved, r.PeakReserved, 100*float64(r.PeakReserved-row.reserved)/float64(row.reserved))
	}
}
