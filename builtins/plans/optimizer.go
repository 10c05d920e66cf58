package plans

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/sim/core"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// Optimizer is the Starlark value of a training optimizer (type
// "optimizer"), from adamw(), sgd(momentum=0.9), ...
type Optimizer struct{ o core.Optimizer }

var (
	_ starlark.HasAttrs   = Optimizer{}
	_ starlark.Comparable = Optimizer{}
	_ starlark.Unpacker   = (*Optimizer)(nil)
)

// SimOptimizer is the wrapped optimizer.
func (x Optimizer) SimOptimizer() core.Optimizer { return x.o }

func (x Optimizer) Type() string         { return "optimizer" }
func (x Optimizer) Freeze()              {}
func (x Optimizer) Truth() starlark.Bool { return starlark.True }
func (x Optimizer) Hash() (uint32, error) {
	return starlark.String(x.String()).Hash()
}

// String is the call that builds it, with non-default arguments only:
// adamw(), adamw(impl="fused"), sgd(momentum=0.9).
func (x Optimizer) String() string {
	var args []string
	if x.o.Kind == core.SGD && x.o.Momentum != 0 {
		args = append(args, "momentum="+strconv.FormatFloat(x.o.Momentum, 'g', -1, 64))
	}
	if x.o.Kind == core.Muon {
		if x.o.Momentum != muonMomentum {
			args = append(args, "momentum="+strconv.FormatFloat(x.o.Momentum, 'g', -1, 64))
		}
		if !x.o.Nesterov {
			args = append(args, "nesterov=False")
		}
		if x.o.NSSteps != core.MuonDefaultNSSteps {
			args = append(args, "ns_steps="+strconv.Itoa(x.o.NSSteps))
		}
		if x.o.NS != "" {
			args = append(args, fmt.Sprintf("newton_schulz=%q", x.o.NS))
		}
		if x.o.MuonTP != "" {
			args = append(args, fmt.Sprintf("tp_mode=%q", x.o.MuonTP))
		}
	}
	if x.o.Impl != "" { // "foreach" too: named, it is torch's, not the trainer's (core.Plan.StepImpl)
		args = append(args, fmt.Sprintf("impl=%q", x.o.Impl))
	}
	if x.o.InBackward {
		args = append(args, "in_backward=True")
	}
	return x.o.Kind.String() + "(" + strings.Join(args, ", ") + ")"
}

func (x Optimizer) CompareSameType(op syntax.Token, y starlark.Value, _ int) (bool, error) {
	return compareEqual(op, x.o == y.(Optimizer).o, "optimizers")
}

var optimizerAttrNames = []string{"impl", "in_backward", "kind", "momentum", "nesterov", "newton_schulz", "ns_steps", "tp_mode"}

func (x Optimizer) AttrNames() []string { return optimizerAttrNames }

func (x Optimizer) Attr(name string) (starlark.Value, error) {
	switch name {
	case "kind":
		return starlark.String(x.o.Kind.String()), nil
	case "impl":
		if x.o.Impl == "" {
			return starlark.None, nil
		}
		return starlark.String(x.o.Impl), nil
	case "momentum":
		return starlark.Float(x.o.Momentum), nil
	case "in_backward":
		return starlark.Bool(x.o.InBackward), nil
	case "nesterov":
		return starlark.Bool(x.o.Nesterov), nil
	case "ns_steps":
		return starlark.MakeInt(x.o.NSSteps), nil
	case "newton_schulz":
		if x.o.Kind != core.Muon {
			return starlark.None, nil
		}
		if x.o.NS == "" {
			return starlark.String("torch"), nil
		}
		return starlark.String(x.o.NS), nil
	case "tp_mode":
		if x.o.Kind != core.Muon {
			return starlark.None, nil
		}
		if x.o.MuonTP == "" {
			return starlark.String("duplicated"), nil
		}
		return starlark.String(x.o.MuonTP), nil
	}
	return nil, nil
}

// Unpack accepts an optimizer value or a kind name ("adamw8bit"), which
// means that optimizer with its defaults.
func (x *Optimizer) Unpack(v starlark.Value) error {
	switch v := v.(type) {
	case Optimizer:
		*x = v
		return nil
	case starlark.String:
		k, err := core.ParseOptimizerKind(string(v))
		if err != nil {
			return fmt.Errorf("unknown optimizer %q (known: %s)", string(v), strings.Join(core.Optimizers(), ", "))
		}
		*x = Optimizer{defaultOptimizer(k)}
		return nil
	}
	return fmt.Errorf("got %s, want an optimizer such as adamw()", v.Type())
}

