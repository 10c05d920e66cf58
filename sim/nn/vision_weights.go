package nn

import (
	"fmt"
	"strings"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// What the vision towers share about their weights and their lowering's
// start: a tower without images registers its weights and runs nothing;
// one with images runs on a data-parallel replica whole; a pre-norm
// encoder layer;
// a CLIP-style encoder layer's tensors (Llama 4's, Kimi K2.5's MoonViT,
// Llama 3.2 Vision's); counting a tower's tensors; the attention kernels
// the towers that attend chunk by chunk model.

// tensorFn receives one parameter: its name under the model, its shape
// and its role.
type tensorFn func(name string, shape []int64, role core.Role)

// idleWithoutImages starts a tower's Lower: the text embeddings x must be
// textDim wide (kind names the layer in the error), and without images
// the tower registers its weights (register) and runs nothing: true.
func idleWithoutImages(b *core.Builder, kind string, textDim int64, x core.Value, register func(*core.Builder)) bool {
	if b.Last(x) != textDim {
		panic(core.ShapeMismatch(b, kind, textDim, b.Last(x)))
	}
	if b.Images.Count > 0 {
		return false
	}
	register(b)
	return true
}

// dataParallelImages refuses images under tensor or context parallelism:
// the tower's sharding is not modelled (without images its weights are
// registered whole on every rank, as a tensor-parallel plan that leaves
// the tower out keeps them). tower names it ("Kimi K2.5's"), alt is what
// to use instead.
func dataParallelImages(b *core.Builder, tower, alt string) {
	if b.Par.Tpn() > 1 || b.Par.Cpn() > 1 {
		panic(core.LowerError{Err: &units.Error{Path: b.Name("vision_tower"),
			Msg:  tower + " vision tower is modelled with images under data parallelism only (tp and cp are 1)",
			Hint: "use " + alt + "; or train on text alone (no images=)"}})
	}
}

// preNormLayer is a pre-norm encoder layer: x + attn(attnNorm(x)), then
// x + mlp(mlpNorm(x)).
func preNormLayer(attnNorm *Norm, attn core.Layer, mlpNorm *Norm, mlp core.Layer) *core.Sequential {
	return &core.Sequential{Layers: []core.Layer{
		&core.Residual{Layer: &core.Sequential{Layers: []core.Layer{attnNorm, attn}}},
		&core.Residual{Layer: &core.Sequential{Layers: []core.Layer{mlpNorm, mlp}}},
	}}
}

// registerTensors registers the n tensors each lists, and LoRA's idle
// adapters on the linears among them (idleLinearAdapter).
func registerTensors(b *core.Builder, n int64, each func(tensorFn)) {
	b.ReserveParams(n)
	each(func(name string, shape []int64, role core.Role) { idleParam(b, name, shape, role) })
}

// idleParam registers a tower's parameter without images (b.Param) and
// LoRA's idle adapter on it where it is a linear's weight
// (idleLinearAdapter).
func idleParam(b *core.Builder, name string, shape []int64, role core.Role) int32 {
	pi := b.Param(name, shape, role)
	idleLinearAdapter(b, name, shape, role)
	return pi
}

// idleLinearAdapter registers, for a tower's tensor registered without
// images, the LoRA adapter PEFT gives its module when it is an nn.Linear
// LoRA targets (all-linear reaches every nn.Linear of the model but the
// output layer, the towers' and projectors' too: tools/oracle/peft_all_linear.py):
// a 2-D weight of a linear's role, named module.weight. No image runs
// the tower, so the adapter gets no gradient (core.Builder.IdleAdapter).
func idleLinearAdapter(b *core.Builder, name string, shape []int64, role core.Role) {
	module, ok := strings.CutSuffix(name, ".weight")
	if !ok || len(shape) != 2 {
		return
	}
	switch role {
	case core.RoleConv, core.RoleEmbed, core.RoleNorm, core.RoleLMHead:
		return
	}
	done := b.Scope(module)
	b.IdleAdapter(role, shape[1], shape[0])
	done()
}

// tensorModules are the modules a tower names itself (core.ModuleLister):
// one row for each first component of the names of the tensors each
// lists ("vision_tower", "multi_modal_projector"), in the order met, with
// its tensors' elements; a tensor of no module of its own (LLaVA-NeXT's
// image_newline) is a row of kind "parameter".
func tensorModules(kind string, each func(tensorFn)) []core.ModuleRow {
	var rows []core.ModuleRow
	var tensors []int
	at := map[string]int{}
	each(func(name string, shape []int64, _ core.Role) {
		module, _, nested := strings.Cut(name, ".")
		i, ok := at[module]
		if !ok {
			i, at[module] = len(rows), len(rows)
			k := kind
			if !nested {
				k = "parameter"
			}
			rows, tensors = append(rows, core.ModuleRow{Path: module, Kind: k}), append(tensors, 0)
		}
		rows[i].Params += core.Numel(shape)
		tensors[i]++
	})
	for i := range rows {
		rows[i].Summary = fmt.Sprintf("%d tensors", tensors[i])
	}
	return rows
}

// countTensors is the elements of the tensors each lists whose names
// start with prefix ("" for all).
func countTensors(each func(tensorFn), prefix string) int64 {
	var n int64
	each(func(name string, shape []int64, _ core.Role) {
		if strings.HasPrefix(name, prefix) {
			n += core.Numel(shape)
		}
	})
	return n
}

// encoderLayerNames are the module names of a CLIP-style encoder layer
// (a LayerNorm with bias, q, k, v and output projections; a LayerNorm,
// fc1 and fc2 with biases) as a family's module tree spells them.
type encoderLayerNames struct {
	norm1, q, k, v, o, norm2, fc1, fc2 string
}

// The families' encoder layers: Llama4VisionEncoderLayer and
// MllamaVisionEncoderLayer (modeling_llama4.py, modeling_mllama.py),
// Kimi_K25VisionEncoderLayer (modeling_kimi_k25.py).
var (
	llamaEncoderLayer = encoderLayerNames{"input_layernorm", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
		"post_attention_layernorm", "mlp.fc1", "mlp.fc2"}
	kimiEncoderLayer = encoderLayerNames{"norm1", "attn.q_proj", "attn.k_proj", "attn.v_proj", "attn.proj", "norm2", "mlp.fc1", "mlp.fc2"}
)

// encoderLayerTensors lists one encoder layer's tensors under prefix, d
// wide with an MLP of inter, in the order the module registers them; the
// attention's projections have biases when attnBias (Llama 4's and Kimi
// K2.5's; Mllama's have none).
func encoderLayerTensors(fn tensorFn, prefix string, n encoderLayerNames, d, inter int64, attnBias bool) {
	norm := func(name string) {
		fn(prefix+name+".weight", []int64{d}, core.RoleNorm)
		fn(prefix+name+".bias", []int64{d}, core.RoleNorm)
	}
	linear := func(name string, out, in int64, role core.Role, bias bool) {
		fn(prefix+name+".weight", []int64{out, in}, role)
		if bias {
			fn(prefix+name+".bias", []int64{out}, role)
		}
	}
	norm(n.norm1)
	linear(n.q, d, d, core.RoleQ, attnBias)
	linear(n.k, d, d, core.RoleK, attnBias)
	linear(n.v, d, d, core.RoleV, attnBias)
	linear(n.o, d, d, core.RoleO, attnBias)
	norm(n.norm2)
	linear(n.fc1, inter, d, core.RoleUp, true)
	linear(n.fc2, d, inter, core.RoleDown, true)
}

// checkChunkedImpl is the kernels of a tower whose attention runs chunk
// by chunk (each image, or each window: per): flash-attn's varlen kernel
// or SDPA; transformers' eager path is not modelled.
func checkChunkedImpl(path, impl, per string) error {
	switch impl {
	case "flash", "sdpa":
		return nil
	case "eager":
		return fieldErr(path, "the vision tower's eager attention is not modelled").
			withHint("transformers runs it once per ", per, " with its own score matrix; use ", FieldImpl, `="sdpa" or "flash"`)
	}
	return fieldErr(path, "unknown ", FieldImpl, fmt.Sprintf(" %q (known: flash, sdpa)", impl))
}
