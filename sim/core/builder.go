package core

import (
	"regexp"
	"strings"

	"github.com/memsh/memsh/sim/units"
)

// builder lowers layers into a program for one micro-batch.
type Builder struct {
	P       *Program
	Batch   int64 // sequences (or samples) in the micro-batch
	Seq     int64 // tokens per sequence (1 for non-sequence models)
	Prec    Precision
	Rt      Runtime
	Ckpt    Checkpoint
	Lora    *LoRA
	f8      Float8                 // torchao's float8 linears (float8.go)
	qat     QAT                    // torchao's fake-quantized linears (qat.go)
	teInput map[Value][2]Value     // a TE linear input's fp8 copies, shared by the linears reading it (te_fp8.go)
	aoInput aoInputs               // torchao's fp8 inputs under tensor parallelism (float8_tp.go)
	quant   units.DType            // quantized frozen base weights (NF4, INT8), InvalidDType when none
	Eval    bool                   // eval mode: no autograd, no saves, dropout off
	dead    *[]Value               // what a dead graph's ops save, held until it ends (dead_graph.go)
	prefix  string                 // the module path ops and tensors are named under
	names   map[scopedLayer]string // unnamed layers' module names (ModuleName)
	taken   map[string]int         // module paths taken, with how many layers took them
	region  int32                  // current checkpoint region, 0 = none
	graph   bool                   // a compiled graph is open (compile.go)
	compile Compile
	block   int // index of the current repeated block (for checkpoint(every=k))
	// loraHits are the module-name LoRA targets a linear matched
	// (lora_targets.go).
	loraHits map[string]bool
	// loraAdapted: some LoRA adapter was registered (unmatchedLoRATargets)
	loraAdapted bool
	// loraRe is the plan's LoRA target_pattern, compiled once a lowering
	// (patternAdapts).
	loraRe *regexp.Regexp
	// noGradTrain counts the NoGrad regions open in a training step (not
	// an eval plan): adapters registered there still require grad
	// (AdapterParam), as PEFT's do, and get none.
	noGradTrain int
	// pref is the plan's preference objective (dpo.go), nil when none.
	pref *Preference
	// refCopy: the parameters registered now are DPO's reference copy of
	// the model (dpo.go): in no optimizer, never trained, yet requiring
	// grad as TRL leaves them, so autocast caches their casts.
	refCopy bool
	// policyFirst: the parameters registered now are the policy's, met
	// first in a no_grad forward (KTO's KL forward, kto.go): frozen and
	// trainable as the policy's forward would register them.
	policyFirst bool
	// klForward: KTO's KL forward is being lowered (kto.go).
	klForward bool
	// castCache holds autocast's cached casts of the weights (Weight) by
	// parameter and dtype, for a step whose forwards call the same modules
	// again (KTO's, kto.go): autocast's cache hands the second call the
	// first's copy. Nil otherwise.
	castCache map[castKey]Value
	// bodyFirst is the first parameter of the model body being lowered
	// (lowerBody): the embedding a head ties to is that body's.
	bodyFirst int
	// curBlock is the repeated block being lowered, 1-based (0: none),
	// recorded on each op (OpInfo.Block).
	curBlock int32

	members    int64 // ensemble members in the step (Plan.Members, at least 1)
	sequential bool  // members run through the model one at a time
	spread     bool  // one member here, the others on other GPUs (members.go)
	rollout    int64 // autoregressive steps of a model built from a data batch
	inputGrad  bool  // the first embedding's output requires grad (EmbeddingOutput)
	embedOut   Value // the first token lookup's output in the body being lowered (Model.HoldsEmbedding), or NoValue

	headCast map[int32]Value // autocast's cached cast of a trainable lm_head weight, shared by its chunks
	// tiedHead is the embedding weight the lm_head being lowered shares
	// (tie_embeddings), or -1: its weight is registered tied, so whether
	// it trains, and so what its matmul saves, is the embedding's.
	tiedHead int32

	everyBlock bool            // lower every repeated block, copy none (Plan.EveryBlock)
	gen        generation      // GRPO's generation phase (Plan.LowerGeneration, generation.go); zero: none
	stop       func() error    // the caller's context (Plan.LowerProgramUnder); nil: never stops
	inName     nameWatch       // the input of the block being lowered, and whether its name was read (block_clone.go)
	clones     cloneArena      // where block copies are written (block_clone.go)
	templates  *BlockTemplates // blocks kept from other lowerings (block_templates.go); nil: none
	scopes     []string        // the module paths the open scopes replaced (Scope)
	unscope    func()          // b.popScope, made once

	Par parLowering // tensor, context and expert parallelism
	// fusedInputs are the column-parallel inputs whose backward collective
	// Megatron's fused linear_qkv / linear_fc1 runs once (recordInputComm).
	fusedInputs map[fusedInput]bool
	Ft          *Finetune // quant, freeze, chunked loss, packing
	// ft is where configureFinetune writes Ft: a Builder a lowering
	// reuses (ProgramBuffers) carries it, and nothing keeps Ft past the
	// lowering (a Finetune a lowering was 2.6 of
	// BenchmarkSearchLlama70B1024's 296 MB/op).
	ft Finetune

	Images Images // images per sample for a vision tower (images.go)
	Videos Videos // videos per sample for a video tower (videos.go)
	// Cross is what a vision model gives the cross-attention layers that
	// follow it (Llama 3.2 Vision; images.go), nil when none ran.
	Cross *CrossStates
	// Deepstack is what a Qwen3-VL vision tower leaves for the first
	// decoder layers (images.go), nil when none ran.
	Deepstack *DeepstackStates
	// shared are values a layer leaves for later layers of the same
	// lowering by name (Share, SharedValue): Gemma 4's per-layer inputs
	// and the keys and values its last layers reuse. Nil until one is set.
	shared map[string]Value
	shares int // Share calls so far (a block that shares is not copied: block_clone.go)
	// reuse: Param returns the parameter of the same name registered
	// before, if any (ReuseParams), its name read without reuseStrip (a
	// scope a second call of the same modules runs under: DPO's
	// reference forward, dpo.go).
	reuse      bool
	reuseStrip string
	// decoderLayers are the repeats whose blocks are handed the model's
	// position_ids (Model.PositionIDs); nil when none are.
	decoderLayers map[*Repeat]bool
}

