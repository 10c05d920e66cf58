# megatron_ce_steps.py: the steps of Megatron-Core's vocabulary-parallel
# cross-entropy at tensor-parallel size 1 (the all-reduces of the max and
# the sums are identities there), written from megatron/core/
# tensor_parallel/cross_entropy.py VocabParallelCrossEntropy and
# megatron/core/fusions/fused_cross_entropy.py (core_r0.11.0 to
# core_r0.13.0): the fp32 copy and its max, the max subtracted in place,
# exp in place with the sums, the division in place; the backward's
# indexed subtraction and the product with the incoming gradient on the
# saved softmax. cuda_fused_ce.py and fused_ce_inductor.py import them.
import torch


def logits_max(x):
    x = x.float()
    return x, torch.max(x, dim=-1)[0]


def predicted(x, target, m):
    x -= m.unsqueeze(-1)
    v = x.size(-1)
    mask = (target < 0) | (target >= v)
    t = target.clone()
    t[mask] = 0
    x2 = x.view(-1, v)
    t1 = t.view(-1)
    rows = torch.arange(0, x2.size(0), device=x2.device)
    pred = x2[rows, t1].clone().contiguous().view_as(target)
    pred[mask] = 0.0
    torch.exp(x, out=x)
    return mask, t1, torch.cat((pred, x.sum(dim=-1))), x


def ce_loss(e, pred_sum):
    n = pred_sum.size(0) // 2
    pred, s = torch.split(pred_sum, n)
    loss = torch.log(s) - pred
    e.div_(s.unsqueeze(-1))
    return e, loss


def gradients(softmax, grad_out, mask, t1, cast):
    v = softmax.size(-1)
    g2 = softmax.view(-1, v)
    rows = torch.arange(0, g2.size(0), device=g2.device)
    g2[rows, t1] -= 1.0 - mask.view(-1).float()
    softmax.mul_(grad_out.unsqueeze(-1))
    return softmax.to(torch.bfloat16) if cast else softmax
