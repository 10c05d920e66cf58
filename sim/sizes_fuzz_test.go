package sim

import (
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/nn"
)

// FuzzSizes builds layers, models and plans from arbitrary sizes (huge,
// zero, negative) and runs them through ValidateLayer and Evaluate. Every
// input must give an error or a right number, never a panic or a wrapped
// count: a layer that validates has the parameter count its sizes say
// (checked in float64), and a report keeps the report invariants.
func FuzzSizes(f *testing.F) {
	f.Add(uint8(0), int64(1024), int64(4096), int64(0), int64(0), int64(2), int64(512), uint8(0), uint8(0))
	f.Add(uint8(1), int64(32000), int64(512), int64(8), int64(0), int64(1), int64(128), uint8(1), uint8(3))
	f.Add(uint8(2), int64(512), int64(8), int64(2), int64(64), int64(2), int64(256), uint8(2), uint8(0))
	f.Add(uint8(3), int64(256), int64(1024), int64(0), int64(0), int64(4), int64(64), uint8(3), uint8(0x21))
	f.Add(uint8(4), int64(128), int64(256), int64(8), int64(2), int64(1), int64(32), uint8(0), uint8(0x40))
	f.Add(uint8(5), int64(64), int64(12), int64(0), int64(0), int64(1), int64(16), uint8(0), uint8(0x0c))
	f.Add(uint8(6), int64(4096), int64(0), int64(0), int64(0), int64(8), int64(4096), uint8(1), uint8(0x80))
	f.Add(uint8(7), int64(1)<<31, int64(1)<<31, int64(1)<<31, int64(0), int64(1), int64(1), uint8(0), uint8(0))
	f.Add(uint8(0), int64(-1), int64(math.MaxInt64), int64(0), int64(0), int64(math.MinInt64), int64(0), uint8(0), uint8(0))
	f.Add(uint8(2), int64(1)<<20, int64(1), int64(1), int64(1)<<20, int64(1)<<30, int64(1)<<20, uint8(2), uint8(0))
	// Two of the class a 5-minute -race fuzz run found slow (issue 23 item
	// 9; the fuzzer's files were lost, these are rebuilt): 65,441 blocks of
	// Linear(65536, 65536), bf16-mixed under full checkpointing on one GPU
	// (the second Evaluate adds expandable segments and a validation
	// pass); 65,536 blocks of Linear(65565, 65565) under ZeRO-3 on 8 GPUs
	// (then optimizer and parameters offloaded).
	f.Add(uint8('e'), int64(65536), int64(65441), int64(1)<<40, int64(2), int64(1), int64(16), uint8(1), uint8(0x05))
	f.Add(uint8('E'), int64(65565), int64(65536), int64(1)<<40, int64(2), int64(1), int64(16), uint8(1), uint8(0xe9))
	f.Fuzz(func(t *testing.T, kind uint8, a, b, c, d, batch, seq int64, opt, planOpt uint8) {
		defer failSlow(t, time.Now())
		fuzzSizesInput(t, kind, a, b, c, d, batch, seq, opt, planOpt)
	})
}

// fuzzSizesInput is FuzzSizes's check of one input.
func fuzzSizesInput(t testing.TB, kind uint8, a, b, c, d, batch, seq int64, opt, planOpt uint8) {
	l, want := fuzzLayer(kind, a, b, c, d, opt)
	if err := core.ValidateLayer(l, l.Kind()); err != nil {
		failInternal(t, err)
		return
	}
	n := l.Params()
	if n < 0 || (want >= 0 && math.Abs(float64(n)-want) > want*1e-9) {
		t.Fatalf("%s: params %d, want %.17g", l.Kind(), n, want)
	}
	m := &core.Model{Name: "fuzz", Layers: []core.Layer{l}, Loss: "mse"}
	if _, ok := l.(*nn.Embedding); ok {
		m.Loss, m.Vocab, m.TieEmbeddings = "cross_entropy", a, planOpt&0x80 != 0
	}
	if err := m.Validate(); err != nil {
		failInternal(t, err)
		return
	}
	if err := m.CheckShapes(); err != nil {
		failInternal(t, err)
		return
	}
	p := fuzzPlan(m, batch, seq, planOpt)
	rep, _, prog, err := evaluateLowered(p, nil, core.Options{}, math.MaxInt64)
	if err != nil {
		failInternal(t, err)
		return
	}
	if probs := reportProblems(rep); len(probs) > 0 {
		t.Fatalf("report breaks invariants:\n%s", strings.Join(probs, "\n"))
	}
	// The same step with expandable segments, and on one GPU with a
	// validation pass before it, or with ZeRO the optimizer (and at
	// stage 3 the parameters) offloaded to the CPU, or as FSDP2 with
	// everything offloaded. The first evaluation's program is replayed
	// again when no field that the lowering reads changed (lowersAlike).
	first := *p
	p.ExpandableSegments = true
	p.Validation = !p.Parallel.Active() && p.Phase == core.Train
	if z := p.Parallel.Zero; z > 0 && p.Phase == core.Train {
		p.Offload = &core.Offload{Optimizer: "cpu"}
		if z == 3 {
			p.Offload.Params = "cpu"
		}
	} else if p.Parallel.Active() && p.Phase == core.Train { // DDP becomes FSDP2 with CPUOffloadPolicy
		p.Parallel.FSDP, p.Offload = true, &core.Offload{Params: "cpu"}
	}
	if !lowersAlike(&first, p) {
		prog = nil
	}
	rep, _, _, err = evaluateLowered(p, prog, core.Options{}, math.MaxInt64)
	if err != nil {
		failInternal(t, err)
		return
	}
	if probs := reportProblems(rep); len(probs) > 0 {
		t.Fatalf("expandable segments, validation %v: report breaks invariants:\n%s", p.Validation, strings.Join(probs, "\n"))
	}
}