// ReuseParams makes the parameters registered until the returned func
// runs the ones of the same names registered before, where there are:
// for a module the forward runs twice (Gemma 3n's AltUp router, in
// predict and in correct), whose weights, adapters and quantization are
// one.
func (b *Builder) ReuseParams() func() {
	prev := b.reuse
	b.reuse = true
	return func() { b.reuse = prev }
}

// Share leaves v for later layers under key (a value every reader reads
// whole: a copied block reads the same one).
func (b *Builder) Share(key string, v Value) {
	if b.shared == nil {
		b.shared = map[string]Value{}
	}
	b.shared[key] = v
	b.shares++
}

// SharedValue is the value Share left under key, if any.
func (b *Builder) SharedValue(key string) (Value, bool) {
	v, ok := b.shared[key]
	return v, ok
}

// scope pushes a name onto the module path; the returned func pops it.
func (b *Builder) Scope(name string) func() {
	if name == "" {
		return noScope
	}
	b.scopes = append(b.scopes, b.prefix)
	b.prefix = b.join(b.prefix, name)
	if b.unscope == nil {
		b.unscope = b.popScope
	}
	return b.unscope
}

// popScope is what Scope returns: the module path before the latest
// scope back. Scopes close in the order they opened (each a deferred or
// closing call of its opener's), so one func, made once per Builder,
// serves them all: a closure of its own per scope was a tenth of the
// bytes of the search's lowerings.
func (b *Builder) popScope() {
	n := len(b.scopes) - 1
	b.prefix = b.scopes[n]
	b.scopes = b.scopes[:n]
}

// noScope closes the scope of no name.
func noScope() {}

