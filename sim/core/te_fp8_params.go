package core

import (
	"github.com/memsh/memsh/sim/units"
)

// Transformer Engine's fp8 primary weights as Megatron's --fp8-param-gather
// runs them (train(fp8_param_gather=True)). Facts, Megatron-LM
// core_v0.13.0 and NVIDIA/TransformerEngine v2.4:
//
//   - megatron/core/fp8_utils.py get_fp8_context(is_init=True): with
//     config.fp8_param the model is built under TE's fp8_model_init
//     (quantized_model_init in later TE releases) with
//     preserve_high_precision_init_val=True: every TE linear's weight is a
//     Float8Tensor (1 byte an element), its high-precision initial value
//     kept in CPU memory until the optimizer takes it (fp8.py's docstring).
//   - megatron/core/distributed/param_and_grad_buffer.py: fp8 parameters
//     get a torch.uint8 param buffer of their own (the biases and norms
//     stay in the bf16 one); with the distributed optimizer the buffer is
//     full-size and each rank all-gathers into it, so the all-gather moves
//     one byte a weight element (arguments.py: --fp8-param-gather "Keep
//     the compute param in fp8 ... and perform the param all-gather in
//     fp8"; it asserts use_distributed_optimizer or FSDP2).
//   - megatron/core/optimizer/distrib_optimizer.py: the fp32 main params
//     are this rank's shard (from get_high_precision_init_val(), then
//     clear_high_precision_init_val()); after the step fp8_utils'
//     quantize_param_shard casts them into the fp8 buffer
//     (transformer_engine/pytorch/tensor/utils.py
//     cast_master_weights_to_fp8, amaxes all-reduced over the group). No
//     bf16 copy of the weights exists.
//   - module/base.py get_weight_workspace: "FP8 primary weights" are used
//     as they are (update_usage on the parameter), so the module keeps no
//     _fp8_workspaces copy. On Hopper the dgrad GEMM's columnwise usage is
//     the Float8Tensor's transpose cache (float8_tensor_base.py
//     _create_transpose); cast_master_weights_to_fp8 only marks it invalid
//     (float8_tensor.py _reset_caches) and the next forward rewrites it in
//     place (tex.fp8_transpose(out=self._transpose)): it lives as long as
//     the model, as the workspace's transpose does.
//
// MXFP8 primary weights (float8="te-mxfp8", Megatron-Bridge's
// bf16_with_mxfp8_mixed: fp8_param_gather with
// reuse_grad_buf_for_mxfp8_param_ag, core_v0.15.0) are gathered in bf16,
// not fp8: an MXFP8Tensor cannot be viewed flat (distrib_optimizer.py), so
// param_and_grad_buffer.py makes the param buffer a bf16 view of the
// gradient buffer (shared_buffer: no memory of its own), leaves every
// parameter of that buffer in its own storage and, after the all-gather,
// copies each slice into the parameter (param.data.copy_, which quantizes
// the MXFP8 ones); optimizer_config.py warns that mxfp8 without these
// "will use significant amount additional GPU memory". The parameter is
// the MXFP8 tensor TE's quantizer made at init, with both usages
// (rowwise and columnwise data and scales), replacing the workspace.
// Float8BlockScaling parameters, likewise not flat, are refused as not
// modelled.

// validateFP8ParamGather checks fp8_param_gather=True against the plan.
func (p *Plan) validateFP8ParamGather() error {
	f := p.Float8
	fail := func(msg, hint string) error { return &units.Error{Path: "train", Msg: msg, Hint: hint} }
	switch {
	case !f.TE():
		hint := `float8="te-delayed" or "te-tensorwise"`
		if f.On() {
			hint = "torchao's float8 under FSDP2 gathers in fp8 with fsdp_float8_all_gather=True; or " + hint
		}
		return fail("fp8_param_gather=True is Transformer Engine's fp8 primary weights (Megatron's --fp8-param-gather); it needs a Transformer Engine recipe", hint)
	case f.Scaling == "te-blockwise":
		return fail("fp8_param_gather=True with te-blockwise is not modelled (blockwise-scaled parameters are not sharded flat)",
			`float8="te-delayed", "te-tensorwise" or "te-mxfp8" with fp8_param_gather=True, or drop fp8_param_gather=`)
	case !p.Parallel.DistributedOptimizer:
		return fail("fp8_param_gather=True needs Megatron's distributed optimizer (arguments.py: \"--fp8-param-gather only supported with distributed optimizer\")",
			"parallel(..., distributed_optimizer=True), or drop fp8_param_gather=")
	}
	return nil
}

// teWeightFP8 registers what a TE linear holds of its weight in fp8 beyond
// the parameter: the workspace copy (not with fp8 primary weights: the
// parameter is the fp8 copy and the distributed optimizer's buffer holds
// and gathers it in fp8), and on Hopper its transpose for the dgrad GEMM.
// MXFP8 primary weights are the MXFP8 copies themselves: the parameter has
// no bf16 storage and is gathered in bf16 through the gradient buffer.
func (b *Builder) teWeightFP8(w int32, in, out int64, dgrad bool) {
	switch {
	case b.f8.mxfp8():
		b.mxfp8Weight(in, out, dgrad || b.f8.ParamGather) // te_mxfp8.go; a primary weight keeps both usages from init
		b.P.Params[w].MXFP8Storage = b.f8.ParamGather
		return
	case b.f8.ParamGather:
		b.P.Params[w].GatherFP8 = true
	default:
		b.Buffer("weight_fp8", []int64{out, in}, units.FP8, "Transformer Engine's fp8 weight workspace (module._fp8_workspaces, kept across micro-batches and steps)")
		b.blockwiseWeightScales("weight_fp8_scale_inv", in, out, false) // te_blockwise.go
	}
	if b.f8.transposes && dgrad { // linear.py: columnwise_usage = is_grad_enabled and inp.requires_grad
		why := "transposed fp8 weight for the dgrad GEMM (columnwise usage, kept with the workspace)"
		if b.f8.ParamGather {
			why = "the fp8 weight's transpose cache for the dgrad GEMM (Float8Tensor._transpose: invalidated by each optimizer step, rewritten in place by the next forward)"
		}
		b.Buffer("weight_fp8_t", []int64{in, out}, units.FP8, why)
		b.blockwiseWeightScales("weight_fp8_t_scale_inv", in, out, true)
	}
}
