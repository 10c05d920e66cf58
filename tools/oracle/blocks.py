"""PyTorch modules for the differential test: one configurable transformer block and the model around it.

Each option mirrors one memsh builder option (see script.go, which writes the memsh side of a
configuration), and each module computes what the PyTorch/Hugging Face code it stands for computes,
so that autograd saves the same tensors:

  norm       layernorm (nn.LayerNorm, bias or not) | rmsnorm (HF LlamaRMSNorm: fp32 inside, cast back, * weight)
  attention  q/k/v projections (or GPT-2's fused c_attn), optional RoPE from fp32 cos/sin buffers (HF), GQA/MQA
             through HF repeat_kv (expand + reshape), eager (matmul, scale, causal masked_fill from a bool buffer,
             softmax (in fp32 when softmax_fp32, then cast back), dropout, matmul) or sdpa
             (F.scaled_dot_product_attention(is_causal=True)); dropout on the probabilities and on the output
             projection (GPT-2 placement). Dropout is torch.native_dropout: a bool mask, what CUDA saves.
  mlp        fc1 -> act -> fc2 (gelu|relu|silu|tanh|sigmoid) or gated (swiglu|geglu: down(act(gate x) * up x)),
             optional bias, dropout on the output.
  lora       PEFT LoraLayer on the targeted roles: base(x) + lora_B(lora_A(x)) * (alpha / rank).
This file was written for this harness; the blocks follow shared/oracle/measure.py (our own code).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

ACTS = {"gelu": lambda x: F.gelu(x, approximate="tanh"), "relu": F.relu, "silu": F.silu,
        "tanh": torch.tanh, "sigmoid": torch.sigmoid}
GATED = {"swiglu": F.silu, "geglu": lambda x: F.gelu(x, approximate="tanh")}


def drop(x, p, training=True):
    """torch.native_dropout saves a bool mask, as CUDA's fused dropout does (CPU F.dropout keeps dtype noise)."""
    if p == 0.0 or not training:
        return x
    return torch.native_dropout(x, p, True)[0]


class LoRALinear(nn.Module):
    """PEFT's LoraLayer over a frozen nn.Linear: y = base(x) + B(A(x)) * scaling (no lora dropout)."""

    def __init__(self, base, rank, alpha):
        super().__init__()
        self.base = base
        self.lora_A = nn.Linear(base.in_features, rank, bias=False)
        self.lora_B = nn.Linear(rank, base.out_features, bias=False)
        nn.init.normal_(self.lora_B.weight, std=0.02)  # PEFT zeros B; any value saves the same tensors
        self.scaling = alpha / rank

    def forward(self, x):
        return self.base(x) + self.lora_B(self.lora_A(x)) * self.scaling


def linear(c, role, din, dout, bias):
    lin = nn.Linear(din, dout, bias=bias)
    lora = c.get("lora")
    if lora and (role in lora["targets"] or ("all-linear" in lora["targets"] and role != "lm_head")):
        return LoRALinear(lin, lora["rank"], lora["alpha"])
    return lin


class RMSNorm(nn.Module):
    def __init__(self, h, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(h))
        self.eps = eps

    def forward(self, x):
        dt = x.dtype
        xf = x.to(torch.float32)
        var = xf.pow(2).mean(-1, keepdim=True)
        xf = xf * torch.rsqrt(var + self.eps)
        return self.weight * xf.to(dt)


