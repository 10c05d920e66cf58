# deberta_params.py: the parameters of DeBERTa-v2/v3 (model_type
# "deberta-v2") as transformers builds them from a config.json, on the meta
# device (no weights), for each class hf_config builds: the base model, the
# masked LM (decoder tied to word_embeddings), sequence classification
# (ContextPooler + classifier, num_labels from the config, 2 by default) and
# token classification.
#
#   /work/venv-t/bin/python tools/oracle/deberta_params.py CONFIG.json...
#
# transformers 5.25.0, torch 2.15.0 (/work/venv-t): see deberta/README.md
# for the figures of the published configs.
import json
import sys

import torch
import transformers

CLASSES = ("DebertaV2Model", "DebertaV2ForMaskedLM",
           "DebertaV2ForSequenceClassification", "DebertaV2ForTokenClassification")

print("transformers", transformers.__version__, "torch", torch.__version__)
for path in sys.argv[1:]:
    cfg = transformers.DebertaV2Config(**json.load(open(path)))
    counts = []
    for name in CLASSES:
        with torch.device("meta"):
            model = getattr(transformers, name)(cfg)
        counts.append(sum(p.numel() for p in model.parameters()))  # tied once
    print(path, " ".join(f"{n}={c}" for n, c in zip(CLASSES, counts)))