// ModuleName is the name layer l takes in the current scope (ModuleName),
// an unnamed layer numbered when an earlier sibling took the same default
// name: norm, then norm_1 (as torch.fx numbers duplicate names). The same
// layer lowered again in the same scope keeps its name.
func (b *Builder) ModuleName(l Layer) string {
	name := ModuleName(l)
	if name == "" {
		return name
	}
	key := scopedLayer{b.prefix, l}
	if n, ok := b.names[key]; ok {
		return n
	}
	if b.names == nil {
		b.names, b.taken = map[scopedLayer]string{}, map[string]int{}
	}
	full := b.join(b.prefix, name)
	if k := b.taken[full]; k > 0 && l.Label() == "" {
		name = name + "_" + Itoa(int64(k))
	}
	b.taken[full]++
	b.names[key] = name
	return name
}

// scopedLayer is a layer in a module scope.
type scopedLayer struct {
	scope string
	l     Layer
}

// Concat is the parts joined, written into the builder's name slab
// (cloneArena): the names and whys a lowering builds for each op
// ("output of linear " and the module path) without a heap allocation
// each.
func (b *Builder) Concat(parts ...string) string {
	n := 0
	for _, s := range parts {
		n += len(s)
	}
	if n == 0 {
		return ""
	}
	if s, ok := b.clones.recall.recalled(0, parts...); ok {
		return s
	}
	names := b.clones.room(n)
	at := names.Len()
	for _, s := range parts {
		names.WriteString(s)
	}
	s := names.String()[at:]
	b.clones.recall.remember(s)
	return s
}

// Name is n under the module path: "layers.3.mlp" and "up_proj" give
// "layers.3.mlp.up_proj".
func (b *Builder) Name(n string) string { return b.join(b.prefix, n) }

// join is JoinName(a, c), written into the builder's name slab
// (cloneArena) rather than a heap allocation of its own: a lowering
// names every op, value, parameter and scope it makes, and those
// concatenations were the most numerous allocations of a search (1.7 M
// of BenchmarkSearchLlama70B1024's 11 M).
func (b *Builder) join(a, c string) string {
	switch {
	case a == "":
		return c
	case c == "":
		return a
	}
	if s, ok := b.clones.recall.recalled('.', a, c); ok {
		return s
	}
	names := b.clones.room(len(a) + 1 + len(c))
	at := names.Len()
	names.WriteString(a)
	names.WriteByte('.')
	names.WriteString(c)
	s := names.String()[at:]
	b.clones.recall.remember(s)
	return s
}

func (b *Builder) Val(v Value) *ValueInfo { return &b.P.Values[v] }

func (b *Builder) Shape(v Value) []int64 { return b.P.Values[v].Shape }

func (b *Builder) Dtype(v Value) units.DType { return b.P.Values[v].Dtype }

func (b *Builder) Last(v Value) int64 {
	s := b.P.Values[v].Shape
	return s[len(s)-1]
}

// withLast returns shape s with its last dimension replaced.
func WithLast(s []int64, n int64) []int64 {
	out := append([]int64(nil), s...)
	out[len(out)-1] = n
	return out
}

// numel is the element count of shape. Lowering calls it for every tensor,
// so it is where sizes are checked: a count past MaxElements (or a negative
// dimension) stops the lowering with an error (checked.go).
func Numel(shape []int64) int64 {
	n, ok := units.ShapeNumel(shape)
	if !ok {
		panic(LowerError{units.ShapeError(shape)})
	}
	return n
}

// rows is the product of all but the last dimension (tokens for [b, s, h]).
func Rows(shape []int64) int64 { return Numel(shape[:len(shape)-1]) }

