"""The vocabulary-sized tensors live in GRPOTrainer._get_per_token_logps_and_entropies
of TRL 1.8 and 1.9 (logits.div_(temperature) in place) and of TRL 1.10 to 1.13
(logits / temperature, a new tensor): trl/trainer/grpo_trainer.py of the
1.8.0, 1.10.0 and 1.13.0 wheels, with selective_log_softmax and
entropy_from_logits of trl/trainer/utils.py (the same at the three releases).
The steps are written here as the trainer runs them, on a tiny
LlamaForCausalLM in bf16 on the CPU (torch 2.15, transformers 5.25): the
model called with logits_to_keep = completion + 1, the logits sliced to the
completion and scaled by the temperature, the per-row log_softmax and gather,
the entropy under no_grad, then, after the function returns, a loss over the
per-token log-probabilities and its backward.

The same TorchDispatchMode as kto_live.py records every tensor an op makes
(by a weak reference to its storage, autograd's saved tensors included; a
view of an input is not a new tensor); after each op it sums the live ones of
at least one row's completion logits ([completion, V] bf16) whose last
dimension is the vocabulary (the logits, their copies and gradients, not
the weights' gradients) and keeps the
largest sum, the op that reached it and what was live then, in the forward
(up to the function's return) and in the backward apart. sim/grpo_logits_test.go
(TestGRPOLiveAsTRL18, TestGRPOLiveAsTRL110) holds memsh's replay to it.

/work/venv-t/bin/python tools/oracle/grpo_live.py
"""
import json

import torch
import torch.nn.functional as F
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from transformers import LlamaConfig, LlamaForCausalLM

ROWS, SEQ, COMPLETION, VOCAB = 2, 12, 8, 1000
ROW_BYTES = COMPLETION * VOCAB * 2
TEMPERATURE = 1.0  # GRPOConfig's default: the division runs all the same


class Live(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.made = []  # (weak storage, bytes, op, shape)
        self.peak, self.at, self.live_at_peak = 0, None, []
        self.region = ""

    def reset(self):
        self.peak, self.at, self.live_at_peak = 0, None, []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        outs = out if isinstance(out, (tuple, list)) else [out]
        ins = {a.untyped_storage().data_ptr() for a in torch.utils._pytree.tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor)}
        for t in outs:
            if isinstance(t, torch.Tensor) and t.dim() > 0 and t.shape[-1] == VOCAB and t.untyped_storage().nbytes() >= ROW_BYTES and t.untyped_storage().data_ptr() not in ins:
                ref = StorageWeakRef(t.untyped_storage())
                if not any(r == ref for r, *_ in self.made):
                    self.made.append((ref, t.untyped_storage().nbytes(), self.region + func.__name__, list(t.shape)))
        live = [(n, op, shape) for r, n, op, shape in self.made if not r.expired()]
        total = sum(n for n, *_ in live)
        if total > self.peak:
            self.peak, self.at, self.live_at_peak = total, self.region + func.__name__, live
        return out


def row_log_probs(logits, index):  # selective_log_softmax over 16-bit logits: a row at a time
    rows = []
    for row_logits, row_labels in zip(logits, index.unsqueeze(-1)):
        rows.append(F.log_softmax(row_logits, dim=-1).gather(dim=-1, index=row_labels))
    return torch.stack(rows).squeeze(-1)


def entropy(logits, chunk_size=128):  # entropy_from_logits
    flat = logits.reshape(-1, logits.shape[-1])
    out = []
    for chunk in flat.split(chunk_size, dim=0):
        logps = F.log_softmax(chunk, dim=-1)
        out.append(-(torch.exp(logps) * logps).sum(-1))
    return torch.cat(out, dim=0).reshape(logits.shape[:-1])


def per_token_logps(mode, model, input_ids, attention_mask, keep, in_place):
    mode.region = ""
    outputs = model(input_ids=input_ids, attention_mask=attention_mask, logits_to_keep=keep + 1, use_cache=False)
    logits = outputs.logits[:, :-1, :]
    logits = logits[:, -keep:, :]
    if in_place:
        logits.div_(TEMPERATURE)
    else:
        logits = logits / TEMPERATURE
    mode.region = "selective_log_softmax."
    logps = row_log_probs(logits, input_ids[:, -keep:])
    mode.region = "entropy."
    with torch.no_grad():
        ent = entropy(logits)
    mode.region = ""
    return logps, ent


def main():
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=False)
    model = LlamaForCausalLM(cfg).to(torch.bfloat16)
    model.train()
    input_ids = torch.randint(0, VOCAB, (ROWS, SEQ))
    attention_mask = torch.ones(ROWS, SEQ, dtype=torch.long)
    for release, in_place in (("1.8", True), ("1.10", False)):
        model.zero_grad(set_to_none=True)
        with Live() as mode:
            logps, ent = per_token_logps(mode, model, input_ids, attention_mask, COMPLETION, in_place)
            fwd = {"peak_bytes": mode.peak, "peak_at": mode.at,
                   "live_at_peak": [[op, s, n] for n, op, s in mode.live_at_peak]}
            mode.reset()
            old = logps.detach()
            coef = torch.exp(logps - old)
            loss = -(coef * torch.ones(ROWS, 1)).mean()
            mode.region = "backward."
            loss.backward()
            bwd = {"peak_bytes": mode.peak, "peak_at": mode.at,
                   "live_at_peak": [[op, s, n] for n, op, s in mode.live_at_peak]}
        print(json.dumps({"trl": release, "rows": ROWS, "seq": SEQ, "completion": COMPLETION, "vocab": VOCAB,
                          "row_bytes": ROW_BYTES, "forward": fwd, "backward": bwd}))


main()