// defaultOptimizer is kind with the defaults its builtin gives.
func defaultOptimizer(kind core.OptimizerKind) core.Optimizer {
	switch kind {
	case core.Muon: // torch.optim.Muon's defaults
		return core.Optimizer{Kind: kind, Momentum: muonMomentum, Nesterov: true, NSSteps: core.MuonDefaultNSSteps}
	}
	return core.Optimizer{Kind: kind}
}

// muonMomentum is torch.optim.Muon's momentum default.
const muonMomentum = 0.95

// optimizerDocs gives each optimizer builtin's Sig and Doc.
var optimizerDocs = []struct {
	kind     core.OptimizerKind
	sig, doc string
}{
	{core.SGD, "sgd(momentum=0.0, in_backward=False)",
		"Stochastic gradient descent (torch.optim.SGD): a momentum buffer per parameter when momentum > 0, no state otherwise."},
	{core.Adam, "adam(impl=None, fused=None, in_backward=False)",
		"Adam (torch.optim.Adam): exp_avg and exp_avg_sq per parameter in the optimizer-state dtype. " +
			"impl is the step's implementation: None (the trainer's: torch's \"foreach\"; under precision=\"megatron\" " +
			"Megatron-LM's Transformer Engine or apex FusedAdam, priced as \"fused\" without the device step counter), " +
			"\"foreach\" (the CUDA default: a temporary per parameter, all " +
			"alive at once: the size of all parameters), \"fused\" (in place; a 4-byte step counter per tensor on the device) or \"for-loop\" " +
			"(one tensor at a time: two temporaries the size of the largest). fused=True is impl=\"fused\"."},
	{core.AdamW, "adamw(impl=None, fused=None, in_backward=False)",
		"AdamW (torch.optim.AdamW), the default optimizer: exp_avg and exp_avg_sq per parameter in the " +
			"optimizer-state dtype (8 bytes/param in fp32). impl is None (the trainer's: torch's \"foreach\"; under " +
			"precision=\"megatron\" Megatron-LM's Transformer Engine or apex FusedAdam, priced as \"fused\" without the " +
			"device step counter), \"foreach\" (the CUDA default: a " +
			"temporary per parameter, all alive at once: the size of all parameters), \"fused\" (in place) or \"for-loop\" (two temporaries the " +
			"size of the largest tensor). fused=True is impl=\"fused\". in_backward steps each parameter as soon " +
			"as its gradient is complete and frees that gradient (optimizer-in-backward; each tensor then has its " +
			"own step, so its temporaries are one tensor's; it needs grad_accum=1, as torchtune's recipes require)."},
	{core.AdamW8bit, "adamw8bit(in_backward=False)",
		"bitsandbytes AdamW8bit: two int8 moments plus an fp32 absmax per 256-element block " +
			"(about 2 bytes/param); tensors under 4096 elements keep fp32 moments."},
	{core.PagedAdamW8bit, "paged_adamw8bit(in_backward=False)",
		"bitsandbytes PagedAdamW8bit: AdamW8bit state in CUDA unified memory, invisible to " +
			"torch.cuda.max_memory_allocated but counted in device use; pages to host under pressure."},
	{core.PagedAdamW, "paged_adamw(in_backward=False)",
		"bitsandbytes PagedAdamW (32-bit): two fp32 moments per parameter whatever the param dtype, in CUDA " +
			"unified memory (outside torch.cuda.max_memory_allocated); LitGPT's optimizer for quantized runs."},
	{core.Adafactor, "adafactor(in_backward=False)",
		"Adafactor without momentum: a factored second moment (row and column vectors for matrices, " +
			"a full vector for 1-D tensors)."},
	{core.Lion, "lion(in_backward=False)",
		"Lion: one momentum buffer per parameter, updated in place."},
	{core.Muon, "muon(momentum=0.95, nesterov=True, ns_steps=5, newton_schulz=\"torch\", impl=None, tp_mode=\"duplicated\")",
		"Muon (torch.optim.Muon, PyTorch 2.9+) on the 2-D weight matrices other than the embedding and the output " +
			"head, with AdamW on the rest (embeddings, head, norms, biases, 3-D expert weights), as Muon recipes run it: " +
			"one momentum buffer per matrix (4 bytes/param in fp32), AdamW's two moments elsewhere. Muon steps one matrix at " +
			"a time: its transient peak is the largest matrix's Newton-Schulz iteration (the Nesterov update, a bf16 copy, " +
			"two k x k Gram matrices, k the smaller dimension, and the next iterate), and its time adds 3 x ns_steps " +
			"matrix products per matrix. newton_schulz is the iteration's form: \"torch\" (torch.optim.Muon's addmm) or " +
			"\"reference\" (K. Jordan's expressions B = b*A + c*A@A, X = a*X + B@X, as Moonlight, LLaMA-Factory's use_muon and " +
			"Axolotl copy them: three k x n bf16 tensors alive at once more, five more elementwise kernels an iteration). " +
			"impl is its AdamW's (None: torch's \"foreach\", Megatron's FusedAdam under precision=\"megatron\"; \"foreach\", \"fused\" or \"for-loop\"). Under precision=\"megatron\" it is Megatron-LM's " +
			"--optimizer muon (NVIDIA's emerging_optimizers, newton_schulz=\"emerging\"): the fp32 main matrices and their " +
			"fp32 momentum, every expert's matrix of a grouped MoE too, Adam on the rest; under tp= each TE weight's shards " +
			"are all-gathered in fp32 and the whole matrix orthogonalized on every rank (tp_mode=\"duplicated\", " +
			"--muon-tp-mode's default; \"blockwise\": each rank its own shard); with parallel(distributed_optimizer=True) " +
			"it is Megatron's layer-wise distributed optimizer (each data-parallel rank owns whole matrices, the rest " +
			"sharded by the distributed optimizer). Otherwise on one GPU or data parallel only: sharded layouts " +
			"(zero=, fsdp=, tp=, ...) are refused."},
	{core.SparseAdam, "sparse_adam(in_backward=False)",
		"SparseAdam (torch.optim.SparseAdam): two moments, updated only on the rows read this step (for sparse tables)."},
}

