package models

import (
	"fmt"
	"math"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/sim/core"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// Model is the Starlark value of a whole network (type "model"): layers,
// an optional output head to the vocabulary, and the loss.
type Model struct {
	M      *core.Model
	layers starlark.Tuple // the layer values as given (with their positions)
	decl   syntax.Position
}

var (
	_ starlark.HasAttrs   = (*Model)(nil)
	_ starlark.Comparable = (*Model)(nil)
)

// NewModel wraps m, declared at decl. layers are the layer values of
// m.Layers (nil to wrap each sim layer at decl).
func NewModel(m *core.Model, layers starlark.Tuple, decl syntax.Position) *Model {
	if layers == nil {
		for _, l := range m.Layers {
			layers = append(layers, NewLayer(l, decl))
		}
	}
	return &Model{M: m, layers: layers, decl: decl}
}

// Sim returns the wrapped sim.Model.
func (x *Model) Sim() *core.Model { return x.M }

// Decl is where the model was built.
func (x *Model) Decl() syntax.Position { return x.decl }

func (x *Model) Type() string         { return "model" }
func (x *Model) Freeze()              {}
func (x *Model) Truth() starlark.Bool { return starlark.True }
func (x *Model) Hash() (uint32, error) {
	return 0, fmt.Errorf("unhashable type: model")
}

func (x *Model) String() string {
	return fmt.Sprintf("model(%q, params=%d)", x.M.Name, x.M.Params())
}

func (x *Model) CompareSameType(op syntax.Token, y starlark.Value, _ int) (bool, error) {
	o := y.(*Model)
	switch op {
	case syntax.EQL:
		return x.M == o.M, nil
	case syntax.NEQ:
		return x.M != o.M, nil
	}
	return false, fmt.Errorf("%s not supported for models", op)
}

var modelAttrNames = []string{"describe", "layers", "loss", "name", "params", "tie_embeddings", "vocab"}

func (x *Model) AttrNames() []string { return modelAttrNames }

func (x *Model) Attr(name string) (starlark.Value, error) {
	m := x.M
	switch name {
	case "name":
		return starlark.String(m.Name), nil
	case "params":
		return starlark.MakeInt64(m.Params()), nil
	case "layers":
		return x.layers, nil
	case "loss":
		return starlark.String(m.Loss), nil
	case "vocab":
		if m.Vocab == 0 {
			return starlark.None, nil
		}
		return starlark.MakeInt64(m.Vocab), nil
	case "tie_embeddings":
		return starlark.Bool(m.TieEmbeddings), nil
	case "describe":
		return starlark.NewBuiltin("describe", func(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			if err := starlark.UnpackArgs(b.Name(), args, kwargs); err != nil {
				return nil, err
			}
			return &ModuleTable{title: m.Name, rows: m.Describe(), total: m.Params()}, nil
		}).BindReceiver(x), nil
	}
	return nil, nil
}

func ModelBuiltins() []host.Builtin {
	return []host.Builtin{{
		Name: "model",
		Sig:  "model(name, *layers, loss=\"cross_entropy\", vocab=None, tie_embeddings=False, logits_fp32=None, input_dim=None, head_bias=False, head_name=None, logit_softcap=None, logits_scaling=None, holds_embedding=False, position_ids=False, pad_labels=False)",
		Doc: "A whole network: layers run in order, then (with vocab=, at most 2^24) an output head to the " +
			"vocabulary, then the loss (\"cross_entropy\", \"flash_cross_entropy\", \"mse\" or \"none\"). " +
			"\"cross_entropy\" is torch's (log_softmax, then nll_loss: the log-probabilities saved); " +
			"\"flash_cross_entropy\" is flash-attn's fused CrossEntropyLoss (the xentropy kernel llm-foundry's MPT " +
			"trains with, loss_fn=\"fused_crossentropy\"): it reads the logits in their dtype, saves them and a " +
			"log-sum-exp per row, and writes no log-probabilities. " +
			"tie_embeddings shares the head's weight with the first embedding (counted once). " +
			"head_bias gives the head a vocab-sized bias (BERT's masked-LM decoder). head_name is the head's module path " +
			"(default \"lm_head\"; BERT's masked-LM decoder \"cls.predictions.decoder\"). " +
			"logits_fp32 upcasts the logits to fp32 before the loss, as Hugging Face causal LMs do; " +
			"by default it is on when vocab is set (off for flash_cross_entropy). input_dim is the feature count of the input " +
			"for a model that does not start with an embedding (inferred from the first layer when it can be). " +
			"logit_softcap=c soft-caps the logits, c * tanh(logits / c) (Gemma 2's final_logit_softcapping: " +
			"tanh keeps one more logits-sized tensor for backward). " +
			"logits_scaling=s divides the logits by s (Granite's logits_scaling: logits / s in GraniteForCausalLM.forward): " +
			"a second logits-sized tensor while the division runs, nothing saved. " +
			"holds_embedding=True keeps the first embedding's output until the layers and the last norm are done, as " +
			"transformers' decoders do (inputs_embeds, a local of the base model's forward; hf_config's and the zoo's decoders set it): " +
			"it is freed there, not after its last use, which moves the caching allocator's blocks where nothing saves it " +
			"(a frozen embedding: LoRA, QLoRA). " +
			"position_ids=True makes the model's position_ids once a forward, before its layers ([1, seq] int64: " +
			"torch.arange(seq) + past_seen_tokens, unsqueezed) and calls every block of each repeat() under it (not a tower's) " +
			"with them as a keyword argument, as transformers' decoders do (hf_config's and the zoo's decoders set it): " +
			"no op reads them, but a checkpointed block holds them into its backward, 8 bytes a token " +
			"(not under precision=\"megatron\", whose GPTModel hands its layers none, nor on a pipeline stage, not modelled); " +
			"it needs a repeat() to hand them to. " +
			"pad_labels=True shifts the labels as transformers' causal-LM loss does from 4.49 (ForCausalLMLoss: " +
			"nn.functional.pad(labels, (0, 1)), then labels[..., 1:].contiguous(); hf_config's and the zoo's decoders set it): " +
			"a padded [batch, seq + 1] int64 copy, which cross-entropy saves at batch 1, and at a larger batch a shifted " +
			"[batch, seq] int64 copy, saved, the padded one freed when the loss returns; it needs vocab= and loss=\"cross_entropy\".\n\n" +
			"Attributes: name, params (exact: tied weights once, buffers never), layers, loss, vocab, " +
			"tie_embeddings, and describe(), a table of modules with their parameter counts: each module of the model's own " +
			"tree once (a language model a VL reader splits around its tower is one row, its parts summed), a tower's " +
			"modules as rows of their own (model.vision_tower, model.multi_modal_projector), a block's modules under the names " +
			"transformers gives them (Gemma 4's router and experts, BERT's intermediate and output.dense, OPT's fc1 and fc2), " +
			"parents before their children; the top-level rows sum to params, and each row holds what transformers' module " +
			"of that name holds.",
		Fn: modelFn,
	}}
}

func modelFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if len(args) == 0 {
		return nil, fmt.Errorf("model needs a name and layers: model(\"name\", layer, ...)")
	}
	name, ok := starlark.AsString(args[0])
	if !ok {
		return nil, fmt.Errorf("model name must be a string (got %s)", args[0].Type())
	}
	var vocab, logitsFP32, inputDim, softcap, logitScale, headName starlark.Value
	var tie, headBias, holds, positionIDs, padLabels bool
	loss := "cross_entropy"
	if err := starlark.UnpackArgs(b.Name(), nil, kwargs, "loss?", &loss, "vocab?", &vocab,
		"tie_embeddings?", &tie, "logits_fp32?", &logitsFP32, "input_dim?", &inputDim, "head_bias?", &headBias, "head_name?", &headName, "logit_softcap?", &softcap, "logits_scaling?", &logitScale,
		"holds_embedding?", &holds, "position_ids?", &positionIDs, "pad_labels?", &padLabels); err != nil {
		return nil, err
	}
	layers, err := layerList(args[1:], "layers")
	if err != nil {
		return nil, err
	}
	m := &core.Model{Name: name, Layers: layers, Loss: loss, TieEmbeddings: tie, HeadBias: headBias, HoldsEmbedding: holds, PositionIDs: positionIDs, PadLabels: padLabels}
	if positionIDs && !m.HasDecoderLayers() {
		return nil, fmt.Errorf("position_ids=True needs a repeat() of layers to hand them to (none among the model's layers or their sequential()s)")
	}
	if m.Vocab, err = OptInt(vocab, "vocab", 0); err != nil {
		return nil, err
	}
	if vocab != nil && vocab != starlark.None && m.Vocab <= 0 {
		return nil, fmt.Errorf("vocab must be positive (got %d)", m.Vocab)
	}
	if m.LogitsFP32, err = optBool(logitsFP32, "logits_fp32", m.Vocab > 0 && loss != core.FlashCE); err != nil {
		return nil, err
	}
	if softcap != nil && softcap != starlark.None {
		if m.LogitSoftcap, err = host.AsFloat(softcap, "logit_softcap"); err != nil {
			return nil, err
		}
		if !(m.LogitSoftcap > 0) {
			return nil, fmt.Errorf("logit_softcap must be positive (got %g; None for no cap)", m.LogitSoftcap)
		}
	}
	if logitScale != nil && logitScale != starlark.None {
		if m.LogitScale, err = host.AsFloat(logitScale, "logits_scaling"); err != nil {
			return nil, err
		}
		if !(m.LogitScale > 0) || math.IsInf(m.LogitScale, 0) {
			return nil, fmt.Errorf("logits_scaling must be a positive number (got %g; None for none)", m.LogitScale)
		}
	}
	if m.InputDim, err = OptInt(inputDim, "input_dim", 0); err != nil {
		return nil, err
	}
	if inputDim != nil && inputDim != starlark.None && m.InputDim <= 0 {
		return nil, fmt.Errorf("input_dim must be positive (got %d)", m.InputDim)
	}
	if tie && m.Vocab == 0 {
		return nil, fmt.Errorf("tie_embeddings needs vocab= (the output head it ties)")
	}
	if headBias && m.Vocab == 0 {
		return nil, fmt.Errorf("head_bias needs vocab= (the output head it biases)")
	}
	if m.HeadName, err = optName(headName); err != nil {
		return nil, fmt.Errorf("head_name: %v", err)
	}
	if m.HeadName != "" && m.Vocab == 0 {
		return nil, fmt.Errorf("head_name needs vocab= (the output head it names)")
	}
	if padLabels && (m.Vocab == 0 || loss != "cross_entropy") {
		return nil, fmt.Errorf("pad_labels needs vocab= and loss=\"cross_entropy\" (the causal-LM loss that shifts the labels; got loss=%q)", loss)
	}
	// Errors here are raised by the model() call, whose position the
	// traceback shows.
	if err := m.Validate(); err != nil {
		return nil, err
	}
	if err := m.CheckShapes(); err != nil {
		return nil, err
	}
	if tie {
		head, emb := m.HeadShape()
		switch {
		case emb == nil:
			return nil, fmt.Errorf("tie_embeddings needs an embedding to tie the output head to")
		case head[0] != emb[0] || head[1] != emb[1]:
			return nil, fmt.Errorf("tie_embeddings needs the output head (vocab %d x width %d) to have the embedding's shape (%d x %d)",
				head[0], head[1], emb[0], emb[1])
		}
	}
	var vals starlark.Tuple
	for _, v := range args[1:] {
		if seq, ok := v.(starlark.Indexable); ok {
			for j := 0; j < seq.Len(); j++ {
				vals = append(vals, seq.Index(j))
			}
			continue
		}
		vals = append(vals, v)
	}
	return NewModel(m, vals, host.CallerPos(thread)), nil
}
