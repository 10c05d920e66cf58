"""The causal-LM loss of three transformers eras on one CUDA GPU: peak memory of forward + backward.

memsh's hf_config picks the loss by transformers version (sim/hf/transformers.go, TestShiftLogits):
  pre446  before 4.46: the model's forward upcasts the logits (logits = logits.float()), the loss copies
          all but the last position (shift_logits = logits[..., :-1, :].contiguous()), the output holds
          the fp32 logits;
  pre449  4.46-4.48: ForCausalLMLoss upcasts, then makes the same copy; the output holds the model's dtype;
  pad     4.49 and later: ForCausalLMLoss upcasts and pads the labels; no copy.
Each case runs an lm_head (bf16 Linear hidden -> vocab, no bias) on a bf16 hidden state that requires grad,
the loss as that era writes it, and the backward, while the loop keeps the output (out = model(...);
loss.backward(); del out: keep_logits). It records max_memory_allocated and max_memory_reserved over the
forward and backward (peaks reset after the setup) and the bytes allocated before them, one JSON line per
case and era. What memsh predicts from the shapes (TestShiftLogits): pre446's peak is 2*B*S*V - 12*B*V bytes
over pad's, pre449's 12*B*V under it (the loss's three fp32 tensors are one position shorter; memsh frees
the upcast after the copy, where ForCausalLMLoss's local keeps it through the cross-entropy's forward), each
within 1 MiB per logits-sized block.

    python3 tools/oracle/cuda_shift_loss.py --out shift_loss.jsonl
    python3 tools/oracle/cuda_shift_loss.py --out /tmp/smoke.jsonl --device cpu --cases tiny   # a smoke test
"""
import argparse
import json

import torch
import torch.nn.functional as F

CASES = {
    # name: (batch, seq, hidden, vocab)
    "llama3_b2": (2, 2048, 2048, 128256),
    "llama3_b4s1024": (4, 1024, 2048, 128256),
    "llama2_b4": (4, 2048, 4096, 32000),
    "tiny": (2, 64, 32, 1000),
}


def loss_pre449(logits, labels, vocab):
    """ForCausalLMLoss as the 4.46.0 and 4.48.0 wheels write it (its locals live until it returns)."""
    logits = logits.float()
    shift_logits = logits[..., :-1, :].contiguous()
    shift_labels = labels[..., 1:].contiguous()
    shift_logits = shift_logits.view(-1, vocab)
    shift_labels = shift_labels.view(-1)
    return F.cross_entropy(shift_logits, shift_labels, ignore_index=-100)


def loss_pad(logits, labels, vocab):
    """ForCausalLMLoss as the 4.49.0 wheel writes it."""
    logits = logits.float()
    labels = F.pad(labels, (0, 1), value=-100)
    shift_labels = labels[..., 1:].contiguous()
    logits = logits.view(-1, vocab)
    shift_labels = shift_labels.view(-1)
    return F.cross_entropy(logits, shift_labels, ignore_index=-100)


def forward_pre446(head, h, labels, vocab):
    """LlamaForCausalLM.forward's head and loss as the 4.40.0 and 4.45.2 wheels write them."""
    logits = head(h)
    logits = logits.float()
    shift_logits = logits[..., :-1, :].contiguous()
    shift_labels = labels[..., 1:].contiguous()
    shift_logits = shift_logits.view(-1, vocab)
    shift_labels = shift_labels.view(-1)
    loss = F.cross_entropy(shift_logits, shift_labels)
    return {"loss": loss, "logits": logits}


def forward_later(head, h, labels, vocab, loss_fn):
    """4.46 and later: the head's logits in the model's dtype, the loss from loss_function."""
    logits = head(h)
    return {"loss": loss_fn(logits, labels, vocab), "logits": logits}


def step(era, batch, seq, hidden, vocab, device):
    torch.manual_seed(0)
    head = torch.nn.Linear(hidden, vocab, bias=False, device=device, dtype=torch.bfloat16)
    h = torch.randn(batch, seq, hidden, device=device, dtype=torch.bfloat16, requires_grad=True)
    labels = torch.randint(0, vocab, (batch, seq), device=device)
    cuda = device == "cuda"
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    start = torch.cuda.memory_allocated() if cuda else 0
    if era == "pre446":
        out = forward_pre446(head, h, labels, vocab)
    elif era == "pre449":
        out = forward_later(head, h, labels, vocab, loss_pre449)
    else:
        out = forward_later(head, h, labels, vocab, loss_pad)
    out["loss"].backward()  # the loop keeps out, and its logits, through the backward
    row = {"era": era, "batch": batch, "seq": seq, "hidden": hidden, "vocab": vocab,
           "kept_dtype": str(out["logits"].dtype)}
    if cuda:
        torch.cuda.synchronize()
        row.update(start=start, max_allocated=torch.cuda.max_memory_allocated(),
                   max_reserved=torch.cuda.max_memory_reserved())
    del out, head, h
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--cases", default="llama3_b2,llama3_b4s1024,llama2_b4")
    a = ap.parse_args()
    with open(a.out, "a") as f:
        for name in a.cases.split(","):
            for era in ("pad", "pre449", "pre446"):
                try:
                    row = step(era, *CASES[name], a.device)
                    row["case"] = name
                except Exception as e:  # a case that raises is written with "error" and the run goes on
                    row = {"case": name, "era": era, "error": repr(e)}
                if a.device == "cuda":
                    torch.cuda.empty_cache()
                row["torch"] = torch.__version__
                f.write(json.dumps(row) + "\n")
                print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
