package timing

import (
	"testing"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/units"
)

// TestStridedOpHandCounted prices transformers 5's gated activation on
// gate_up's chunks (silu(gate) * up, gate and up strided views) on an
// H200 against bytes counted by hand: each kernel that reads a strided
// operand at the generic kernel's fraction of the peak
// (hw.GraphKernels.Broadcast: 0.346 for 2-byte operands), the rest at
// the stream rate. S x h = 65,536 x 512 bf16 (the small Qwen3-MoE's
// routed rows and expert hidden size), n elements, X = 2n bytes. The same
// ops unmarked, compiled, or on a GPU without the measurement keep
// stream's price (the op's bytes, twice that backward).
func TestStridedOpHandCounted(t *testing.T) {
	const r, c = 65536, 512
	X := float64(2 * r * c)
	bf := tensor{[]int64{r, c}, units.BF16, true}
	bf16, _ := core.LookupPrecision("bf16")
	h200 := mustDevice(t, "H200")
	a100 := mustDevice(t, "A100-80GB")
	g := 0.346 * h200.HBMGBps * 1e9
	s := streamRate(&h200)
	silu := handOp{"silu", []int{0}, 1, nil, 0}
	mul := handOp{"mul", []int{0, 1}, 2, nil, 0}
	for _, x := range []struct {
		name             string
		dev              hw.Device
		compile, strided bool
		ts               []tensor
		op               handOp
		fwd, bwd         float64 // seconds
		bwdK             float64
	}{
		{"silu(gate): 2X generic; silu_backward(grad, gate) 3X generic", h200, false, true,
			[]tensor{bf, bf}, silu, 2 * X / g, 3 * X / g, 1},
		{"act * up: 3X generic; grad * up 3X generic, grad * act 3X at the stream rate", h200, false, true,
			[]tensor{bf, bf, bf}, mul, 3 * X / g, 3*X/g + 3*X/s, 2},
		{"act * up, act needing no gradient: grad * act alone, at the stream rate", h200, false, true,
			[]tensor{{[]int64{r, c}, units.BF16, false}, bf, bf}, mul, 3 * X / g, 3 * X / s, 1},
		{"not strided: the stream rate", h200, false, false, []tensor{bf, bf}, silu, 2 * X / s, 4 * X / s, 1},
		{"compiled: Inductor's kernel, the stream rate", h200, true, true, []tensor{bf, bf}, silu, -1, -1, -1},
		{"A100: not measured, the stream rate", a100, false, true, []tensor{bf, bf}, silu,
			2 * X / streamRate(&a100), 4 * X / streamRate(&a100), 1},
	} {
		prog := handProgram(x.ts, []handOp{x.op})
		prog.Ops[0].Strided = x.strided
		plan := &core.Plan{Device: x.dev, Precision: bf16}
		if x.compile {
			plan.Compile = core.Compile{Blocks: true}
		}
		checkRulePrice(t, x.name, prog, plan, (*pricer).stridedOp, x.fwd, x.bwd, x.bwdK)
	}
}
