package nn

import (
	"fmt"
	"strings"

	"github.com/memsh/memsh/sim/units"
)

// Field is one input a layer's Validate checks, by what it means. Two
// front ends build the same layers from inputs named differently: the
// layer builtins from their keywords (gated_deltanet(key_heads=...)),
// hf_config from a config.json's keys (linear_num_key_heads) and its own
// keywords (attn=). The check is declared once, here, and its error
// names Fields; each front end names them as its user wrote them
// (FieldError.Named). The Field's own text is a neutral description,
// what an error says when no front end names it.
type Field string

// The Fields the checks of MLA (and its DSAIndexer), GatedDeltaNet,
// Mamba, Mamba2, the vision and audio towers and MoE (with Gemma4MoE)
// name.
const (
	FieldDim          Field = "model width"
	FieldHeads        Field = "attention heads"
	FieldHeadDim      Field = "head dim"
	FieldImpl         Field = "attention kernel"
	FieldKVLora       Field = "kv latent rank"
	FieldQLora        Field = "q latent rank"
	FieldNope         Field = "q/k head dim without rope"
	FieldRopeDim      Field = "rope head dim"
	FieldVDim         Field = "value head dim"
	FieldIndexHeads   Field = "indexer heads"
	FieldIndexHeadDim Field = "indexer head dim"
	FieldIndexTopK    Field = "indexer top-k"
	FieldKeyHeads     Field = "key heads"
	FieldValueHeads   Field = "value heads"
	FieldKeyHeadDim   Field = "key head dim"
	FieldValueHeadDim Field = "value head dim of the delta rule"
	FieldConvKernel   Field = "conv kernel"
	FieldChunk        Field = "chunk"
	FieldKernel       Field = "delta rule kernel"
	FieldInner        Field = "inner size"
	FieldState        Field = "state size"
	FieldDTRank       Field = "dt rank"
	FieldMambaImpl    Field = "mamba implementation"
	FieldGroups       Field = "groups"
	FieldDepth        Field = "depth"
	FieldHidden       Field = "mlp hidden size"
	FieldPatch        Field = "patch size"
	FieldTemporal     Field = "temporal patch size"
	FieldInChans      Field = "input channels"
	FieldMerge        Field = "merge size"
	FieldTextDim      Field = "text width"
	FieldWindow       Field = "window"
	FieldFullBlocks   Field = "full-attention blocks"
	FieldPositions    Field = "position grid"
	FieldDeepstack    Field = "deepstack blocks"
	FieldGlobalLayers Field = "global layers"
	FieldImage        Field = "image size"
	FieldTiles        Field = "tiles"
	FieldOutputDim    Field = "vision output width"
	FieldAspects      Field = "aspect ratios"
	FieldIntermediate Field = "intermediate layers"
	FieldExperts      Field = "routed experts"
	FieldTopK         Field = "experts per token"
	FieldKVHeads      Field = "key/value heads"
	FieldSoftTokens   Field = "soft tokens an image"
	FieldSubsampling  Field = "subsampling channels"
)

// FieldError is a check's failure over named inputs: Msg and Hint are
// text (string) and the Fields they name, in order.
type FieldError struct {
	Path      string
	Msg, Hint []any
}

// Named is the error with each Field named name(f); a Field name does
// not know (nil name, or "") keeps its own text.
func (e *FieldError) Named(name func(Field) string) *units.Error {
	return &units.Error{Path: e.Path, Msg: render(e.Msg, name), Hint: render(e.Hint, name)}
}

// Error names the Fields by their own text.
func (e *FieldError) Error() string { return e.Named(nil).Error() }

// Unwrap is the *units.Error Error writes (its Hint for errors.As).
func (e *FieldError) Unwrap() error { return e.Named(nil) }

func render(parts []any, name func(Field) string) string {
	var b strings.Builder
	for _, p := range parts {
		switch p := p.(type) {
		case Field:
			s := ""
			if name != nil {
				s = name(p)
			}
			if s == "" {
				s = string(p)
			}
			b.WriteString(s)
		case string:
			b.WriteString(p)
		default:
			fmt.Fprint(&b, p)
		}
	}
	return b.String()
}

// fieldErr is a FieldError at path whose message is msg's parts.
func fieldErr(path string, msg ...any) *FieldError { return &FieldError{Path: path, Msg: msg} }

// withHint sets the hint's parts.
func (e *FieldError) withHint(hint ...any) *FieldError {
	e.Hint = hint
	return e
}

// sized is one size a check requires to be positive.
type sized struct {
	f Field
	n int64
}

// checkPositive is core.Positive over Fields: the first size that is not
// positive.
func checkPositive(path string, sizes ...sized) error {
	for _, s := range sizes {
		if s.n <= 0 {
			return fieldErr(path, s.f, fmt.Sprintf(" must be positive (got %d)", s.n))
		}
	}
	return nil
}

// bounded is one size and the most of it memsh simulates.
type bounded struct {
	f       Field
	n, most int64
}

// hintBounds says why a size has a bound: the towers multiply their sizes
// into tensor shapes and bytes, which must stay far below int64's range.
const hintBounds = "memsh bounds each size so that the shapes and bytes made of them stay countable; released models are far below it: check the value"

// checkBounds is the first size larger than memsh simulates.
func checkBounds(path string, sizes ...bounded) error {
	for _, s := range sizes {
		if s.n > s.most {
			return fieldErr(path, s.f, fmt.Sprintf(" (%d) is more than memsh simulates (at most %d)", s.n, s.most)).withHint(hintBounds)
		}
	}
	return nil
}
