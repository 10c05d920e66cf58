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
//	muon         torch.optim.Muon (PyTorch 2.9+) on the 2-D matrices that are
//	             not the embedding or the output head: one momentum_buffer
//	             n*S (zeros_like the gradient); AdamW's two moments for
//	             the other parameters, as the hybrid every Muon recipe runs
//	             (muon.go)
//
// Step temporaries (torch/optim/adam.py): "for-loop" updates one tensor at
// a time (two temporaries the size of the largest tensor: the sqrt and the
// division, oracle REPORT.md section 4); "foreach" (the CUDA default)
// materialises torch._foreach_sqrt over the whole group, one temporary the
// size of all parameters; "fused" works in place.
type Optimizer struct {
	Kind       OptimizerKind
	Momentum   float64
	Impl       string // foreach | fused | for-loop (Muon: its AdamW's, muon.go)
	InBackward bool   // per-parameter step as soon as its gradient is complete
	// Muon's Newton-Schulz iterations, their form ("" for torch's,
	// "reference") and Nesterov momentum (muon.go).
	NSSteps  int
	NS       string
	Nesterov bool
	// MuonTP: Megatron-LM's --muon-tp-mode, "" for duplicated (the TP
	// shards gathered, the whole matrix orthogonalized on every rank) or
	// "blockwise" (muon_megatron.go).
	MuonTP string
}

// OptimizerKind is an optimizer algorithm; optimizerSpecs declares each
// once.
type OptimizerKind uint8

// The optimizer kinds.
const (
	SGD OptimizerKind = iota + 1
	Adam
	AdamW
	AdamW8bit
	PagedAdamW8bit
	PagedAdamW
	Adafactor
	Lion
	SparseAdam
	Muon
)

// optimizerSpec is what memsh knows of one optimizer kind: its name, where
// its state lives, the state of one parameter tensor (used by the replay),
// and a lower bound of the state of n elements however they are split into
// tensors (used by the layout search to prune).
type optimizerSpec struct {
	name     string
	paged    bool // state in CUDA unified memory (bitsandbytes paged optimizers)
	states   func(o Optimizer, shape []int64, n int64, dt units.DType) StateTensors
	minState func(o Optimizer, n int64, dt units.DType) int64
}

// adamStates are Adam's exp_avg and exp_avg_sq, and the fused step's
// device step counter.
func adamStates(o Optimizer, _ []int64, n int64, dt units.DType) StateTensors {
	if o.ImplName() == "fused" {
		return stateTensors(StateTensor{"exp_avg", dt.Bytes(n)}, StateTensor{"exp_avg_sq", dt.Bytes(n)}, StateTensor{"step", 4})
	}
	return stateTensors(StateTensor{"exp_avg", dt.Bytes(n)}, StateTensor{"exp_avg_sq", dt.Bytes(n)})
}

// bnb8bitStates are bitsandbytes' two int8 moments with an fp32 absmax per
// 256-element block; tensors under 4096 elements keep fp32 moments.
func bnb8bitStates(_ Optimizer, _ []int64, n int64, _ units.DType) StateTensors {
	if n < 4096 {
		return stateTensors(StateTensor{"state1", units.FP32.Bytes(n)}, StateTensor{"state2", units.FP32.Bytes(n)})
	}
	blocks := (n + 255) / 256
	return stateTensors(StateTensor{"state1", n}, StateTensor{"state2", n},
		StateTensor{"absmax1", units.FP32.Bytes(blocks)}, StateTensor{"absmax2", units.FP32.Bytes(blocks)})
}

func twoMoments(_ Optimizer, n int64, dt units.DType) int64 { return 2 * dt.Bytes(n) }
func oneMoment(_ Optimizer, n int64, dt units.DType) int64  { return dt.Bytes(n) }
func noBound(Optimizer, int64, units.DType) int64           { return 0 }

