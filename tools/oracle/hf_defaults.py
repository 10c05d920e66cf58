"""What transformers builds from a config.json with one key left out: for each config of hf_names.py's CASES (one per
model class hf_config builds, its first class) and each of its keys, the config without that key (a key of a nested
text_config, vision_config, ... too, written "text_config.KEY"), built as transformers builds it on the meta device:
its parameter count (each distinct tensor once), or the error transformers raises. One JSON line per key.
sim/hf_defaults_test.go holds hf_config to them: without the key memsh builds the same number of parameters, or
refuses the config (never a silent other number: a missing key is the config class's default, not zero).

    /work/venv-t/bin/python tools/oracle/hf_defaults.py > sim/testdata/hf_defaults.jsonl   # transformers 5.25.0, torch 2.15.0

    /work/venv-t/bin/python tools/oracle/hf_defaults.py --all > sim/testdata/hf_defaults_all.jsonl

--all takes every other config under sim/testdata/hf (flops/ included) instead, as hf_names.py --all does, each built
as the class its "architectures" names (the survey: about an hour on 2 cores; TestHFDefaultsAsTransformers reads both
files). --only FILE... takes those configs alone (a config added to sim/testdata/hf: append its lines to
hf_defaults_all.jsonl):

    /work/venv-t/bin/python tools/oracle/hf_defaults.py --only laguna-xs2.json >> sim/testdata/hf_defaults_all.jsonl

Keys that name no part of the model are skipped (SKIP): token ids, dtypes, versions, generation settings, the
architectures list and model_type itself."""
import json
import logging
import os
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from stable_order import error_line, pin_hash_seed  # noqa: E402

pin_hash_seed()  # set iteration orders fixed, so a second run writes the same lines

import torch
import transformers

from hf_names import CASES, HF, all_cases  # noqa: E402

SKIP = {
    "architectures", "model_type", "transformers_version", "torch_dtype", "dtype", "bos_token_id", "eos_token_id",
    "pad_token_id", "sep_token_id", "cls_token_id", "decoder_start_token_id", "use_cache", "auto_map",
    "_name_or_path", "initializer_range", "initializer_factor", "output_attentions", "output_hidden_states",
    "return_dict", "id2label", "label2id", "problem_type", "task_specific_params", "tokenizer_class",
}
NESTED = ("text_config", "vision_config", "audio_config")


def count(raw, arch):
    cfg = transformers.AutoConfig.for_model(**raw)
    with torch.device("meta"):
        model = getattr(transformers, arch)(cfg)
    return sum(p.numel() for p in model.parameters())  # parameters(): each tensor once


def dropped(raw):
    """(key, config without it) for every key worth dropping, nested ones as "parent.key"."""
    for key in raw:
        if key in SKIP:
            continue
        if key in NESTED and isinstance(raw[key], dict):
            for sub in raw[key]:
                if sub in SKIP:
                    continue
                inner = {k: v for k, v in raw[key].items() if k != sub}
                yield key + "." + sub, {**raw, key: inner}
            continue
        yield key, {k: v for k, v in raw.items() if k != key}


def main():
    logging.disable(logging.WARNING)
    warnings.simplefilter("ignore")
    transformers.logging.set_verbosity_error()
    cases = [(config, prefix + heads[0]) for config, prefix, heads in CASES]
    if "--all" in sys.argv:
        cases = [(config, heads[0]) for config, _, heads in all_cases() if (config, heads[0]) not in cases]
    if "--only" in sys.argv:
        only = sys.argv[sys.argv.index("--only") + 1:]
        cases = [(config, heads[0]) for config, _, heads in all_cases() if config in only]
    for config, arch in cases:
        raw = json.load(open(os.path.join(HF, config)))
        line = {"config": config, "arch": arch, "drop": "", "params": count(raw, arch)}
        print(json.dumps(line), flush=True)
        for key, rest in dropped(raw):
            line = {"config": config, "arch": arch, "drop": key}
            try:
                line["params"] = count(rest, arch)
            except Exception as e:  # noqa: BLE001 - what transformers says is the record
                line["error"] = error_line(e)
            print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
