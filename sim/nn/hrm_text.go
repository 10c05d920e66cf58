package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// HrmCycles is HrmTextModel's hierarchical recurrence (Sapient's
// HRM-Text; models/hrm_text/modular_hrm_text.py at transformers 5.25.0):
// two stacks of decoder layers, L_module and H_module, each ending in
// its final_norm, run over and over on two states,
//
//	z_H = inputs_embeds
//	z_L = z_L_init.to(dtype).expand_as(z_H).contiguous()   # a frozen [hidden] parameter, a new tensor
//	for h in range(H_cycles):
//	    for l in range(L_cycles):                           # the first L_cycles - Grad[h] under torch.no_grad()
//	        z_L = L_module(z_L + z_H)
//	    z_H = H_module(z_H + z_L)
//	return z_H
//
// Every call of a stack runs the same modules: the first call registers
// their parameters and autocast's weight copies, the later ones share
// them (core.SharedCalls; autocast caches the copy the first call makes,
// under no_grad too, with its grad history: torch 2.15, CPU). A call
// under no_grad saves nothing; a call with grad saves what its layers
// save, so a step keeps sum(Grad) L calls and H_cycles H calls.
type HrmCycles struct {
	Dim              int64
	L, H             core.Layer // the stacks, named L_module and H_module
	HCycles, LCycles int64
	// Grad is, for each H cycle, how many of its last L calls run with
	// grad (L_bp_cycles left-padded with 1s to H_cycles, 1 past its end);
	// a count of 0 or less runs them all under no_grad.
	Grad []int64
}

func (c *HrmCycles) Kind() string           { return "hrm_cycles" }
func (c *HrmCycles) Label() string          { return "" }
func (c *HrmCycles) DefaultName() string    { return "" } // its stacks are the model's modules
func (c *HrmCycles) Children() []core.Layer { return []core.Layer{c.L, c.H} }
func (c *HrmCycles) InDim() int64           { return c.Dim }

// DecoderStacks: HrmTextModel.forward hands each stack position_ids,
// which it hands each layer (core.DecoderStacks).
func (c *HrmCycles) DecoderStacks() []core.Layer { return []core.Layer{c.L, c.H} }
func (c *HrmCycles) OutDim() int64               { return c.Dim }

// Params: both stacks and z_L_init (requires_grad=False, one of
// named_parameters()).
func (c *HrmCycles) Params() int64 { return c.L.Params() + c.H.Params() + c.Dim }

func (c *HrmCycles) Summary() string {
	return fmt.Sprintf("%d H cycles of %d L cycles", c.HCycles, c.LCycles)
}

// Modules: z_L_init, a parameter of the model itself; the stacks are
// children.
func (c *HrmCycles) Modules() []core.ModuleRow {
	return []core.ModuleRow{{Path: "z_L_init", Kind: "parameter", Summary: fmt.Sprintf("%d, frozen", c.Dim), Params: c.Dim}}
}

func (c *HrmCycles) Validate(path string) error {
	if c.L == nil || c.H == nil {
		return units.Errorf(path, "HRM's cycles need both stacks")
	}
	if err := core.Positive(path, "dim", c.Dim); err != nil {
		return err
	}
	if c.HCycles < 1 || c.LCycles < 1 || int64(len(c.Grad)) != c.HCycles {
		return units.Errorf(path, "H and L cycles must be positive and Grad one count an H cycle (got %d, %d, %d counts)", c.HCycles, c.LCycles, len(c.Grad))
	}
	if err := c.L.Validate(path + ".L_module"); err != nil {
		return err
	}
	return c.H.Validate(path + ".H_module")
}

// CheckLayout: pipeline stages would split a stack's layers, which
// every cycle runs again; the stacks are modelled on one stage. Sharded
// parameters (ZeRO-3, FSDP) are refused too: memsh gathers a unit once,
// from the first op that reads it to the last, where FSDP2 and ZeRO-3
// gather and free a layer's parameters around each of its calls.
func (c *HrmCycles) CheckLayout(path string, par core.Parallelism) error {
	if par.PP > 1 {
		return &units.Error{Path: path, Msg: "pipeline parallelism is not modelled for HRM's recurrent stacks (every cycle runs both stacks again)",
			Hint: "use pp=1"}
	}
	if par.FSDP || par.Zero >= 3 {
		return &units.Error{Path: path, Msg: "sharded parameters (FSDP, ZeRO-3) are not modelled for HRM's recurrent stacks: every cycle gathers each layer's parameters again",
			Hint: "shard the optimizer state and gradients instead (zero=1 or 2), or use tensor parallelism"}
	}
	return nil
}

func (c *HrmCycles) Lower(b *core.Builder, x core.Value) core.Value {
	if b.Last(x) != c.Dim {
		panic(core.ShapeMismatch(b, "hrm_cycles", c.Dim, b.Last(x)))
	}
	zH := x
	zL := c.lowInit(b, x)
	var lRuns, hRuns core.SharedCalls
	for h := int64(0); h < c.HCycles; h++ {
		threshold := c.LCycles - c.Grad[h]
		for l := int64(0); l < c.LCycles; l++ {
			done := func() {}
			if l < threshold {
				done = b.NoGrad()
			}
			in := b.Add("low_cycle_input", zL, zH)
			lRuns.Begin(b)
			zL = b.LowerChild(c.L, in)
			lRuns.End(b)
			done()
		}
		in := b.Add("high_cycle_input", zH, zL)
		hRuns.Begin(b)
		zH = b.LowerChild(c.H, in)
		hRuns.End(b)
	}
	return zH
}

// lowInit is z_L's first value: z_L_init (a frozen parameter, in the
// model's dtype) expanded over x's tokens and made contiguous, a new
// tensor in x's dtype that needs no gradient.
func (c *HrmCycles) lowInit(b *core.Builder, x core.Value) core.Value {
	defer b.NoGrad()()
	pi := b.Param("z_L_init", []int64{c.Dim}, core.RoleNorm)
	b.P.Params[pi].Trainable = false // requires_grad_(False) (HrmTextPreTrainedModel._init_weights)
	i := b.AddOp("copy", "z_L_init", nil, pi)
	y := b.Out(i, "hidden_states_low_cycle", b.Shape(x), b.Dtype(x), "z_L_init.to(dtype).expand_as(z_H).contiguous(): the low-level state's first value")
	b.Op(i).Flops = float64(core.Numel(b.Shape(x)))
	return y
}