func OptimizerBuiltins() []host.Builtin {
	var out []host.Builtin
	for _, d := range optimizerDocs {
		kind := d.kind
		out = append(out, host.Builtin{Name: kind.String(), Sig: d.sig, Doc: d.doc,
			Fn: func(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
				return optimizerFn(kind, b, args, kwargs)
			}})
	}
	return out
}

func optimizerFn(kind core.OptimizerKind, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	o := defaultOptimizer(kind)
	var momentum, fused, impl starlark.Value
	ns, tpMode := "torch", "duplicated"
	pairs := []any{"in_backward?", &o.InBackward}
	switch kind {
	case core.SGD:
		pairs = append([]any{"momentum?", &momentum}, pairs...)
	case core.Adam, core.AdamW:
		pairs = append([]any{"impl?", &impl, "fused?", &fused}, pairs...)
	case core.Muon:
		pairs = []any{"momentum?", &momentum, "nesterov?", &o.Nesterov, "ns_steps?", &o.NSSteps, "newton_schulz?", &ns, "impl?", &impl, "fused?", &fused, "tp_mode?", &tpMode}
	}
	if err := AliasedKeyword(b.Name(), kwargs, optimizerAlias); err != nil {
		return nil, err
	}
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, pairs...); err != nil {
		return nil, err
	}
	switch v := impl.(type) {
	case nil, starlark.NoneType: // the trainer's (core.Plan.StepImpl)
	case starlark.String:
		if v == "" {
			return nil, fmt.Errorf(`impl "" is not an implementation: None (the trainer's), "foreach", "fused" or "for-loop"`)
		}
		o.Impl = string(v)
	default:
		return nil, fmt.Errorf("impl must be a string or None (got %s)", impl.Type())
	}
	if kind == core.Muon && ns != "torch" { // "" is core's torch: o.Validate refuses other names
		if ns == "" {
			return nil, fmt.Errorf(`newton_schulz "" is not a form memsh knows: "torch", "reference" or "emerging"`)
		}
		o.NS = ns
	}
	if kind == core.Muon && tpMode != "duplicated" { // "" is core's duplicated: the plan's validation refuses other names
		switch tpMode {
		case core.MuonBlockwise:
		case "distributed":
			return nil, fmt.Errorf(`tp_mode "distributed" (Newton-Schulz distributed over the TP ranks, a Gram all-reduce an iteration) is not modelled: "duplicated" or "blockwise"`)
		default:
			return nil, fmt.Errorf(`tp_mode %q is not a mode memsh knows: "duplicated" (Megatron's --muon-tp-mode default) or "blockwise"`, tpMode)
		}
		o.MuonTP = tpMode
	}
	if momentum != nil {
		m, err := host.AsFloat(momentum, "momentum")
		if err != nil {
			return nil, err
		}
		o.Momentum = m
	}
	if fused != nil && fused != starlark.None {
		fb, ok := fused.(starlark.Bool)
		if !ok {
			return nil, fmt.Errorf("fused must be True, False or None (got %s)", fused.Type())
		}
		f := bool(fb)
		switch {
		case f && o.Impl != "" && o.Impl != "foreach" && o.Impl != "fused":
			return nil, fmt.Errorf("fused=True conflicts with impl=%q", o.Impl)
		case f:
			o.Impl = "fused"
		case o.Impl == "fused":
			return nil, fmt.Errorf("fused=False conflicts with impl=\"fused\"")
		case o.Impl == "":
			o.Impl = "foreach" // torch's default, named: not the trainer's (core.Plan.StepImpl)
		}
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return Optimizer{o}, nil
}
