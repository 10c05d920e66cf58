# flex_blocks.py: the blocks torch 2.15's create_block_mask (on the CPU)
# lists for torchtitan's block_causal mask (causal AND documents) against
# memsh's rule (sim/nn/flex_blocks.go): query block i and key block i-d
# share a document unless one starts in the tokens from the key block's
# last to the query block's first. 4,096 tokens, blocks of 128,
# documents of L tokens whose first starts at offset ph.
#
#   /work/venv-t/bin/python flex_blocks.py    -> "49 rows, 0 differ"
import torch
from torch.nn.attention.flex_attention import and_masks, create_block_mask
T, B = 4096, 128
n = T // B
bad = 0; rows = 0
for L in (128, 300, 512, 1000, 2048, 4096, 10000):
    for ph in (0, 1, 37, 101, 127, L // 2, L - 1):
        pos = (torch.arange(T) + ph) % L
        starts = set((pos == 0).nonzero().flatten().tolist()) | {0}
        doc = torch.cumsum((pos == 0).int(), 0) - 1
        bm = create_block_mask(and_masks(lambda b, h, i, j: i >= j, lambda b, h, i, j: doc[i] == doc[j]), 1, None, T, T, device="cpu")
        got = int(bm.kv_num_blocks.sum() + bm.full_kv_num_blocks.sum())
        # the rule: block (i, i-d) runs unless a document starts in tokens B(i-d+1) .. B*i
        rule = n + sum(1 for i in range(n) for d in range(1, i + 1)
                       if not any(s in starts for s in range(B * (i - d + 1), B * i + 1)))
        rows += 1; bad += got != rule
        print(L, ph, got, rule)
print(rows, "rows,", bad, "differ")