// optimizerSpecs declares the optimizer kinds, indexed by kind.
var optimizerSpecs = [...]optimizerSpec{
	SGD: {name: "sgd",
		states: func(o Optimizer, _ []int64, n int64, dt units.DType) StateTensors {
			if o.Momentum > 0 {
				return stateTensors(StateTensor{"momentum_buffer", dt.Bytes(n)})
			}
			return StateTensors{}
		},
		minState: func(o Optimizer, n int64, dt units.DType) int64 {
			if o.Momentum > 0 {
				return dt.Bytes(n)
			}
			return 0
		}},
	Adam:  {name: "adam", states: adamStates, minState: twoMoments},
	AdamW: {name: "adamw", states: adamStates, minState: twoMoments},
	// 8-bit state depends on how the elements split into tensors (small
	// tensors keep fp32 moments): no bound is taken.
	AdamW8bit:      {name: "adamw8bit", states: bnb8bitStates, minState: noBound},
	PagedAdamW8bit: {name: "paged_adamw8bit", paged: true, states: bnb8bitStates, minState: noBound},
	PagedAdamW: {name: "paged_adamw", paged: true,
		states: func(_ Optimizer, _ []int64, n int64, _ units.DType) StateTensors {
			return stateTensors(StateTensor{"state1", units.FP32.Bytes(n)}, StateTensor{"state2", units.FP32.Bytes(n)})
		}, minState: noBound},
	// Adafactor's factored moment depends on each tensor's shape.
	Adafactor: {name: "adafactor",
		states: func(_ Optimizer, shape []int64, n int64, dt units.DType) StateTensors {
			if len(shape) >= 2 {
				r := Numel(shape[:len(shape)-1])
				c := Numel(shape[:len(shape)-2]) * shape[len(shape)-1]
				return stateTensors(StateTensor{"exp_avg_sq_row", dt.Bytes(r)}, StateTensor{"exp_avg_sq_col", dt.Bytes(c)})
			}
			return stateTensors(StateTensor{"exp_avg_sq", dt.Bytes(n)})
		}, minState: noBound},
	Lion: {name: "lion",
		states: func(_ Optimizer, _ []int64, n int64, dt units.DType) StateTensors {
			return stateTensors(StateTensor{"exp_avg", dt.Bytes(n)})
		}, minState: oneMoment},
	// Sparse tables step their own rows (replay/table_replay.go); as a plan's
	// optimizer its state is Adam's.
	SparseAdam: {name: "sparse_adam", states: adamStates, minState: noBound},
	// Muon's states by shape alone are its AdamW's (the tables' rows, a
	// flat shard); a parameter's own are ParamStates' (muon.go). Every
	// element has at least the momentum buffer.
	Muon: {name: "muon", states: adamStates, minState: oneMoment},
}

func (k OptimizerKind) spec() *optimizerSpec {
	if k == 0 || int(k) >= len(optimizerSpecs) {
		return &optimizerSpec{name: "invalid", states: func(Optimizer, []int64, int64, units.DType) StateTensors { return StateTensors{} }, minState: noBound}
	}
	return &optimizerSpecs[k]
}

// String is the kind's name, as its builtin is called: "adamw".
func (k OptimizerKind) String() string { return k.spec().name }

// ParseOptimizerKind finds a kind by name.
func ParseOptimizerKind(name string) (OptimizerKind, error) {
	for k := SGD; int(k) < len(optimizerSpecs); k++ {
		if optimizerSpecs[k].name == name {
			return k, nil
		}
	}
	return 0, fmt.Errorf("unknown optimizer %q (known: %v)", name, Optimizers())
}

// Optimizers lists the known kinds by name.
func Optimizers() []string {
	var out []string
	for k := SGD; int(k) < len(optimizerSpecs); k++ {
		out = append(out, optimizerSpecs[k].name)
	}
	return out
}

// Validate checks the kind and implementation.
func (o Optimizer) Validate() error {
	if o.Kind == 0 || int(o.Kind) >= len(optimizerSpecs) {
		return fmt.Errorf("unknown optimizer kind %d (known: %v)", o.Kind, Optimizers())
	}
	switch o.Impl {
	case "", "foreach", "fused", "for-loop":
	default:
		return fmt.Errorf("unknown optimizer implementation %q (known: foreach, fused, for-loop)", o.Impl)
	}
	if o.Momentum < 0 || o.Momentum >= 1 {
		return fmt.Errorf("momentum must be in [0, 1) (got %g)", o.Momentum)
	}
	return o.validateMuon()
}

// ImplName is the step's implementation, "foreach" by default.
func (o Optimizer) ImplName() string {
	if o.Impl == "" {
		return "foreach"
	}
	return o.Impl
}

