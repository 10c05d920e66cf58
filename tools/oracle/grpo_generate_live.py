"""The tensors transformers' generate holds while GRPOTrainer generates with
vllm=None: trl/trainer/grpo_trainer.py _generate_single_turn at TRL 1.16.0
calls unwrapped_model.generate(input_ids, attention_mask,
generation_config) under torch.no_grad() with the GenerationConfig its
__init__ builds (max_new_tokens = max_completion_length, do_sample, the
temperature 1.0, top_p 1.0 and top_k 0 of GRPOConfig's defaults, no min_p,
repetition_penalty 1.0, disable_compile). Run here on a tiny LlamaForCausalLM
in bf16 on the CPU (torch 2.15, transformers 5.25: generation/utils.py
_sample, cache_utils.py DynamicLayer.update), the prompts left-padded as TRL
pads them (all of one length here, so no padding).

The TorchDispatchMode records every tensor an op makes inside generate (by
a weak reference to its storage; a view of an input is not a new tensor),
and after each op sums the live ones, keeping the largest sum, the op that
reached it and what was live then, sorted into the DynamicCache's keys and
values ([rows, kv_heads, tokens, head_dim] made by torch.cat), the vocabulary-sized
tensors (last dimension the vocabulary: logits, next_token_logits, probs,
multinomial's draws), int64 tensors (input_ids and attention_mask grown a
token a step, next_tokens, positions) and the rest (a decode forward's
activations). sim/grpo_generate_test.go (TestGRPOGenerateAsTransformers)
holds memsh's generation phase to the first two.

/work/venv-t/bin/python tools/oracle/grpo_generate_live.py
"""
import json

import torch
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

HIDDEN, LAYERS, HEADS, KV_HEADS, INTER = 64, 2, 4, 2, 128
HEAD_DIM = HIDDEN // HEADS
CASES = [  # rows, prompt, completion, vocabulary
    (8, 8, 120, 256),  # the cache's last update is the peak
    (8, 8, 8, 32000),  # the sampler's [rows, V] fp32 tensors are
]


class Live(TorchDispatchMode):
    def __init__(self, vocab):
        super().__init__()
        self.vocab = vocab
        self.made = []  # (weak storage, bytes, op, shape, dtype)
        self.peak, self.at, self.live_at_peak = 0, None, []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        outs = out if isinstance(out, (tuple, list)) else [out]
        ins = {a.untyped_storage().data_ptr() for a in torch.utils._pytree.tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor)}
        for t in outs:
            if isinstance(t, torch.Tensor) and t.untyped_storage().nbytes() > 0 and t.untyped_storage().data_ptr() not in ins:
                ref = StorageWeakRef(t.untyped_storage())
                if not any(r == ref for r, *_ in self.made):
                    self.made.append((ref, t.untyped_storage().nbytes(), func.__name__, list(t.shape), str(t.dtype)))
        self.made = [m for m in self.made if not m[0].expired()]
        total = sum(m[1] for m in self.made)
        if total > self.peak:
            self.peak, self.at, self.live_at_peak = total, func.__name__, [m[1:] for m in self.made]
        return out

    def kind(self, op, shape, dtype):
        if op == "cat.default" and len(shape) == 4 and shape[1] == KV_HEADS and shape[3] == HEAD_DIM:
            return "cache"
        if shape and shape[-1] == self.vocab:
            return "vocab"
        if dtype == "torch.int64":
            return "int64"
        return "other"


def main():
    for rows, prompt, completion, vocab in CASES:
        torch.manual_seed(0)
        cfg = LlamaConfig(vocab_size=vocab, hidden_size=HIDDEN, intermediate_size=INTER, num_hidden_layers=LAYERS,
                          num_attention_heads=HEADS, num_key_value_heads=KV_HEADS, tie_word_embeddings=False,
                          attn_implementation="sdpa")
        model = LlamaForCausalLM(cfg).to(torch.bfloat16)
        model.train()  # TRL generates from the training model (gradient checkpointing off)
        gen = GenerationConfig(max_new_tokens=completion, do_sample=True, pad_token_id=0, bos_token_id=1, eos_token_id=vocab - 1,
                               temperature=1.0, top_p=1.0, top_k=0, min_p=None, repetition_penalty=1.0, cache_implementation=None,
                               disable_compile=True)
        input_ids = torch.randint(2, vocab - 1, (rows, prompt))
        attention_mask = torch.ones(rows, prompt, dtype=torch.long)
        with torch.no_grad(), Live(vocab) as mode:
            out = model.generate(input_ids=input_ids, attention_mask=attention_mask, generation_config=gen)
        by = {}
        for n, op, shape, dtype in mode.live_at_peak:
            k = mode.kind(op, shape, dtype)
            by[k] = by.get(k, 0) + n
        print(json.dumps({"rows": rows, "prompt": prompt, "completion": completion, "vocab": vocab,
                          "generated": list(out.shape), "peak_bytes": mode.peak, "peak_at": mode.at, "by_kind": by,
                          "live_at_peak": [[op, s, d, n] for n, op, s, d in mode.live_at_peak]}))


main()
