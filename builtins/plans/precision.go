package plans

import (
	"fmt"
	"strings"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// Precision is the Starlark value of a mixed-precision policy (type
// "precision"): a named one ("bf16-mixed") or a custom one from
// precision(params=..., ...).
type Precision struct {
	p      core.Precision
	custom bool
}

var (
	_ starlark.HasAttrs   = Precision{}
	_ starlark.Comparable = Precision{}
	_ starlark.Unpacker   = (*Precision)(nil)
)

// SimPrecision is the wrapped policy.
func (x Precision) SimPrecision() core.Precision { return x.p }

func (x Precision) Type() string         { return "precision" }
func (x Precision) Freeze()              {}
func (x Precision) Truth() starlark.Bool { return starlark.True }
func (x Precision) Hash() (uint32, error) {
	return starlark.String(x.String()).Hash()
}

// Label is the short form for titles: the name, or the dtypes of a custom
// policy.
func (x Precision) Label() string {
	if !x.custom {
		return x.p.Name
	}
	s := fmt.Sprintf("params %s, compute %s, grads %s", x.p.Params, x.p.Compute, x.p.Grads)
	if x.p.Megatron {
		s = "megatron, " + s
	}
	if x.p.Master != units.InvalidDType {
		s += ", master " + x.p.Master.Name()
	}
	s += ", states " + x.p.States.Name()
	if x.p.Norms != units.InvalidDType {
		s += ", norms " + x.p.Norms.Name()
	}
	return s
}

// LabelFor is Label as plan p holds the dtypes: a custom autocast policy
// under DeepSpeed's ZeRO as DeepSpeed runs it (the model in the compute
// dtype, its master copy: core.DeepspeedPolicy), "bf16 params" where the
// policy says fp32 ones.
func (x Precision) LabelFor(p *core.Plan) string {
	if !x.custom || !x.p.Autocast || p.Parallel.Norm().Zero == 0 {
		return x.Label()
	}
	return Precision{p: core.DeepspeedPolicy(x.p), custom: true}.Label()
}

func (x Precision) String() string {
	if !x.custom {
		return fmt.Sprintf("precision(%q)", x.p.Name)
	}
	var b strings.Builder
	b.WriteString("precision(")
	if x.p.Megatron { // the policy the dtypes change, which keeps its runtime
		b.WriteString(`"megatron", `)
	}
	fmt.Fprintf(&b, "params=%s, compute=%s, grads=%s", x.p.Params, x.p.Compute, x.p.Grads)
	if x.p.Master != units.InvalidDType {
		fmt.Fprintf(&b, ", master=%s", x.p.Master)
	}
	fmt.Fprintf(&b, ", optimizer_states=%s", x.p.States)
	if x.p.Autocast {
		b.WriteString(", autocast=True")
	}
	if x.p.Norms != units.InvalidDType {
		fmt.Fprintf(&b, ", norms=%s", x.p.Norms)
	}
	return b.String() + ")"
}

func (x Precision) CompareSameType(op syntax.Token, y starlark.Value, _ int) (bool, error) {
	return compareEqual(op, x.p == y.(Precision).p, "precision policies")
}

var precisionAttrNames = []string{"autocast", "compute", "grads", "master", "megatron", "name", "norms", "optimizer_states", "params"}

func (x Precision) AttrNames() []string { return precisionAttrNames }

func (x Precision) Attr(name string) (starlark.Value, error) {
	switch name {
	case "name":
		return starlark.String(x.p.Name), nil
	case "params":
		return host.NewDType(x.p.Params), nil
	case "compute":
		return host.NewDType(x.p.Compute), nil
	case "grads":
		return host.NewDType(x.p.Grads), nil
	case "master":
		if x.p.Master == units.InvalidDType {
			return starlark.None, nil
		}
		return host.NewDType(x.p.Master), nil
	case "optimizer_states":
		return host.NewDType(x.p.States), nil
	case "autocast":
		return starlark.Bool(x.p.Autocast), nil
	case "megatron":
		return starlark.Bool(x.p.Megatron), nil
	case "norms":
		return host.NewDType(x.p.NormDType()), nil
	}
	return nil, nil
}

// Unpack accepts a precision value or a policy name ("bf16-mixed").
func (x *Precision) Unpack(v starlark.Value) error {
	switch v := v.(type) {
	case Precision:
		*x = v
		return nil
	case starlark.String:
		p, err := core.LookupPrecision(string(v))
		if err != nil {
			return err
		}
		*x = Precision{p: p}
		return nil
	}
	return fmt.Errorf("got %s, want a precision name or precision(...)", v.Type())
}

func PrecisionBuiltins() []host.Builtin {
	var names []string
	for _, p := range core.Precisions() {
		names = append(names, p.Name)
	}
	return []host.Builtin{{
		Name: "precision",
		Sig:  "precision(name=None, params=None, compute=None, grads=None, master=None, optimizer_states=None, autocast=None, norms=None)",
		Doc: "A mixed-precision policy: the dtype of each kind of tensor. precision(\"bf16-mixed\") is a named " +
			"policy (" + strings.Join(names, ", ") + "); train(precision=\"bf16-mixed\") takes the name directly. " +
			"A custom policy gives the dtypes (dtype values or names): params (stored weights), compute " +
			"(activations; default params), grads (parameter gradients; default params), master (an fp32 " +
			"master copy, default none), optimizer_states (default master when set, else params), and " +
			"autocast (torch.autocast over the stored weights: low-precision weight copies cached in forward, " +
			"fp32-list ops in fp32; default False), and norms (the RMSNorm weights' dtype, default params). " +
			"With a name, the other arguments change that policy.\n\n" +
			"QLoRA through TRL's SFTTrainer keeps the norms in fp32 (peft's prepare_model_for_kbit_training " +
			"upcasts the non-quantized weights; peft_module_casting_to_bf16 casts embeddings and lm_head back, not the norms): " +
			"precision(params=bf16, autocast=True, norms=fp32), under which each norm's output and what follows it is fp32.\n\n" +
			"Megatron-LM's --bf16 is precision(\"megatron\") (bf16 params, fp32 main grads and master weights: 18 bytes/param with Adam) " +
			"and the plan runs as Megatron-LM runs it (Transformer Engine's fused norms, Megatron's fused SwiGLU and rope, its batch, main-grad " +
			"buffers and overlapped tensor-parallel communication); changed dtypes keep that: --grad-reduce-in-bf16 is " +
			"precision(\"megatron\", grads=\"bf16\"), --fp16 precision(\"megatron\", params=\"fp16\", compute=\"fp16\"). " +
			"precision(params=bf16, grads=fp32, master=fp32) has the same dtypes run by PyTorch's eager kernels.\n\n" +
			"Under DeepSpeed's ZeRO (parallel(zero=...)) an autocast policy runs as DeepSpeed's bf16/fp16 mode: the model in the 16-bit dtype, " +
			"the ZeRO optimizer's master partition in master (fp32 unless set) and always its own copy, even in the parameters' dtype; " +
			"its moments on the GPU in the master's dtype. precision(\"bf16-mixed\", master=\"bf16\", optimizer_states=\"bf16\") is " +
			"bf16_master_weights_and_grads with bf16_optimizer_states; master=\"bf16\" alone needs offload(optimizer=\"cpu\") " +
			"(fp32 moments on the host), as DeepSpeed asserts (docs/sharding.md). Under ZeRO grads= is the dtype DeepSpeed accumulates " +
			"gradients in (data_types.grad_accum_dtype): precision(params=\"bf16\", grads=\"fp32\", master=\"fp32\") is bf16 mode " +
			"with fp32 accumulation, autograd's gradients still bf16.",
		Fn: precisionFn,
	}}
}

func precisionFn(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var name, params, compute, grads, master, states, autocast, norms starlark.Value
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "name?", &name, "params?", &params,
		"compute?", &compute, "grads?", &grads, "master?", &master,
		"optimizer_states?", &states, "autocast?", &autocast, "norms?", &norms); err != nil {
		return nil, err
	}
	given := func(v starlark.Value) bool { return v != nil && v != starlark.None }
	var p core.Precision
	if given(name) {
		var x Precision
		if err := x.Unpack(name); err != nil {
			return nil, err
		}
		p = x.p
	} else if !given(params) {
		return nil, fmt.Errorf("precision needs a policy name or params= (the dtype of the stored weights)")
	}
	custom := false
	dtype := func(v starlark.Value, what string, dst *units.DType) error {
		if !given(v) {
			return nil
		}
		var d host.DType
		if err := d.Unpack(v); err != nil {
			return fmt.Errorf("%s: %v", what, err)
		}
		*dst, custom = d.SimDType(), true
		return nil
	}
	if err := dtype(params, "params", &p.Params); err != nil {
		return nil, err
	}
	if !given(name) {
		p.Compute, p.Grads = p.Params, p.Params
	}
	for _, f := range []struct {
		v    starlark.Value
		what string
		dst  *units.DType
	}{{compute, "compute", &p.Compute}, {grads, "grads", &p.Grads}, {master, "master", &p.Master}} {
		if err := dtype(f.v, f.what, f.dst); err != nil {
			return nil, err
		}
	}
	if !given(name) {
		p.States = p.Params
		if p.Master != units.InvalidDType {
			p.States = p.Master
		}
	}
	if err := dtype(states, "optimizer_states", &p.States); err != nil {
		return nil, err
	}
	if err := dtype(norms, "norms", &p.Norms); err != nil {
		return nil, err
	}
	if p.Norms != units.InvalidDType && !p.Norms.Float() {
		return nil, fmt.Errorf("precision: norms dtype must be a float type (got %s)", p.Norms)
	}
	if given(autocast) {
		a, ok := autocast.(starlark.Bool)
		if !ok {
			return nil, &units.Error{Msg: fmt.Sprintf("autocast must be True or False (got %s)", autocast.Type()),
				Hint: `autocast=True runs torch.autocast over the stored weights, as "bf16-mixed" does; False is the default`}
		}
		p.Autocast, custom = bool(a), true
	}
	if p.Master != units.InvalidDType && !p.Master.Float() {
		return nil, fmt.Errorf("precision: master dtype must be a float type (got %s)", p.Master)
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if custom {
		p.Name = "custom"
	}
	return Precision{p: p, custom: custom}, nil
}
