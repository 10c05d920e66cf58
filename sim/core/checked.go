package core

import (
	"fmt"

	"github.com/memsh/memsh/sim/units"
)

// checkTotals bounds what a step of this program can hold at once (see
// paramCopiesBound and valueCopiesBound), so that no sum in the replay,
// the allocator or the report can overflow, and the same times the
// micro-batches of the step, so that per-step totals (collectives run per
// micro-batch, traffic) cannot overflow either. Each tensor's count was
// already checked by numel.
func (p *Program) checkTotals(plan *Plan) error {
	var params, values int64
	ok := true
	for i := range p.Params {
		if ok {
			params, ok = units.AddChecked64(params, p.Params[i].FullNumel, units.MaxElements)
		}
	}
	if ok {
		_, ok = units.MulChecked64(params, units.ParamCopiesBound, units.MaxBytes)
	}
	if !ok {
		var n float64
		for i := range p.Params {
			n += float64(p.Params[i].FullNumel)
		}
		return &units.Error{Msg: fmt.Sprintf("%.3g parameters are more than memsh can count in bytes (at most %.3g)", n, float64(units.MaxBytes/units.ParamCopiesBound)),
			Hint: hintParams}
	}
	for i := range p.Values {
		if ok {
			values, ok = units.AddChecked64(values, p.Values[i].Bytes, units.MaxBytes)
		}
	}
	for i := range p.Ops {
		if ok {
			values, ok = units.AddChecked64(values, max(p.Ops[i].WorkF, 0), units.MaxBytes)
		}
		if ok {
			values, ok = units.AddChecked64(values, max(p.Ops[i].WorkB, 0), units.MaxBytes)
		}
	}
	var total int64
	if ok {
		total, ok = units.MulChecked64(values, units.ValueCopiesBound, units.MaxBytes-params*units.ParamCopiesBound)
		total += params * units.ParamCopiesBound
	}
	if !ok {
		return &units.Error{Msg: "the step's tensors add up to more bytes than memsh can count (4 EiB)",
			Hint: units.HintTensor}
	}
	mbs := max(plan.GradAccum, plan.MicroBatches()*max(plan.Parallel.VirtualStages, 1), 1)
	if _, ok := units.MulChecked64(total, mbs, units.MaxBytes); !ok {
		return &units.Error{Msg: fmt.Sprintf("%d micro-batches of this step move more bytes than memsh can count (4 EiB)", mbs),
			Hint: hintMicroBatches}
	}
	return nil
}

// MaxVocab bounds a vocabulary, the rows of an embedding (embedding(),
// add_embedding()) and a model's vocab=: 2^24 (16,777,216), sixty times
// the largest vocabularies in use (Gemma's 256,000). hf_config takes every
// size of a config.json up to the same bound (maxHFDim), so one rule
// refuses a vocabulary however it is given.
const MaxVocab = 1 << 24

// CheckVocab refuses a vocabulary (what: "rows", "vocab") past MaxVocab.
func CheckVocab(path, what string, n int64) error {
	if n > MaxVocab {
		return &units.Error{Path: path, Msg: fmt.Sprintf("%s=%d is a larger vocabulary than memsh simulates (at most %d)", what, n, MaxVocab),
			Hint: "an embedding's rows are its vocabulary; hf_config takes sizes up to the same bound"}
	}
	return nil
}

// maxMicroBatches bounds the micro-batches of a step (micro_batches=, else
// grad_accum=) as MaxGPUs bounds its GPUs: 2^24, thousands of times what
// real steps run (Llama 3 405B: 16M tokens of 8,192 per step, 2,048
// sequences), so that the count times the virtual stages (pipeline
// schedules, checkTotals) cannot overflow.
const maxMicroBatches = 1 << 24

// MaxGPUs bounds the GPUs of a layout or a cluster, so that products of
// parallel degrees cannot overflow: 2^24, a hundred times the largest
// clusters built.
const MaxGPUs = 1 << 24