// lowersAlike says whether plans p and q lower to the same program: they
// differ at most in ExpandableSegments (the allocator's mode, which only
// the replay reads) and Validation (the validation pass is a program of
// its own, lowered by the replay from the plan with Phase "eval"; the
// step's program is the same). TestLowersAlike checks both claims
// program by program and report by report.
func lowersAlike(p, q *core.Plan) bool {
	a, b := *p, *q
	a.ExpandableSegments, b.ExpandableSegments = false, false
	a.Validation, b.Validation = false, false
	return reflect.DeepEqual(a, b)
}

// fuzzLayer builds one of a few layer shapes from the sizes, with its
// parameter count computed in float64 (-1 when not computed here).
func fuzzLayer(kind uint8, a, b, c, d int64, opt uint8) (core.Layer, float64) {
	fa, fb, fc := float64(a), float64(b), float64(c)
	bias := opt&1 != 0
	acts := []string{"gelu", "relu", "silu", "swiglu", "geglu"}
	switch kind % 8 {
	case 0:
		w := fa * fb
		if bias {
			w += fb
		}
		return &nn.Linear{In: a, Out: b, Bias: bias}, w
	case 1:
		return &nn.Embedding{Rows: a, Dim: b}, fa * fb
	case 2:
		impls := []string{"flash", "sdpa", "eager"}
		return &nn.Attention{Dim: a, Heads: b, KVHeads: c, HeadDim: d, Impl: impls[int(opt)%3], Causal: opt&4 == 0,
			Rope: opt&8 != 0, QKVBias: opt&16 != 0}, -1
	case 3:
		act := acts[int(opt)%len(acts)]
		w := 2 * fa * fb
		if act == "swiglu" || act == "geglu" {
			w = 3 * fa * fb
		}
		return &nn.MLP{Dim: a, Hidden: b, Act: act}, w
	case 4:
		// router a x c, c experts of 3 x a x b (swiglu)
		return &nn.MoE{Dim: a, Hidden: b, Experts: c, TopK: d, Act: "swiglu", Capacity: float64(opt%4) * 0.5}, fa*fc + fc*3*fa*fb
	case 5:
		return &core.Repeat{Layer: &nn.Linear{In: a, Out: a}, N: b}, fb * fa * fa
	case 6:
		w := fa
		if opt&1 == 0 && opt&2 != 0 {
			w = 2 * fa
		}
		return &nn.Norm{Dim: a, RMS: opt&1 != 0, Bias: opt&1 == 0 && opt&2 != 0}, w
	default:
		return &core.Sequential{Layers: []core.Layer{&nn.Linear{In: a, Out: b}, &nn.Linear{In: b, Out: c}}}, fa*fb + fb*fc
	}
}

// fuzzPlan is a plan over m with the given batch and seq; planOpt picks
// the precision, checkpointing, gradient accumulation and data-parallel
// layout.
func fuzzPlan(m *core.Model, batch, seq int64, planOpt uint8) *core.Plan {
	precs := []string{"fp32", "bf16-mixed", "fp16-mixed", "bf16"}
	prec, _ := core.LookupPrecision(precs[planOpt%4])
	rt, _ := core.LookupRuntime("cuda")
	dev, _ := hw.LookupDevice("H100-80GB")
	ckpt := []string{"none", "full", "selective", "none"}[(planOpt>>2)%4]
	ck, _ := core.ParseCheckpoint(ckpt)
	p := &core.Plan{Model: m, Batch: batch, Seq: seq, GradAccum: 1 + int64(planOpt>>4&1), Members: 1,
		Precision: prec, Runtime: rt, Optimizer: core.Optimizer{Kind: core.AdamW}, Checkpoint: ck, Phase: core.Train, Device: dev}
	if planOpt&0x20 != 0 {
		p.Parallel = core.Parallelism{DP: 8, Zero: int(planOpt>>6) % 4}
	}
	if planOpt&0x40 != 0 && planOpt&0x20 == 0 {
		p.Phase = core.Eval
	}
	return p
}

// failInternal fails on errors that are bugs rather than bad input.
func failInternal(t testing.TB, err error) {
	t.Helper()
	if strings.Contains(err.Error(), "internal error") {
		t.Fatalf("internal error: %v", err)
	}
}