// param registers a parameter tensor and returns its index.
func (b *Builder) Param(name string, shape []int64, role Role) int32 {
	if b.reuse {
		full := strings.TrimPrefix(b.Name(name), b.reuseStrip)
		for pi := len(b.P.Params) - 1; pi >= 0; pi-- {
			if b.P.Params[pi].Name == full {
				return int32(pi)
			}
		}
	}
	b.ReserveParams(1)
	n := Numel(shape)
	// A parameter a no_grad region of a training step reads (DeepSeek-V3.2's
	// indexer, CLIP's layers past vision_feature_layer) still requires
	// grad in PyTorch: it is trainable and gets no gradient (replay's
	// gradlessParams), which ZeRO's and Megatron's flat buffers still hold.
	trainable := (!b.Eval || b.noGradTrain > 0) && !b.refCopy
	if b.Lora != nil && role != RoleNormLoRA {
		trainable = false // LoRA freezes the base; adapters register their own
	}
	full := strings.TrimPrefix(b.Name(name), b.reuseStrip) // a module met first under a second call's scope (KTO's KL forward)
	trainable = b.Ft.paramTrainable(full, role, trainable, b.Eval && !b.policyFirst)
	tied := int32(-1)
	if role == RoleLMHead && name == "weight" {
		tied = b.tiedHead
	}
	b.P.Params = append(b.P.Params, ParamInfo{
		Name: full, Shape: shape, Numel: n, FullNumel: n,
		Trainable: trainable, Role: role, TiedTo: tied, Reference: b.refCopy,
	})
	return int32(len(b.P.Params) - 1)
}

// adapterParam registers a trainable parameter that stays trainable under
// LoRA; LoRA's A and B take the adapters' dtype (Plan.AdapterDType).
func (b *Builder) AdapterParam(name string, shape []int64, role Role) int32 {
	i := b.Param(name, shape, role)
	// PEFT's adapters require grad wherever they sit (Param: a no_grad
	// forward's are trainable and get no gradient), LoRA's freezing aside.
	b.P.Params[i].Trainable = !b.Eval || b.noGradTrain > 0
	if role == RoleLoRA {
		b.P.Params[i].DType = b.AdapterDType()
		b.loraAdapted = true
	}
	return i
}

// AdapterDType is LoRA's adapters' own dtype (Plan.AdapterDType),
// InvalidDType when they take the params dtype.
func (b *Builder) AdapterDType() units.DType {
	if b.Ft == nil {
		return units.InvalidDType
	}
	return b.Ft.adapterDT
}

func (b *Builder) Trainable(pi int32) bool {
	p := &b.P.Params[pi]
	if p.TiedTo >= 0 {
		return b.P.Params[p.TiedTo].Trainable
	}
	return p.Trainable
}

// addOp appends an op reading ins and params and returns its index.
func (b *Builder) AddOp(kind, name string, ins []Value, params ...int32) int32 {
	if len(b.P.Ops) >= maxOps {
		panic(LowerError{opsError()})
	}
	b.P.Ops = append(b.P.Ops, OpInfo{
		Name: b.Name(name), Module: b.prefix, Kind: kind, In: ins, Params: params, Region: b.region, Block: b.curBlock,
		SideStream: b.Par.sideStream,
	})
	return int32(len(b.P.Ops) - 1)
}

func (b *Builder) Op(i int32) *OpInfo { return &b.P.Ops[i] }

// out adds an output of op i. It requires grad when an input does or the op
// reads a trainable parameter. Its outputs come before what the op saves
// (Save): an output requiring grad after a Save that saved nothing is an
// internal error.
func (b *Builder) Out(i int32, name string, shape []int64, dt units.DType, why string) Value {
	o := &b.P.Ops[i]
	grad := false
	if !b.Eval && dt.Float() {
		for _, v := range o.In {
			if b.P.Values[v].Grad {
				grad = true
			}
		}
		for _, pi := range o.Params {
			if b.Trainable(pi) {
				grad = true
			}
		}
	}
	if grad && o.savesDropped {
		panic(LowerError{units.Errorf(b.Name(""), "internal error: op %s saved tensors before its output %s, which requires grad (Builder.Save comes after every Out)", o.Name, name)})
	}
	b.P.Values = append(b.P.Values, ValueInfo{
		Name: b.Name(name), Shape: shape, Dtype: dt, Bytes: dt.Bytes(Numel(shape)),
		Grad: grad, Cat: CatActivations, Producer: i, Why: why,
	})
	v := Value(len(b.P.Values) - 1)
	if o.Out == nil { // the first output's list carved from a slab (an allocation per op was a twentieth of a search's)
		o.Out = b.clones.vals.take(1)
	}
	o.Out = append(o.Out, v)
	if o.Bytes == 0 {
		o.Bytes = float64(b.P.Values[v].Bytes)
	} else {
		o.Bytes += float64(b.P.Values[v].Bytes)
	}
	return v
}

