# mamba2_kernel_saved.py: hf_block_saved.py for the Mamba-2 hybrids
# (granitemoehybrid, falcon_h1, bamba, zamba2) with the mamba_ssm kernel's autograd node
# standing in for the kernel the CPU lacks. transformers 5.25.0 trains
# their Mamba-2 layers through mamba2_split_conv1d_scan_combined, which on
# a GPU with mamba_ssm is MambaSplitConv1dScanCombinedFn and on the CPU
# returns None, so that the layer runs the PyTorch chunked scan instead:
# a different set of saved tensors. Here the call returns the output of a
# node that keeps what MambaSplitConv1dScanCombinedFn.forward keeps
# (mamba_ssm/ops/triton/ssd_combined.py: ctx.save_for_backward(zxbcdt,
# conv1d_weight, conv1d_bias, out_x, A, D, dt_bias, initial_states,
# seq_idx, rmsnorm_weight, rstd, outproj_weight, outproj_bias); out_x is
# [batch, seq, heads x head_dim] in zxbcdt's dtype, rstd [batch x seq,
# ngroups] fp32 or None without the norm), its output in out_proj's shape
# (a stand-in value: only what is kept is measured). Everything around
# the kernel (in_proj, the multipliers, the attention, the MLPs, the
# experts) runs as transformers runs it. The kernel's own saves are thus
# an input here, read from mamba_ssm's source, not measured.
#
#   python mamba2_kernel_saved.py CONFIG.json LAYERS BATCH SEQ DTYPE ATTN [hf_block_saved.py's options]
import runpy
import sys

import torch
import torch.nn.functional as F
import transformers.models.bamba.modeling_bamba as bamba
import transformers.models.falcon_h1.modeling_falcon_h1 as falcon_h1
import transformers.models.granitemoehybrid.modeling_granitemoehybrid as granitemoehybrid
import transformers.models.zamba2.modeling_zamba2 as zamba2


class KernelSaves(torch.autograd.Function):
    @staticmethod
    def forward(ctx, zxbcdt, conv1d_weight, conv1d_bias, dt_bias, A, D, rmsnorm_weight, outproj_weight, outproj_bias, headdim, ngroups):
        batch, seq, _ = zxbcdt.shape
        dim = D.shape[0] * headdim
        out_x = zxbcdt.new_empty(batch, seq, dim)
        rstd = None if rmsnorm_weight is None else torch.empty(batch * seq, ngroups, dtype=torch.float32)
        ctx.save_for_backward(zxbcdt, conv1d_weight, conv1d_bias, out_x, A, D, dt_bias, rmsnorm_weight, rstd, outproj_weight, outproj_bias)
        return F.linear(zxbcdt[..., :dim], outproj_weight, outproj_bias)

    @staticmethod
    def backward(ctx, dout):
        zxbcdt = ctx.saved_tensors[0]
        return (torch.zeros_like(zxbcdt),) + (None,) * 10


def kernel(zxbcdt, conv1d_weight, conv1d_bias, dt_bias, A, D=None, rmsnorm_weight=None, outproj_weight=None, outproj_bias=None,
           headdim=None, ngroups=1, **kwargs):
    return KernelSaves.apply(zxbcdt, conv1d_weight, conv1d_bias, dt_bias, A, D, rmsnorm_weight, outproj_weight, outproj_bias, headdim, ngroups)


bamba.mamba2_split_conv1d_scan_combined = kernel
falcon_h1.mamba2_split_conv1d_scan_combined = kernel
granitemoehybrid.mamba2_split_conv1d_scan_combined = kernel
zamba2.mamba2_split_conv1d_scan_combined = kernel
sys.argv = [sys.argv[0].replace("mamba2_kernel_saved", "hf_block_saved")] + sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
