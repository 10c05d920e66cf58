package host

import (
	"fmt"

	"github.com/memsh/memsh/sim/units"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// DType is the Starlark value of a tensor element type (fp32, bf16, ...).
// Its type name is "dtype"; it has .name and .bits.
type DType struct{ D units.DType }

var (
	_ starlark.HasAttrs   = DType{}
	_ starlark.Comparable = DType{}
	_ starlark.Unpacker   = (*DType)(nil)
)

// NewDType wraps d.
func NewDType(d units.DType) DType { return DType{d} }

// SimDType is the wrapped sim.DType.
func (x DType) SimDType() units.DType { return x.D }

func (x DType) String() string        { return x.D.Name() }
func (x DType) Type() string          { return "dtype" }
func (x DType) Freeze()               {}
func (x DType) Truth() starlark.Bool  { return starlark.True }
func (x DType) Hash() (uint32, error) { return uint32(x.D) * 2654435761, nil }

var dtypeAttrNames = []string{"bits", "name"}

func (x DType) AttrNames() []string { return dtypeAttrNames }

func (x DType) Attr(name string) (starlark.Value, error) {
	switch name {
	case "name":
		return starlark.String(x.D.Name()), nil
	case "bits":
		return starlark.MakeInt(x.D.Bits()), nil
	}
	return nil, nil
}

func (x DType) CompareSameType(op syntax.Token, y starlark.Value, _ int) (bool, error) {
	yd := y.(DType)
	switch op {
	case syntax.EQL:
		return x.D == yd.D, nil
	case syntax.NEQ:
		return x.D != yd.D, nil
	}
	return false, fmt.Errorf("%s %s %s not supported", x.Type(), op, y.Type())
}

// Unpack accepts a dtype value or a dtype name ("bf16", "bfloat16"), so
// builtins can declare a DType parameter for UnpackArgs.
func (x *DType) Unpack(v starlark.Value) error {
	switch v := v.(type) {
	case DType:
		*x = v
		return nil
	case starlark.String:
		d, err := units.ParseDType(string(v))
		if err != nil {
			return err
		}
		*x = DType{d}
		return nil
	}
	return fmt.Errorf("got %s, want dtype or string", v.Type())
}

// dtypeBuiltins: fp32 tf32 bf16 fp16 fp8 int8 nf4.
func DtypeBuiltins() []Builtin {
	docs := map[units.DType]string{
		units.FP32: "fp32 is 32-bit IEEE float, PyTorch's default dtype for weights and optimizer states.",
		units.TF32: "tf32 is fp32 storage (32 bits) with TensorFloat-32 matmuls; memory as fp32.",
		units.BF16: "bf16 is bfloat16: 16 bits, fp32's exponent range; the usual mixed-precision compute dtype.",
		units.FP16: "fp16 is IEEE half precision: 16 bits; needs loss scaling in mixed precision.",
		units.FP8:  "fp8 is an 8-bit float (e4m3/e5m2), as Transformer Engine uses on H100 and later.",
		units.INT8: "int8 is an 8-bit integer, as in 8-bit optimizers and LLM.int8() weights.",
		units.NF4:  "nf4 is 4-bit NormalFloat, QLoRA's storage for frozen base weights (block constants are counted by the quantization rules).",
	}
	var out []Builtin
	for _, d := range units.UserDTypes() {
		out = append(out, Builtin{Name: d.Name(), Sig: d.Name(), Doc: docs[d], Value: DType{d}})
	}
	return out
}
