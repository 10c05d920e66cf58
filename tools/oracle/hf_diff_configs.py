"""Write sim/testdata/hf/diff/<name>.json: each config.json of sim/testdata/hf
as PretrainedConfig.save_pretrained writes it (to_json_string(use_diff=True):
only the attributes whose value differs from the config class's defaults,
to_diff_dict comparing with self.__class__().to_dict()).

    /work/venv-t/bin/python tools/oracle/hf_diff_configs.py

A file whose model_type this transformers release has no config class for,
or which it cannot load, is skipped with a line on stderr.
"""
import glob
import json
import os
import sys

import transformers
from transformers import AutoConfig

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "sim", "testdata", "hf")


def main():
    out_dir = os.path.join(ROOT, "diff")
    os.makedirs(out_dir, exist_ok=True)
    for path in sorted(glob.glob(os.path.join(ROOT, "*.json"))):
        name = os.path.basename(path)
        with open(path) as f:
            raw = json.load(f)
        mt = raw.get("model_type")
        try:
            cls = type(AutoConfig.for_model(mt))
            cfg = cls.from_dict(raw)
            text = cfg.to_json_string(use_diff=True)
        except Exception as e:  # noqa: BLE001 - report and go on
            print(f"skip {name}: {type(e).__name__}: {e}", file=sys.stderr)
            continue
        with open(os.path.join(out_dir, name), "w") as f:
            f.write(text)
    with open(os.path.join(out_dir, "README.md"), "w") as f:
        f.write(
            "# save_pretrained-style configs\n\n"
            "Each file is the config.json of the same name in sim/testdata/hf as\n"
            "PretrainedConfig.save_pretrained writes it (to_json_string(use_diff=True):\n"
            "only what differs from the config class's defaults), written by\n"
            "tools/oracle/hf_diff_configs.py with transformers "
            + transformers.__version__
            + ".\nsim/hf's TestDiffConfigs builds each and the full file and compares.\n"
        )


if __name__ == "__main__":
    main()