def norm(kind, h):
    if kind == "rmsnorm":
        return RMSNorm(h)
    return nn.LayerNorm(h, bias=(kind == "layernorm"))


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def repeat_kv(x, n_rep):
    if n_rep == 1:
        return x
    b, kv, s, d = x.shape
    return x[:, :, None, :, :].expand(b, kv, n_rep, s, d).reshape(b, kv * n_rep, s, d)


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        h, a, kv = c["h"], c["a"], c["kv"]
        self.a, self.kv, self.d = a, kv, h // a
        self.c = c
        if c["fused_qkv"]:
            self.qkv = linear(c, "qkv", h, (a + 2 * kv) * self.d, c["qkv_bias"])
        else:
            self.q_proj = linear(c, "q", h, a * self.d, c["qkv_bias"])
            self.k_proj = linear(c, "k", h, kv * self.d, c["qkv_bias"])
            self.v_proj = linear(c, "v", h, kv * self.d, c["qkv_bias"])
        self.o_proj = linear(c, "o", a * self.d, h, c["out_bias"])
        s_max = c["s"]
        if c["rope"]:
            inv = 1.0 / (10000 ** (torch.arange(0, self.d, 2).float() / self.d))
            emb = torch.cat([torch.outer(torch.arange(s_max).float(), inv)] * 2, dim=-1)
            self.register_buffer("cos", emb.cos())
            self.register_buffer("sin", emb.sin())
        if c["attn"] == "eager":
            self.register_buffer("causal", torch.triu(torch.ones(s_max, s_max, dtype=torch.bool), 1)[None, None])

    def core(self, q, k, v):  # (b, a, s, d) each; the selective-checkpoint region
        p = self.c["attn_drop"] if self.training else 0.0
        if self.c["attn"] == "sdpa":
            return F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
        s = q.shape[2]
        att = (q @ k.transpose(-2, -1)) / math.sqrt(self.d)
        att = att.masked_fill(self.causal[:, :, :s, :s], float("-inf"))
        if self.c["softmax_fp32"]:
            att = torch.softmax(att, dim=-1, dtype=torch.float32).to(q.dtype)
        else:
            att = torch.softmax(att, dim=-1)
        att = drop(att, p, self.training)
        return att @ v

    def forward(self, x):
        b, s, h = x.shape
        a, kv, d = self.a, self.kv, self.d
        if self.c["fused_qkv"]:
            q, k, v = self.qkv(x).split([a * d, kv * d, kv * d], dim=2)
        else:
            q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        q = q.view(b, s, a, d).transpose(1, 2)
        k = k.view(b, s, kv, d).transpose(1, 2)
        v = v.view(b, s, kv, d).transpose(1, 2)
        if self.c["rope"]:
            cos, sin = self.cos[:s], self.sin[:s]
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
        k, v = repeat_kv(k, a // kv), repeat_kv(v, a // kv)
        ck = self.c["ckpt"]
        if ck["mode"] == "selective":
            y = checkpoint(self.core, q, k, v, use_reentrant=ck["reentrant"])
        else:
            y = self.core(q, k, v)
        y = y.transpose(1, 2).contiguous().view(b, s, a * d)
        return drop(self.o_proj(y), self.c["attn_drop"], self.training)


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        h, f, bias = c["h"], c["ffn"], c["mlp_bias"]
        self.c = c
        if c["act"] in GATED:
            self.gate = linear(c, "gate", h, f, bias)
            self.up = linear(c, "up", h, f, bias)
            self.down = linear(c, "down", f, h, bias)
        else:
            self.up = linear(c, "up", h, f, bias)
            self.down = linear(c, "down", f, h, bias)

    def forward(self, x):
        act = self.c["act"]
        if act in GATED:
            y = self.down(GATED[act](self.gate(x)) * self.up(x))
        else:
            y = self.down(ACTS[act](self.up(x)))
        return drop(y, self.c["mlp_drop"], self.training)


def call(fn, x, region, ck):
    if region:
        return checkpoint(fn, x, use_reentrant=ck["reentrant"])
    return fn(x)


class Block(nn.Module):
    """residual(norm1, attention) then residual(norm2, mlp)."""

    def __init__(self, c, index):
        super().__init__()
        self.c, self.index = c, index
        self.norm1, self.attn = norm(c["norm"], c["h"]), Attention(c)
        self.norm2, self.mlp = norm(c["norm"], c["h"]), MLP(c)

    def body(self, x):
        ck = self.c["ckpt"]
        mods = ck.get("modules", []) if ck["mode"] == "modules" else []
        x = x + call(self.attn, self.norm1(x), "attention" in mods, ck)
        return x + call(self.mlp, self.norm2(x), "mlp" in mods, ck)

    def forward(self, x):
        ck = self.c["ckpt"]
        # every=k: torchtune's and torchtitan's selective_ac_option=k, counted from one (blocks k-1, 2k-1, ...)
        whole = ck["mode"] == "full" or (ck["mode"] == "every" and (self.index + 1) % ck["every"] == 0)
        return call(self.body, x, whole, ck)


class Model(nn.Module):
    """embedding -> layers blocks -> final norm (optional) -> lm_head (tied or not) -> cross-entropy.
    logits_fp32 upcasts the logits (HF causal LMs); loss_chunks=n is torchtune's chunked output and
    CEWithChunkedOutputLoss (lm_head per sequence chunk, each chunk .float() before its cross-entropy)."""

    def __init__(self, c, layers):
        super().__init__()
        self.c = c
        self.embed = nn.Embedding(c["vocab"], c["h"])
        self.blocks = nn.ModuleList([Block(c, i) for i in range(layers)])
        self.final_norm = norm(c["norm"], c["h"]) if c["final_norm"] else None
        self.lm_head = linear(c, "lm_head", c["h"], c["vocab"], False)
        if c["tie"]:
            self.lm_head.weight = self.embed.weight

    def forward(self, ids, targets):
        x = self.embed(ids)
        for blk in self.blocks:
            x = blk(x)
        if self.final_norm is not None:
            x = self.final_norm(x)
        n = self.c["loss_chunks"]
        if n > 1:
            logits = [self.lm_head(ch) for ch in x.chunk(n, dim=1)]
            tg = targets.chunk(n, dim=1)
            total = sum(F.cross_entropy(lg.float().reshape(-1, lg.shape[-1]), t.reshape(-1), reduction="sum")
                        for lg, t in zip(logits, tg))
            del logits
            return total / targets.numel()
        logits = self.lm_head(x)
        if self.c["logits_fp32"]:
            logits = logits.float()
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
