package core

import (
	"fmt"

	"github.com/memsh/memsh/sim/units"
)

// Optimizer is a training optimizer and how its step is run.
//
// State per parameter tensor of n elements (state dtype S from the
// precision policy):
//
//	sgd          momentum buffer n*S when momentum > 0, else nothing
//	adam, adamw  exp_avg and exp_avg_sq, 2*n*S; the step counter is a CPU
//	             scalar unless fused (then 4 B on the device per tensor)
//	adamw8bit    two int8 moments plus one fp32 absmax per 256-element block
//	             each (bitsandbytes Optimizer2State, block_wise); tensors
//	             under 4096 elements keep fp32 moments (min_8bit_size)
//	paged_*      as adamw8bit, in CUDA unified memory: invisible to
//	             torch.cuda.max_memory_allocated, paged to host under pressure
//	paged_adamw  bitsandbytes PagedAdamW (32-bit): two fp32 moments whatever
//	             the param dtype (Optimizer2State optim_bits=32), paged
//	adafactor    factored second moment: row and column vectors for matrices,
//	             a full vector for 1-D tensors; no first moment (beta1=None)
//	lion         one momentum buffer n*S
//	sparse_adam  two moments, updated only on rows read (tables)
//
// Step temporaries (torch/optim/adam.py): "for-loop" updates one tensor at
// a time (two temporaries the size of the largest tensor: the sqrt and the
// division, oracle REPORT.md section 4); "foreach" (the CUDA default)
// materialises torch._foreach_sqrt over the whole group, one temporary the
// size of all parameters; "fused" works in place.
type Optimizer struct {
	Kind       string
	Momentum   float64
	Impl       string // foreach | fused | for-loop
	InBackward bool   // per-parameter step as soon as its gradient is complete
}

// Optimizers lists the known kinds.
func Optimizers() []string {
	return []string{"sgd", "adam", "adamw", "adamw8bit", "paged_adamw8bit", "paged_adamw", "adafactor", "lion", "sparse_adam"}
}

// Validate checks the kind and implementation.
func (o Optimizer) Validate() error {
	known := false
	for _, k := range Optimizers() {
		known = known || k == o.Kind
	}
	if !known {
		return fmt.Errorf("unknown optimizer %q (known: %v)", o.Kind, Optimizers())
	}
	switch o.Impl {
	case "", "foreach", "fused", "for-loop":
	default:
		return fmt.Errorf("unknown optimizer implementation %q (known: foreach, fused, for-loop)", o.Impl)
	}
	if o.Momentum < 0 || o.Momentum >= 1 {
		return fmt.Errorf("momentum must be in [0, 1) (got %g)", o.Momentum)
	}
	return nil
}

func (o Optimizer) ImplName() string {
	if o.Impl == "" {
		return "foreach"
	}
	return o.Impl
}

// Paged reports whether state lives in CUDA unified memory.
func (o Optimizer) Paged() bool { return o.Kind == "paged_adamw8bit" || o.Kind == "paged_adamw" }

// stateTensor is one optimizer state tensor of a parameter.
type StateTensor struct {
	Name  string
	Bytes int64
}

// states returns the state tensors for a parameter of the given shape.
func (o Optimizer) States(shape []int64, n int64, dt units.DType) []StateTensor {
	switch o.Kind {
	case "sgd":
		if o.Momentum > 0 {
			return []StateTensor{{"momentum_buffer", dt.Bytes(n)}}
		}
		return nil
	case "adam", "adamw", "sparse_adam":
		st := []StateTensor{{"exp_avg", dt.Bytes(n)}, {"exp_avg_sq", dt.Bytes(n)}}
		if o.ImplName() == "fused" {
			st = append(st, StateTensor{"step", 4})
		}
		return st
	case "paged_adamw":
		return []StateTensor{{"state1", units.FP32.Bytes(n)}, {"state2", units.FP32.Bytes(n)}}
	case "adamw8bit", "paged_adamw8bit":
		if n < 4096 {
			return []StateTensor{{"state1", units.FP32.Bytes(n)}, {"state2", units.FP32.Bytes(n)}}
		}
		blocks := (n + 255) / 256
		return []StateTensor{
			{"state1", n}, {"state2", n},
			{"absmax1", units.FP32.Bytes(blocks)}, {"absmax2", units.FP32.Bytes(blocks)},
		}
	case "adafactor":
		if len(shape) >= 2 {
			r := Numel(shape[:len(shape)-1])
			c := Numel(shape[:len(shape)-2]) * shape[len(shape)-1]
			return []StateTensor{{"exp_avg_sq_row", dt.Bytes(r)}, {"exp_avg_sq_col", dt.Bytes(c)}}
		}
		return []StateTensor{{"exp_avg_sq", dt.Bytes(n)}}
	case "lion":
		return []StateTensor{{"exp_avg", dt.Bytes(n)}}
	}
	return nil
}

// stepTemporary is the transient memory of the step: per tensor for the
// for-loop and in-backward paths (the largest tensor counts), over the
// whole group for foreach.
func (o Optimizer) StepTemporary(largest, total int64) int64 {
	switch o.Kind {
	case "adamw8bit", "paged_adamw8bit", "paged_adamw", "sgd", "lion":
		return 0 // one fused kernel per tensor (bitsandbytes), or in-place updates
	case "adafactor":
		return 2 * largest // grad**2 + eps and the update, per tensor
	}
	if o.InBackward {
		return 2 * largest
	}
	switch o.ImplName() {
	case "fused":
		return 0
	case "for-loop":
		return 2 * largest
	}
	return total
}
