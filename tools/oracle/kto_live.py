"""The vocabulary-sized tensors live in TRL 1.8.0's KTOTrainer._compute_loss
(the first line printed) and in LLaMA-Factory's CustomKTOTrainer
.get_batch_loss_metrics (src/llamafactory/train/kto/trainer.py and
get_batch_logps of train/trainer_utils.py at ff6d4d12e, the second line)
(trl/trainer/kto_trainer.py, with selective_log_softmax and
entropy_from_logits of trl/trainer/utils.py), replayed op for op on a tiny
LlamaForCausalLM in bf16 on the CPU (torch 2.15, transformers 5.25): the
KL forward of the policy under no_grad, the policy's forward and its
per-row log_softmax, the index_select copies of the chosen and rejected
rows' logits, the reference copy's KL forward and forward under no_grad,
and the entropy of the detached shifted logits.

A TorchDispatchMode records every tensor an op makes (its storage, by a
weak reference that expires when the storage is freed, autograd's saved
tensors included; a view of an input is not a new tensor); after each op it sums the live ones of at least one
row's shifted logits ([seq-1, V] bf16) and keeps the largest sum, the op
that reached it and what was live then (a tensor made and freed inside
one op, as log_softmax's contiguous copy of a strided input, is not
seen). sim/kto_test.go (TestKTOLiveAsTRL, TestKTOLiveAsLlamaFactory)
holds memsh's replay of the same steps to it.

/work/venv-t/bin/python tools/oracle/kto_live.py
"""
import copy
import json

import torch
import torch.nn.functional as F
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from transformers import LlamaConfig, LlamaForCausalLM

ROWS, SEQ, VOCAB = 2, 9, 1000
ROW_BYTES = (SEQ - 1) * VOCAB * 2


class Live(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.made = []  # (weak storage, bytes, op, shape)
        self.peak, self.at, self.live_at_peak = 0, None, []
        self.region = ""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        outs = out if isinstance(out, (tuple, list)) else [out]
        ins = {a.untyped_storage().data_ptr() for a in torch.utils._pytree.tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor)}
        for t in outs:
            if isinstance(t, torch.Tensor) and t.untyped_storage().nbytes() >= ROW_BYTES and t.untyped_storage().data_ptr() not in ins:
                ref = StorageWeakRef(t.untyped_storage())
                if not any(r == ref for r, *_ in self.made):  # a view of a tensor already counted
                    self.made.append((ref, t.untyped_storage().nbytes(), self.region + func.__name__, list(t.shape)))
        live = [(n, op, shape) for r, n, op, shape in self.made if not r.expired()]
        total = sum(n for n, *_ in live)
        if total > self.peak:
            self.peak, self.at, self.live_at_peak = total, self.region + func.__name__, live
        return out


def selective_log_softmax(logits, index):  # 16-bit logits: one row at a time
    rows = []
    for row_logits, row_labels in zip(logits, index):
        rows.append(F.log_softmax(row_logits, dim=-1).gather(dim=-1, index=row_labels.unsqueeze(-1)).squeeze(-1))
    return torch.stack(rows)


def entropy_from_logits(logits, chunk_size=128):
    flat = logits.reshape(-1, logits.shape[-1])
    out = []
    for chunk in flat.split(chunk_size, dim=0):
        logps = F.log_softmax(chunk, dim=-1)
        out.append(-(torch.exp(logps) * logps).sum(-1))
    return torch.cat(out, dim=0).reshape(logits.shape[:-1])


def kl_logps(mode, model, batch):
    with torch.no_grad():
        kl_logits = model(batch["KL_input_ids"]).logits
    lp = selective_log_softmax(kl_logits[:, :-1, :], batch["KL_input_ids"][:, 1:])
    lp[batch["KL_completion_mask"][:, 1:] == 0] = 0.0
    return lp.sum(-1)