// checkCounts rejects parallel layouts and clusters with more GPUs than
// MaxGPUs (dp*tp*pp*cp, nodes*gpus_per_node), and steps of more than
// maxMicroBatches micro-batches, before anything multiplies them.
// Negative degrees are left to validateParallel's messages.
func (p *Plan) checkCounts() error {
	par, c := p.Parallel, p.Cluster
	if m := p.MicroBatches(); m > maxMicroBatches {
		name, where := "grad_accum", "train"
		if par.MicroBatches > 0 {
			name, where = "micro_batches", "parallel"
		}
		return &units.Error{Path: where, Msg: fmt.Sprintf("%s=%d is more micro-batches a step than memsh simulates (%d)", name, m, maxMicroBatches)}
	}
	layout := []int64{max(par.DP, 1), max(par.TP, 1), max(par.PP, 1), max(par.CP, 1)}
	if n, ok := units.CheckedProduct(layout...); (!ok || n > MaxGPUs) && min(par.DP, par.TP, par.PP, par.CP) >= 0 {
		return &units.Error{Path: "parallel", Msg: fmt.Sprintf("dp*tp*pp*cp is %.3g GPUs, more than memsh simulates (%d)", units.FloatProduct(layout), MaxGPUs)}
	}
	machines := []int64{max(c.Nodes, 1), max(c.GPUsPerNode, 1)}
	if n, ok := units.CheckedProduct(machines...); (!ok || n > MaxGPUs) && min(c.Nodes, c.GPUsPerNode) >= 0 {
		return &units.Error{Path: "cluster", Msg: fmt.Sprintf("nodes*gpus_per_node is %.3g GPUs, more than memsh simulates (%d)", units.FloatProduct(machines), MaxGPUs)}
	}
	return nil
}

// maxOps bounds the ops of one lowered program, so that a runaway repeat
// count (repeat(repeat(block, 10000), 10000)) gives an error instead of
// lowering for minutes. The largest programs of the tests and examples
// (Llama 3 70B, a pipeline stage with its in-flight micro-batch copies, the
// Bris graph model) lower to under 10^4 ops; grouped MoE experts lower
// stacked, but transformers' per-expert loop (moe(impl="loop"), what
// hf_config builds) lowers every expert's ops: DeepSeek-V3 (58 MoE layers
// of 256 experts) under bf16 autocast on one GPU passes the bound
// (testdata/scripts/error_moe_loop_ops.txtar).
const maxOps = 200_000

// MaxLayers bounds a layer count a config.json gives (num_hidden_layers,
// a vision tower's depth): every layer lowers to at least one op, so a
// model of more layers than a program holds ops cannot be simulated, and
// the config readers refuse the count as they read it, before a family
// builds anything per layer.
const MaxLayers = maxOps

// opsError is the error when a program exceeds maxOps.
func opsError() *units.Error {
	return &units.Error{Msg: fmt.Sprintf("the model lowers to more than %d ops, more than memsh simulates", maxOps),
		Hint: hintOps}
}

// maxParamTensors bounds the parameter tensors of one lowered program, as
// maxOps bounds its ops: layers that register one tensor per expert or per
// table head would otherwise allocate for each of 2^40 experts before any
// size is checked (a fatal out-of-memory, not an error). DeepSeek-V3 (256
// routed experts, three matrices each, 61 layers) registers about 47,000.
const maxParamTensors = 200_000

// reserveParams stops the lowering when n more parameter tensors would
// pass maxParamTensors.
func (b *Builder) ReserveParams(n int64) {
	if n < 0 || n > maxParamTensors-int64(len(b.P.Params)) {
		panic(LowerError{&units.Error{Path: b.Name(""), Msg: fmt.Sprintf("more than %d parameter tensors (one per expert, table head and layer copy), more than memsh simulates", maxParamTensors),
			Hint: hintOps}})
	}
}

// The hints of size errors; isSizeError tells these errors from the other
// lowering errors.
const (
	hintParams = "check the layer sizes and repeat counts: memsh counts up to 4 EiB (2^62 bytes)"
	hintOps    = "check the repeat counts (a transformer has tens to a few hundred blocks), the experts or heads, and the sequential members and rollout steps (each lowers the model again); " +
		"a MoE looped over as transformers runs it (moe(impl=\"loop\"), hf_config's MoE models under transformers 4.x) lowers every expert's ops, more with autocast's weight copies or float8's casts: " +
		"expert parallelism (parallel(ep=...)) runs the experts grouped"

	hintMicroBatches = "check grad_accum= and micro_batches=: memsh counts up to 4 EiB (2^62 bytes) a step"
)

// isSizeError reports whether err is one of the size errors above.
func isSizeError(err error) bool {
	e, ok := err.(*units.Error)
	return ok && (e.Hint == units.HintTensor || e.Hint == hintParams || e.Hint == hintOps || e.Hint == hintMicroBatches)
}

// maxLayerNodes bounds the layers of one layer tree, counting a layer
// shared by several parents once per parent (as validate and describe walk
// it) and a repeated layer once: a tree past it cannot be lowered under
// maxOps anyway, and sequential(l, l) doubled 60 times would have 2^60
// nodes to walk.
const maxLayerNodes = 200_000

