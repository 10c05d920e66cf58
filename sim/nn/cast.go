package nn

import "github.com/memsh/memsh/sim/core"

// ToParams is x.to(the parameters' dtype): transformers' Mamba heads
// (MambaForCausalLM, Mamba2ForCausalLM: lm_head(hidden_states.to(
// self.lm_head.weight.dtype))) cast norm_f's output, fp32 when the residual
// stream is (residual_in_fp32), back before lm_head, which saves the copy.
// A no-op when x already has that dtype.
type ToParams struct{}

func (t *ToParams) Kind() string           { return "to_params_dtype" }
func (t *ToParams) Label() string          { return "" }
func (t *ToParams) DefaultName() string    { return "" }
func (t *ToParams) Children() []core.Layer { return nil }
func (t *ToParams) Params() int64          { return 0 }
func (t *ToParams) Summary() string        { return "x.to(the parameters' dtype)" }
func (t *ToParams) Validate(string) error  { return nil }
func (t *ToParams) Lower(b *core.Builder, x core.Value) core.Value {
	return b.Cast(x, b.Prec.Params, "the hidden states in the parameters' dtype for lm_head")
}