def compute_loss(mode, model, ref_model, batch):
    mode.region = "KL."
    KL_logps = kl_logps(mode, model, batch)
    mode.region = ""
    outputs = model(batch["input_ids"])
    shift_logits = outputs.logits[:, :-1, :]
    per_token_logps = selective_log_softmax(shift_logits, batch["input_ids"][:, 1:])
    per_token_logps[batch["completion_mask"][:, 1:] == 0] = 0.0
    completion_logps = per_token_logps.sum(-1)
    labels = torch.as_tensor(batch["label"], dtype=torch.bool)
    chosen_idx = torch.nonzero(labels).view(-1)
    rejected_idx = torch.nonzero(~labels).view(-1)
    chosen_logps = completion_logps.index_select(0, chosen_idx)
    rejected_logps = completion_logps.index_select(0, rejected_idx)
    chosen_logits = outputs.logits.index_select(0, chosen_idx)
    rejected_logits = outputs.logits.index_select(0, rejected_idx)
    with torch.no_grad():
        mode.region = "KL.ref_model."
        ref_KL_logps = kl_logps(mode, ref_model, batch)
        mode.region = "ref_model."
        ref_outputs = ref_model(batch["input_ids"])
    ref_lp = selective_log_softmax(ref_outputs.logits[:, :-1, :], batch["input_ids"][:, 1:])
    ref_lp[batch["completion_mask"][:, 1:] == 0] = 0.0
    ref_logps = ref_lp.sum(-1)
    kl = (KL_logps - ref_KL_logps).mean().detach().clamp(min=0)
    chosen = 1 - F.sigmoid(0.1 * (chosen_logps - ref_logps.index_select(0, chosen_idx) - kl))
    rejected = 1 - F.sigmoid(0.1 * (kl - (rejected_logps - ref_logps.index_select(0, rejected_idx))))
    losses = torch.cat((chosen, rejected), 0)
    mode.region = "entropy."
    entropy = entropy_from_logits(shift_logits.detach())
    mode.region = ""
    _ = (entropy * batch["completion_mask"][:, 1:]).sum()
    _ = chosen_logits.nansum(), rejected_logits.nansum()
    return losses.nanmean()


def lf_forward(model, batch, prefix=""):
    logits = model(batch[prefix + "input_ids"]).logits.to(torch.float32)
    labels = batch[prefix + "labels"][:, 1:].clone()
    shifted = logits[:, :-1, :]
    loss_mask = labels != -100
    labels[labels == -100] = 0
    per_token = torch.gather(shifted.log_softmax(-1), dim=2, index=labels.unsqueeze(2)).squeeze(2)
    logps = (per_token * loss_mask).sum(-1)
    return logits, logps, logps / loss_mask.sum(-1)


def lf_concatenated_forward(mode, model, batch, region):
    mode.region = region
    target_logits, target_logps, target_avg = lf_forward(model, batch)
    with torch.no_grad():
        mode.region = "KL." + region
        _, kl_logps, _ = lf_forward(model, batch, prefix="kl_")
    mode.region = region
    tags = batch["kto_tags"]
    return target_logps[tags], target_logps[~tags], target_logits[tags], target_logits[~tags], kl_logps, target_avg[tags]


def lf_loss(mode, model, ref_model, batch):
    pc, pr, pcl, prl, pkl, _ = lf_concatenated_forward(mode, model, batch, "")
    with torch.no_grad():
        rc, rr, _, _, rkl, _ = lf_concatenated_forward(mode, ref_model, batch, "ref_model.")
    mode.region = ""
    kl = (pkl - rkl).mean().clamp(min=0).detach()
    losses = torch.cat((1 - F.sigmoid(0.1 * (pc - rc - kl)), 1 - F.sigmoid(0.1 * (kl - (pr - rr)))), 0).nanmean()
    _ = pcl.nansum(), prl.nansum()
    return losses


def main():
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=False)
    model = LlamaForCausalLM(cfg).to(torch.bfloat16)
    model.train()
    ref_model = copy.deepcopy(model).eval()
    batch = {
        "input_ids": torch.randint(0, VOCAB, (ROWS, SEQ)),
        "KL_input_ids": torch.randint(0, VOCAB, (ROWS, SEQ)),
        "completion_mask": torch.ones(ROWS, SEQ, dtype=torch.long),
        "KL_completion_mask": torch.ones(ROWS, SEQ, dtype=torch.long),
        "label": [True, False],
    }
    with Live() as mode:
        loss = compute_loss(mode, model, ref_model, batch)
    print(json.dumps({"rows": ROWS, "seq": SEQ, "vocab": VOCAB, "row_bytes": ROW_BYTES,
                      "peak_bytes": mode.peak, "peak_at": mode.at,
                      "live_at_peak": [[op, s, n] for n, op, s in mode.live_at_peak]}))
    del loss
    batch["labels"], batch["kl_input_ids"] = batch["input_ids"], batch["KL_input_ids"]
    batch["kl_labels"], batch["kto_tags"] = batch["KL_input_ids"], torch.tensor(batch["label"])
    with Live() as mode:
        loss = lf_loss(mode, model, ref_model, batch)
    print(json.dumps({"trainer": "llamafactory", "peak_bytes": mode.peak, "peak_at": mode.at,
                      "live_at_peak": [[op, s, n] for n, op, s in mode.live_at_peak]}))


main()
