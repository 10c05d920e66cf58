"""torchtitan's ChunkedLossWrapper on one CUDA GPU: what the head and loss add to the peak.

memsh's loss_chunks=("torchtitan", n) (sim/core/titan_loss.go, TestTitanPeakAgainst) replays
ChunkedLossWrapper (torchtitan/components/loss.py at b5bcd76c6) with CrossEntropyLoss. This script
reimplements that algorithm with torch ops only (torchtitan itself need not be installed): the hidden
states [T, D] (bf16, a non-leaf: a stand-in for the final norm, h = h0 * g, which saves its inputs, not
its output), split in n views, each detached into a leaf; GradAccumulator's fp32 zeros_like buffer;
per chunk lm_head (bf16 Linear D -> V, no bias), cross_entropy_loss (pred.float(), F.cross_entropy sum)
and chunk_loss.backward() at once, h_chunk.grad.to(fp32) copied into the buffer's slice; after the loop
buffer.to(bf16), handed to the decoder's backward through an autograd Function that saves it. The
"unchunked" case is CrossEntropyLoss on the whole logits with the trainer's del pred before backward.

It records, from the moment the hidden states exist (peak stats reset there), max_memory_allocated minus
memory_allocated over the loss call and the backward, one JSON line per case, next to memsh's hand count
(bytes): unchunked 12*T*V; chunked 4*T*D (the buffer) + 2*V*D (lm_head's bf16 gradient) + 14*(T/n)*V
(the last chunk's bf16 logits, log_softmax, the nll gradient and log_softmax's gradient), the scalars
aside (512 bytes each in CUDA's allocator: a few KiB). Both cases run once as a warm-up (cuBLAS's
workspace) before the measured pass. It also checks that the chunked gradients equal
the unchunked ones (max abs difference printed).

    python3 tools/oracle/cuda_titan_loss.py --out titan_loss.jsonl
    python3 tools/oracle/cuda_titan_loss.py --out /tmp/smoke.jsonl --device cpu --cases tiny   # a smoke test
"""
import argparse
import json

import torch
import torch.nn.functional as F

CASES = {
    # name: (tokens, hidden, vocab, chunks)
    "memsh_test_n8": (2048, 512, 32000, 8),  # TestTitanPeakAgainst's model and batch
    "memsh_test_n16": (2048, 512, 32000, 16),
    "llama3_8b_8k_n8": (8192, 4096, 128256, 8),  # llama3_8b's head at 8192 tokens
    "tiny": (64, 32, 1000, 8),
}


class DecoderGrad(torch.autograd.Function):
    """_DecoderOutputGradientBackProp (loss.py l.772-815): saves the accumulated gradient."""

    @staticmethod
    def forward(ctx, hidden, acc, loss):
        ctx.save_for_backward(acc)
        return loss.detach()

    @staticmethod
    def backward(ctx, grad_output):
        (acc,) = ctx.saved_tensors
        return acc, None, None


def chunked(head, hidden, labels, n):
    """ChunkedLossWrapper.__call__ (loss.py l.564-720), no FSDP, no DTensor."""
    t = hidden.shape[0]
    size = t // n
    h_chunks = [c.contiguous().detach().requires_grad_(True) for c in torch.split(hidden, [size] * n, dim=0)]
    label_chunks = [c.contiguous() for c in torch.split(labels, [size] * n, dim=0)]
    buf = torch.zeros_like(hidden, dtype=torch.float32)
    total = hidden.new_zeros((), dtype=torch.float32)
    for i, (h, lab) in enumerate(zip(h_chunks, label_chunks)):
        logits = head(h)
        chunk_loss = F.cross_entropy(logits.float(), lab, reduction="sum", ignore_index=-100)
        total = total + chunk_loss.detach()
        chunk_loss.backward()
        g = h.grad
        if g.dtype != buf.dtype:
            g = g.to(buf.dtype)
        buf[i * size:(i + 1) * size] = g
        h.grad = None
    acc = buf.to(hidden.dtype)
    return DecoderGrad.apply(hidden, acc, total)


def unchunked(head, hidden, labels):
    pred = head(hidden)
    loss = F.cross_entropy(pred.float(), labels, reduction="sum", ignore_index=-100)
    del pred
    return loss


def run(name, tokens, hidden_size, vocab, n, dev, dt):
    torch.manual_seed(0)
    head = torch.nn.Linear(hidden_size, vocab, bias=False, device=dev, dtype=dt)
    h0 = torch.randn(tokens, hidden_size, device=dev, dtype=dt, requires_grad=True)
    g = torch.ones(hidden_size, device=dev, dtype=dt, requires_grad=True)
    labels = torch.randint(0, vocab, (tokens,), device=dev)
    out = {}
    # a warm-up pass of both first (cuBLAS's workspace, allocated at the first matmul, stays out of
    # the measured pass), then the measured one
    for case in ("unchunked", "chunked", "unchunked", "chunked"):
        head.weight.grad, h0.grad, g.grad = None, None, None
        if dev == "cuda":
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
        hidden = h0 * g  # the final norm's stand-in
        base = torch.cuda.memory_allocated() if dev == "cuda" else 0
        if dev == "cuda":
            torch.cuda.reset_peak_memory_stats()
        loss = unchunked(head, hidden, labels) if case == "unchunked" else chunked(head, hidden, labels, n)
        del hidden
        loss.backward()
        peak = torch.cuda.max_memory_allocated() - base if dev == "cuda" else 0
        out[case] = {"peak_over_base": peak, "loss": loss.detach().item(),
                     "grads": (head.weight.grad.float().clone(), h0.grad.float().clone())}
        del loss
    size = tokens // n
    want = {"unchunked": 12 * tokens * vocab,
            "chunked": 4 * tokens * hidden_size + 2 * vocab * hidden_size + 14 * size * vocab}
    dw = (out["chunked"]["grads"][0] - out["unchunked"]["grads"][0]).abs().max().item()
    dh = (out["chunked"]["grads"][1] - out["unchunked"]["grads"][1]).abs().max().item()
    rows = []
    for case in ("unchunked", "chunked"):
        rows.append({"case": name, "loss": case, "tokens": tokens, "hidden": hidden_size, "vocab": vocab,
                     "chunks": n if case == "chunked" else 1, "device": dev,
                     "peak_over_base": out[case]["peak_over_base"], "memsh_hand_count": want[case],
                     "loss_value": out[case]["loss"], "max_abs_grad_diff_weight": dw, "max_abs_grad_diff_input": dh})
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--cases", default="memsh_test_n8,memsh_test_n16,llama3_8b_8k_n8")
    a = ap.parse_args()
    with open(a.out, "a") as f:
        for name in a.cases.split(","):
            t, d, v, n = CASES[name]
            for row in run(name, t, d, v, n, a.device, torch.bfloat16):
                print(json.dumps(row), flush=True)
                f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
