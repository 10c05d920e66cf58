package nn

import (
	"fmt"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// GemmaNorm is the RMSNorm of Gemma, Gemma 2 and Gemma 3 (GemmaRMSNorm,
// Gemma2RMSNorm, Gemma3RMSNorm in transformers' models/gemma*/
// modeling_gemma*.py, 5.25.0) and of Qwen3-Next and Qwen3.5
// (Qwen3NextRMSNorm, Qwen3_5RMSNorm: the same forward), which differs from Llama's in what
// autograd keeps: it runs in fp32 and scales by 1 + weight before the
// cast back,
//
//	y = x.float() * rsqrt(x.float().pow(2).mean(-1) + eps)
//	return (y * (1.0 + weight.float())).type_as(x)
//
// so the scale's product keeps the fp32 rows y and the fp32 vector
// 1 + weight (fp32RMSNorm with the offset), where Llama's keeps its
// 16-bit copy of the rows. Measured on the CPU: TestGemmaNormSavesAsTransformers.
type GemmaNorm struct {
	Name string
	Dim  int64
}

func (n *GemmaNorm) Kind() string               { return "gemma_norm" }
func (n *GemmaNorm) Label() string              { return n.Name }
func (n *GemmaNorm) DefaultName() string        { return "norm" }
func (n *GemmaNorm) Children() []core.Layer     { return nil }
func (n *GemmaNorm) InDim() int64               { return n.Dim }
func (n *GemmaNorm) OutDim() int64              { return n.Dim }
func (n *GemmaNorm) Params() int64              { return n.Dim }
func (n *GemmaNorm) Summary() string            { return fmt.Sprintf("%d", n.Dim) }
func (n *GemmaNorm) Validate(path string) error { return core.Positive(path, "dim", n.Dim) }

func (n *GemmaNorm) Lower(b *core.Builder, x core.Value) core.Value {
	if b.Last(x) != n.Dim {
		panic(core.ShapeMismatch(b, "gemma_norm", n.Dim, b.Last(x)))
	}
	return gemmaNorm(b, b.ModuleName(n), x, n.Dim)
}

// gemmaNorm lowers GemmaRMSNorm over the last dim features of x, or the
// fused kernel that replaces it (core.Builder.RMSNormFused): Liger's
// patches put LigerRMSNormForGemma and LigerRMSNormForGemma3 in its place
// (Liger's RMSNorm kernel with offset 1.0 and Gemma's casting mode,
// which saves what it saves for Llama), Megatron Transformer Engine's.
func gemmaNorm(b *core.Builder, name string, x core.Value, dim int64) core.Value {
	if b.RMSNormFused() {
		return b.RmsNorm(name, x, dim)
	}
	return fp32RMSNorm(b, name, x, dim, normWeightOnePlus, "Gemma's RMSNorm")
}

// gemmaNormSlice is gemmaNorm over the first dim features of each last
// row of x ([..., 2 x dim]: the query half of Qwen3-Next's gated q_proj,
// a strided view): x.float() copies the slice to fp32, then the norm runs
// on the copy, cast back to x's dtype. The fused kernels take the slice
// as RmsNormSlice does.
func gemmaNormSlice(b *core.Builder, name string, x core.Value, dim int64) core.Value {
	if b.RMSNormFused() {
		return b.RmsNormSlice(name, x, dim)
	}
	defer b.Scope(name)()
	w := b.Param("weight", []int64{dim}, core.RoleNorm)
	c := b.AddOp("cast", "to_fp32", []core.Value{x})
	x32 := b.Out(c, "slice.fp32", core.WithLast(b.Shape(x), dim), units.FP32, "fp32 copy of the normalised slice")
	return fp32RMSNormOf(b, w, x32, dim, normWeightOnePlus, "Gemma's RMSNorm", b.Dtype(x))
}