// save marks storages autograd keeps for op i's backward (none in eval).
// It comes after the op's outputs (Out), which say whether autograd
// records the op: a Save before any is an internal error, and so is an
// output requiring grad added after a Save that saved nothing.
func (b *Builder) Save(i int32, vs ...Value) {
	o := &b.P.Ops[i]
	if len(o.Out) == 0 {
		panic(LowerError{units.Errorf(b.Name(""), "internal error: op %s saves tensors before it has an output (Builder.Save comes after every Out)", o.Name)})
	}
	if b.Eval {
		return
	}
	if !b.P.HasBackward(o) { // autograd records the op only when an output requires grad
		o.savesDropped = true
		return
	}
	if b.dead != nil { // a graph no gradient reaches: held until it ends (DeadGraph)
		*b.dead = append(*b.dead, vs...)
		return
	}
	var seen map[Value]bool // for ops saving many tensors (a MoE's expert weights): a linear scan per value is quadratic
	if len(vs)+len(o.Saved) > 32 {
		seen = make(map[Value]bool, len(vs)+len(o.Saved))
		for _, s := range o.Saved {
			seen[s] = true
		}
	}
	for _, v := range vs {
		if v == NoValue {
			continue
		}
		dup := false
		if seen != nil {
			dup = seen[v]
			seen[v] = true
		} else {
			for _, s := range o.Saved {
				if s == v {
					dup = true
				}
			}
		}
		if !dup {
			if o.Saved == nil { // carved from a slab, room for every value given (an allocation per op saving)
				o.Saved = b.clones.vals.take(len(vs))
			}
			o.Saved = append(o.Saved, v)
		}
	}
}

// NoGrad lowers what follows as under torch.no_grad() until the returned
// func runs (Eval): nothing is saved, parameters registered there get no
// gradient, and no output requires grad, so none of the ops has a backward
// (Program.HasBackward): their inputs that need gradients get none from
// them, and no backward FLOPs or time are counted for them.
func (b *Builder) NoGrad() func() {
	eval := b.Eval
	if !eval {
		b.noGradTrain++
	}
	b.Eval = true
	return func() {
		b.Eval = eval
		if !eval {
			b.noGradTrain--
		}
	}
}

func (b *Builder) Grad(v Value) bool { return b.P.Values[v].Grad }

// cast returns x in dtype dt, adding a copy op when it differs (aten::_to_copy,
// which saves nothing for backward).
func (b *Builder) Cast(x Value, dt units.DType, why string) Value {
	if b.Dtype(x) == dt {
		return x
	}
	i := b.AddOp("cast", "to_"+dt.Name(), []Value{x})
	y := b.Out(i, b.LastName(x)+"."+dt.Name(), b.Shape(x), dt, why)
	b.Op(i).Bytes += float64(b.Val(x).Bytes)
	return y
}

// LastName is the last part of v's name ("up_proj.out" gives "out"), the
// one read of a value's name while lowering: a repeated block that reads
// its input's name is copied only onto inputs of that name
// (block_clone.go).
func (b *Builder) LastName(v Value) string {
	if v == b.inName.of {
		b.inName.read = true
	}
	n := b.P.Values[v].Name
	for i := len(n) - 1; i >= 0; i-- {
		if n[i] == '.' {
			return n[i+1:]
		}
	}
	return n
}

// promote is PyTorch's type promotion for two float tensors.
func Promote(a, c units.DType) units.DType {
	if a == units.FP32 || c == units.FP32 {
		return units.FP32
	}
	if a == units.FP64 || c == units.FP64 {
		return units.FP64
	}
	return a
}
