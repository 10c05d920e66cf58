package nn

import (
	"fmt"
	"math"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// Attention's shape: its key/value heads and head width, its exact
// parameter count, its one-line summary, and the checks of its sizes.

func (a *Attention) Kv() int64 {
	if a.KVHeads > 0 {
		return a.KVHeads
	}
	return a.Heads
}

func (a *Attention) Hd() int64 {
	if a.HeadDim > 0 {
		return a.HeadDim
	}
	if a.Heads == 0 {
		return 0
	}
	return a.Dim / a.Heads
}

func (a *Attention) Kind() string           { return "attention" }
func (a *Attention) Label() string          { return a.Name }
func (a *Attention) DefaultName() string    { return "attn" }
func (a *Attention) Children() []core.Layer { return nil }
func (a *Attention) Params() int64 {
	d, h, kv, vd := a.Hd(), a.Heads, a.Kv(), a.Vd()
	n := a.InDim()*h*d + a.InDim()*kv*(d+vd) + h*vd*a.Dim + a.AdapterParams()
	if a.QKVBias {
		n += h*d + kv*(d+vd)
	}
	if a.OutBias {
		n += a.Dim
	}
	switch {
	case a.QKNorm && a.QKNormCohere:
		n += (h + kv) * d // a weight for each head
	case a.QKNorm && a.QKNormLayer:
		n += 4 * d // q's and k's LayerNorm, a weight and a bias of head_dim each
	case a.QKNorm || a.QKNormAfterRope:
		n += 2 * d // q_norm and k_norm weights, head_dim each
	}
	if a.QKNormWide {
		n += (h + kv) * d
	}
	if a.Sinks {
		n += h
	}
	if a.M3Indexer != nil {
		n += a.M3Indexer.params(a.InDim())
	}
	if a.OutputGate { // q_proj's second half
		n += a.Dim * h * d
		if a.QKVBias {
			n += h * d
		}
	}
	if a.SubNorm {
		n += h * vd // attn_sub_norm's weight
	}
	if a.GateProj {
		n += a.Dim * h * d
		if a.GateBias {
			n += h * d
		}
	}
	if a.GateSoftplus || a.GateSigmoid {
		n += a.Dim * a.gateWidth(h, d)
	}
	if a.Differential { // lambda_q1, lambda_k1, lambda_q2, lambda_k2
		n += 4 * d
	}
	return n
}
func (a *Attention) Summary() string {
	s := fmt.Sprintf("dim %d, %d heads", a.Dim, a.Heads)
	if a.Kv() != a.Heads {
		s += fmt.Sprintf(", %d kv heads", a.Kv())
	}
	if a.HeadDim > 0 && a.HeadDim*a.Heads != a.Dim {
		s += fmt.Sprintf(", head_dim %d", a.HeadDim)
	}
	if a.VHeadDim > 0 && a.VHeadDim != a.Hd() {
		s += fmt.Sprintf(", v_head_dim %d", a.VHeadDim)
	}
	if a.QKNorm {
		s += ", qk-norm"
	}
	if a.Window > 0 {
		s += fmt.Sprintf(", window %d", a.Window)
	}
	if a.Sinks {
		s += ", sinks"
	}
	if a.OutputGate || a.GateProj || a.GateSoftplus || a.GateSigmoid {
		s += ", output gate"
	}
	if a.QKL2Norm {
		s += ", l2 qk-norm"
	}
	if a.TempTuning {
		s += ", temperature tuning"
	}
	if a.Chunk > 0 {
		s += fmt.Sprintf(", chunks of %d", a.Chunk)
	}
	return s + ", " + a.Impl
}

func (a *Attention) Validate(path string) error {
	if err := core.Positive(path, "dim", a.Dim); err != nil {
		return err
	}
	if err := core.Positive(path, "heads", a.Heads); err != nil {
		return err
	}
	if a.HeadDim < 0 { // 0 is unset: dim/heads
		return units.Errorf(path, "head_dim must be positive (got %d)", a.HeadDim)
	}
	if a.HeadDim == 0 && a.Dim%a.Heads != 0 {
		return &units.Error{Path: path, Msg: fmt.Sprintf("heads must divide dim (dim=%d, heads=%d)", a.Dim, a.Heads), Hint: "pass head_dim= when it is not dim/heads"}
	}
	if a.KVHeads < 0 || a.Heads%a.Kv() != 0 {
		return units.Errorf(path, "kv_heads must divide heads (heads=%d, kv_heads=%d)", a.Heads, a.KVHeads)
	}
	if (a.QKNorm && !a.QKNormLayer || a.QKNormAfterRope) && a.FusedQKV {
		return units.Errorf(path, "qk-norm needs separate q, k and v projections (fused_qkv=False)")
	}
	if a.OutputGate && a.FusedQKV {
		return &units.Error{Path: path, Msg: "output_gate is modelled with separate q, k and v projections (Qwen3-Next's and MiniCPM5's gated attention)",
			Hint: "set fused_qkv=False, or leave output_gate out"}
	}
	if err := a.checkGateProj(path); err != nil {
		return err
	}
	if err := a.checkDifferential(path); err != nil {
		return err
	}
	if err := a.checkValueHead(path); err != nil {
		return err
	}
	if a.SinkScale && !a.Sinks {
		return units.Errorf(path, "sink scaling (GraniteSWA's) scales by the sinks: it needs sinks")
	}
	if a.QKVShards < 0 || a.QKVShards > 0 && (!a.FusedQKV || a.Dim%a.QKVShards != 0) {
		return units.Errorf(path, "qkv shards (%d) need a fused qkv projection whose width they divide (dim=%d)", a.QKVShards, a.Dim)
	}
	if err := a.checkAdapters(path); err != nil {
		return err
	}
	if a.M3Indexer != nil {
		if err := a.M3Indexer.validate(path, a); err != nil {
			return err
		}
	}
	if a.RopeCache < 0 {
		return units.Errorf(path, "rope_cache must be positions, or 0 for none (got %d)", a.RopeCache)
	}
	switch a.Impl {
	case "flash", "sdpa", "flex", "eager":
	default:
		return units.Errorf(path, "unknown attention impl %q (known: flash, sdpa, flex, eager)", a.Impl)
	}
	if a.Dropout < 0 || a.Dropout >= 1 {
		return units.Errorf(path, "dropout must be in [0, 1) (got %g)", a.Dropout)
	}
	if a.Window < 0 {
		return units.Errorf(path, "window must be positive, or 0 for none (got %d)", a.Window)
	}
	if !(a.Softcap >= 0) || math.IsInf(a.Softcap, 0) {
		return units.Errorf(path, "softcap must be a positive number, or 0 for none (got %g)", a.Softcap)
	}
	return nil
}
