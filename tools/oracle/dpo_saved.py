"""What autograd saves for the whole-logits DPO log-probabilities of
torchtune's rlhf.get_batch_log_probs and LLaMA-Factory's get_batch_logps
(sim/core/dpo_logits.go), on the CPU (torch 2.15): each op's grad_fn and the
tensors it saves (their shape, dtype, and whether one is a tensor another op
saves too). Its figures are in sim/dpo_trainers_test.go (TestDPOTrainersSaved).

/work/venv-t/bin/python tools/oracle/dpo_saved.py
"""
import json

import torch


def saved(t):
    out = {}
    for name in dir(t.grad_fn):
        if not name.startswith("_saved_"):
            continue
        v = getattr(t.grad_fn, name)
        if isinstance(v, torch.Tensor):
            out[name[len("_saved_"):]] = {"shape": list(v.shape), "dtype": str(v.dtype).removeprefix("torch."), "ptr": v.data_ptr()}
    return out


def run(trainer):
    rows, seq, vocab = 2, 5, 7
    x = torch.randn(rows, seq, vocab, dtype=torch.bfloat16, requires_grad=True)  # the logits
    labels = torch.zeros(rows, seq, dtype=torch.long)
    logits = x.float()
    lab = labels[:, 1:].clone()
    mask = lab != -100
    shifted = logits[:, :-1, :]
    steps = {}
    if trainer == "torchtune":
        shifted = shifted / 1.0  # logits_to_logprobs' temperature
        steps["div"] = shifted
    lsm = torch.nn.functional.log_softmax(shifted, dim=-1)
    steps["log_softmax"] = lsm
    gathered = torch.gather(lsm, 2, lab.unsqueeze(-1))
    steps["gather"] = gathered
    masked = gathered.squeeze(-1) * mask
    steps["mul"] = masked
    ptrs = {"log_softmax": lsm.data_ptr(), "labels": lab.data_ptr(), "mask": mask.data_ptr()}
    for op, t in steps.items():
        s = saved(t)
        for v in s.values():
            v["is"] = next((k for k, p in ptrs.items() if p == v["ptr"]), None)
            del v["ptr"]
        print(json.dumps({"trainer": trainer, "op": op, "grad_fn": type(t.grad_fn).__name__, "saved": s}))


for trainer in ("torchtune", "llamafactory"):
    run(trainer)