// StepImpl is the implementation plan p's optimizer step runs: the one
// set, or, under Megatron-LM's precision with none set, "fused": Megatron-
// Core builds Adam (and SGD) from Transformer Engine's FusedAdam, else
// apex's, multi_tensor_apply kernels over chunks of tensors with no
// temporaries (megatron/core/optimizer/__init__.py at d98e8a6 l.11-33;
// --optimizer muon's Adam groups too, _get_megatron_emerging_optimizer
// handing them to _get_megatron_optimizer_based_on_param_groups;
// torch's AdamW only where neither is installed, which impl="foreach"
// states). Their step counter stays on the host (transformer_engine/
// pytorch/optimizers/fused_adam.py step: group["step"] an int unless
// capturable), so the states are not torch's fused ones (adamStates):
// those still follow ImplName.
func (p *Plan) StepImpl() string {
	o := p.Optimizer
	if o.Impl == "" && p.Precision.Megatron && (o.Kind == Adam || o.Kind == AdamW || o.Kind == SGD || o.Kind == Muon) {
		return "fused"
	}
	return o.ImplName()
}

// Paged reports whether state lives in CUDA unified memory.
func (o Optimizer) Paged() bool { return o.Kind.spec().paged }

// MinStateBytes is a lower bound of the optimizer state of n elements in
// dtype dt however they are split into tensors and sharded: what the
// layout search prunes with (0 where the state depends on tensor shapes).
func (o Optimizer) MinStateBytes(n int64, dt units.DType) int64 {
	return o.Kind.spec().minState(o, n, dt)
}

// StateTensor is one optimizer state tensor of a parameter.
type StateTensor struct {
	Name  string
	Bytes int64
}

// States returns the state tensors of a parameter of the given shape.
func (o Optimizer) States(shape []int64, n int64, dt units.DType) []StateTensor {
	st := o.StateTensors(shape, n, dt)
	if st.n == 0 {
		return nil
	}
	return append([]StateTensor(nil), st.List()...)
}

// StateTensors is States as a value, which a caller that keeps no list
// (a replay's setup and first step, the time model's traffic, per
// parameter) reads without one made on the heap: a list a call was a
// fifth of BenchmarkEvaluateLlama70B3D's allocations.
func (o Optimizer) StateTensors(shape []int64, n int64, dt units.DType) StateTensors {
	return o.Kind.spec().states(o, shape, n, dt)
}

// StateTensors are a parameter's optimizer state tensors, at most
// maxStateTensors.
type StateTensors struct {
	n int
	t [maxStateTensors]StateTensor
}

// maxStateTensors bounds an optimizer's state tensors per parameter
// (bitsandbytes' 8-bit optimizers: two moments and two absmax).
const maxStateTensors = 4

// stateTensors lists ts.
func stateTensors(ts ...StateTensor) StateTensors {
	var s StateTensors
	s.n = copy(s.t[:], ts)
	if s.n < len(ts) {
		panic("core: more optimizer state tensors than maxStateTensors")
	}
	return s
}

// List is s's tensors (in s: a list of s itself).
func (s *StateTensors) List() []StateTensor { return s.t[:s.n] }

// Bytes is s's tensors' bytes.
func (s *StateTensors) Bytes() int64 {
	var b int64
	for _, t := range s.t[:s.n] {
		b += t.Bytes
	}
	return b
}

// StepTemporary is the transient memory of the step over tensors of
// state bytes largest (the largest one) and total (all of them): none for
// fused kernels; per tensor for the for-loop path (exp_avg_sq.sqrt() and
// its quotient: the largest tensor counts); the sqrt of every exp_avg_sq
// at once for foreach (torch.optim.adamw _multi_tensor_adamw). With the
// step in backward each parameter has an optimizer of its own
// (torchtune's optimizer_in_bwd), so largest and total are one tensor's.
//
// perTensor is true where those bytes are one tensor per parameter, all
// alive at once: a foreach op makes each output with its own empty_like
// (foreach_unary_op and foreach_binary_op in ATen's
// native/cuda/ForeachUnaryOp.cu and ForeachBinaryOpScalar.cu), so the
// caching allocator places as many blocks as the step has tensors, not
// one of total bytes.
func (o Optimizer) StepTemporary(largest, total int64) (bytes int64, perTensor bool) {
	switch o.Kind {
	case AdamW8bit, PagedAdamW8bit, PagedAdamW, SGD, Lion:
		return 0, false // one fused kernel per tensor (bitsandbytes), or in-place updates
	case Adafactor:
		return 2 * largest, false // grad**2 + eps and the update, per tensor
	}
	switch o.ImplName() {
	case "fused":
		return 0, false
	case "for-loop":
		return 2 * largest, false
	}
	return total, true
}