// checkLayerTree rejects a layer tree with more than maxLayerNodes nodes,
// counting through shared layers once each (memo), before anything walks
// it node by node.
func checkLayerTree(l Layer) error {
	if _, ok := layerNodes(l, map[Layer]int64{}); !ok {
		return &units.Error{Msg: fmt.Sprintf("the layer has more than %d layers below it (a layer used twice counts twice)", maxLayerNodes),
			Hint: "use repeat(layer, n) for n copies of a block"}
	}
	return nil
}

func layerNodes(l Layer, memo map[Layer]int64) (int64, bool) {
	if n, ok := memo[l]; ok {
		return n, true
	}
	n := int64(1)
	for _, c := range l.Children() {
		cn, ok := layerNodes(c, memo)
		if !ok {
			return 0, false
		}
		if n, ok = units.AddChecked64(n, cn, maxLayerNodes); !ok {
			return 0, false
		}
	}
	memo[l] = n
	return n, true
}

// checkLayerSizes checks that l's parameter count can be counted in bytes
// (and that no tensor of its own is too large), so that layer.params is
// never a wrapped number. Sequential, repeat and residual layers add up
// their children's checked counts, each shared child once per call; any
// other layer is lowered alone for one token (lowerAlone). Only size errors
// are reported: other lowering errors are left for the model and the plan,
// where the layer has its real input. Walking the structure instead of
// lowering the whole tree keeps each constructor call cheap, so wrapping a
// large model in layer after layer costs nothing like a lowering each.
func checkLayerSizes(l Layer) error {
	_, err := checkedParams(l, map[Layer]int64{})
	return err
}

// maxParams is the most parameters checkTotals accepts.
const maxParams = units.MaxBytes / units.ParamCopiesBound

// checkedParams is l's parameter count, computed with checked arithmetic;
// memo holds the layers already counted.
func checkedParams(l Layer, memo map[Layer]int64) (int64, error) {
	if n, ok := memo[l]; ok {
		return n, nil
	}
	var n int64
	ok := true
	switch x := l.(type) {
	case *Sequential:
		for _, c := range x.Layers {
			cn, err := checkedParams(c, memo)
			if err != nil {
				return 0, err
			}
			if n, ok = units.AddChecked64(n, cn, maxParams); !ok {
				break
			}
		}
	case *Repeat:
		ok = true
		for _, c := range x.Children() {
			cn, err := checkedParams(c, memo)
			if err != nil {
				return 0, err
			}
			var cs int64
			if cs, ok = units.MulChecked64(max(x.countOf(c), 0), cn, maxParams); !ok {
				break
			}
			if n, ok = units.AddChecked64(n, cs, maxParams); !ok {
				break
			}
		}
	case *Residual:
		return checkedParams(x.Layer, memo)
	default:
		var err error
		if n, err = lowerAlone(l); err != nil {
			return 0, err
		}
		ok = n >= 0 && n <= maxParams
	}
	if !ok {
		return 0, &units.Error{Msg: fmt.Sprintf("%.3g parameters are more than memsh can count in bytes (at most %.3g)", floatParams(l), float64(maxParams)),
			Hint: hintParams}
	}
	memo[l] = n
	return n, nil
}

// lowerAlone lowers l alone, for one token, and returns its parameter
// count from the lowered tensors, or a size error. A layer that cannot be
// lowered alone (it takes its width from its input, or runs only inside a
// graph model) counts as l.Params(), which its own sizes then bound.
func lowerAlone(l Layer) (int64, error) {
	m := &Model{Name: "layer", Layers: []Layer{l}, Loss: "none", InputDim: WidthIn(l)}
	if !m.TakesTokens() && m.InputDim <= 0 {
		return l.Params(), nil // act, dropout: no parameters of their own size
	}
	prog, err := m.lowerForCheck()
	if isSizeError(err) {
		return 0, err
	}
	if err != nil || prog == nil {
		return l.Params(), nil
	}
	var n int64
	for i := range prog.Params {
		if prog.Params[i].TiedTo < 0 {
			n += prog.Params[i].FullNumel // checkTotals bounded the sum
		}
	}
	return n, nil
}

// floatParams is l's parameter count in float64, for messages.
func floatParams(l Layer) float64 {
	switch x := l.(type) {
	case *Sequential:
		var n float64
		for _, c := range x.Layers {
			n += floatParams(c)
		}
		return n
	case *Repeat:
		var n float64
		for _, c := range x.Children() {
			n += float64(x.countOf(c)) * floatParams(c)
		}
		return n
	case *Residual:
		return floatParams(x.Layer)
	}
	return float64(l.Params())
}
