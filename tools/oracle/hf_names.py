"""The module tree of the model classes hf_config builds (the encoders, GPT-2, GPT-NeoX, OPT, BLOOM, Falcon, Llama 4
and one config of every other family whose names match) as transformers builds them from configs in sim/testdata/hf
(tiny ones, and published ones where a family has no tiny config), one JSON line per
model class: named_parameters() (each distinct tensor once, with its element count), the other names a tied tensor answers to (named_parameters(remove_duplicate=False): an alias and the name named_parameters() gives it) and
named_modules(). sim/hf_names_test.go holds memsh's parameter and module names against them (the names rule: users see
and write the model's own names).

    /work/venv-t/bin/python tools/oracle/hf_names.py > sim/testdata/hf_names.jsonl   # transformers 5.25.0, torch 2.15.0

The models are built on the meta device (no weights).

    /work/venv-t/bin/python tools/oracle/hf_names.py --all > /tmp/all.jsonl
    MEMSH_HF_NAMES=/tmp/all.jsonl go test ./sim -run TestHFNamesAsTransformers

is the survey: every config under sim/testdata/hf (flops/ included) built as the class its "architectures" names
(AutoModelForCausalLM's, else AutoModel's, where it names none or one transformers lacks), the test listing every
name memsh's differs in."""
import glob
import json
import os
import sys

import torch
import transformers

HF = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "sim", "testdata", "hf")

HEADS = ("ForMaskedLM", "Model", "ForSequenceClassification", "ForTokenClassification")
# config file (under sim/testdata/hf), class-name prefix, the classes hf_config builds
CASES = [
    ("flops/gpt2-tiny.json", "GPT2", ("LMHeadModel", "Model")),
    ("gpt2-tiny-resid-dropout.json", "GPT2", ("LMHeadModel",)),
    ("bert-tiny.json", "Bert", HEADS),
    ("bert-tiny-hidden-dropout.json", "Bert", ("ForSequenceClassification",)),
    ("roberta-tiny.json", "Roberta", HEADS),
    ("roberta-tiny-cls.json", "Roberta", ("ForSequenceClassification",)),
    ("xlm-roberta-tiny.json", "XLMRoberta", HEADS),
    ("deberta-v3-tiny.json", "DebertaV2", HEADS),
    ("modernbert-tiny.json", "ModernBert", HEADS),
    ("modernbert-tiny-clscls.json", "ModernBert", ("ForSequenceClassification",)),
    ("falcon-tiny.json", "Falcon", ("ForCausalLM",)),
    ("falcon-tiny-newarch.json", "Falcon", ("ForCausalLM",)),
    ("opt-125m.json", "OPT", ("ForCausalLM",)),
    ("bloom-560m.json", "Bloom", ("ForCausalLM",)),
    ("pythia-160m.json", "GPTNeoX", ("ForCausalLM",)),
    ("llama4-tiny.json", "Llama4", ("ForCausalLM",)),
    # one config of each other family whose names memsh gives as transformers does (the survey below), its
    # "architectures" class (a published config where the family has no tiny one)
    ("afmoe-tiny.json", "", ("AfmoeForCausalLM",)),
    ("apertus-tiny.json", "", ("ApertusForCausalLM",)),
    ("apertus1p5-text-tiny.json", "", ("Apertus1p5TextForCausalLM",)),
    ("arcee-tiny.json", "", ("ArceeForCausalLM",)),
    ("aria-text-tiny.json", "", ("AriaTextForCausalLM",)),
    ("bailing_hybrid-tiny.json", "", ("BailingHybridForCausalLM",)),
    ("bamba-tiny.json", "", ("BambaForCausalLM",)),
    ("bitnet-tiny.json", "", ("BitNetForCausalLM",)),
    ("cohere2-tiny.json", "", ("Cohere2ForCausalLM",)),
    ("cohere2_moe-tiny.json", "", ("Cohere2MoeForCausalLM",)),
    ("cohere_compass_text-tiny.json", "", ("CohereCompassForCausalLM",)),
    ("codegen-tiny.json", "", ("CodeGenForCausalLM",)),
    ("cwm-tiny.json", "", ("CwmForCausalLM",)),
    ("dbrx-tiny.json", "", ("DbrxForCausalLM",)),
    ("deepseek-v2-tiny.json", "", ("DeepseekV2ForCausalLM",)),
    ("deepseek-v32-tiny.json", "", ("DeepseekV32ForCausalLM",)),
    ("flops/deepseek-v3-tiny.json", "", ("DeepseekV3ForCausalLM",)),
    ("deepseek-v4-tiny.json", "", ("DeepseekV4ForCausalLM",)),
    ("dots1-tiny.json", "", ("Dots1ForCausalLM",)),
    ("ernie4_5-tiny.json", "", ("Ernie4_5ForCausalLM",)),
    ("ernie4_5_moe-tiny.json", "", ("Ernie4_5_MoeForCausalLM",)),
    ("exaone-tiny.json", "", ("LlamaForCausalLM",)),
    ("internlm3-tiny.json", "", ("LlamaForCausalLM",)),
    ("iquestcoder-tiny.json", "", ("LlamaForCausalLM",)),
    ("exaone4-tiny.json", "", ("Exaone4ForCausalLM",)),
    ("exaone_moe-tiny.json", "", ("ExaoneMoeForCausalLM",)),
    ("falcon-h1-tiny.json", "", ("FalconH1ForCausalLM",)),
    ("falcon_mamba-tiny.json", "", ("FalconMambaForCausalLM",)),
    ("flex_olmo-tiny.json", "", ("FlexOlmoForCausalLM",)),
    ("gemma-tiny.json", "", ("GemmaForCausalLM",)),
    ("gemma2-tiny.json", "", ("Gemma2ForCausalLM",)),
    ("gemma3-tiny.json", "", ("Gemma3ForCausalLM",)),
    ("gemma3n-tiny.json", "", ("Gemma3nForCausalLM",)),
    ("gemma4-tiny.json", "", ("Gemma4ForCausalLM",)),
    ("gemma4-e-tiny.json", "", ("Gemma4ForCausalLM",)),
    ("gemma4-moe-tiny.json", "", ("Gemma4ForCausalLM",)),
    ("gemma4-unified-text-tiny.json", "", ("Gemma4UnifiedForCausalLM",)),
    ("gemma4-unified-tiny.json", "", ("Gemma4UnifiedForConditionalGeneration",)),
    ("glm-4.5-air.json", "", ("Glm4MoeForCausalLM",)),
    ("glm-4.7-flash.json", "", ("Glm4MoeLiteForCausalLM",)),
    ("glm4v-moe-tiny.json", "", ("Glm4vMoeForConditionalGeneration",)),
    ("glm-5.json", "", ("GlmMoeDsaForCausalLM",)),
    ("gpt-oss-20b.json", "", ("GptOssForCausalLM",)),
    ("gpt_bigcode-tiny.json", "", ("GPTBigCodeForCausalLM",)),
    ("gpt_bigcode-tiny-mha.json", "", ("GPTBigCodeForCausalLM",)),
    ("gpt_neo-tiny.json", "", ("GPTNeoForCausalLM",)),
    ("gptj-tiny.json", "", ("GPTJForCausalLM",)),
    ("xglm-tiny.json", "", ("XGLMForCausalLM",)),
    ("granite-tiny.json", "", ("GraniteForCausalLM",)),
    ("granite_swa-tiny.json", "", ("GraniteSWAForCausalLM",)),
    ("granitemoe_swa-tiny.json", "", ("GraniteMoeSWAForCausalLM",)),
    ("granitemoeshared-tiny.json", "", ("GraniteMoeSharedForCausalLM",)),
    ("hunyuan_v1_dense-tiny.json", "", ("HunYuanDenseV1ForCausalLM",)),
    ("hunyuan_v1_moe-tiny.json", "", ("HunYuanMoEV1ForCausalLM",)),
    ("hy_v3-tiny.json", "", ("HYV3ForCausalLM",)),
    ("idefics3-tiny.json", "", ("Idefics3ForConditionalGeneration",)),
    ("internvl-rms-tiny.json", "", ("InternVLForConditionalGeneration",)),
    ("ai21-jamba-1.5-mini.json", "", ("JambaForCausalLM",)),
    ("kimi_linear-tiny.json", "", ("KimiLinearForCausalLM",)),
    ("kimi-k2.5-tiny.json", "", ("Kimi_K25ForConditionalGeneration",)),
    ("kolibri1-tiny.json", "", ("Kolibri1ForCausalLM",)),
    ("laguna-tiny.json", "", ("LagunaForCausalLM",)),
    ("mellum-tiny.json", "", ("MellumForCausalLM",)),
    ("mimo_v2_flash-tiny.json", "", ("MiMoV2FlashForCausalLM",)),
    ("flint-tiny.json", "", ("FlintForCausalLM",)),
    ("lfm2-tiny.json", "", ("Lfm2ForCausalLM",)),
    ("lfm2_moe-tiny.json", "", ("Lfm2MoeForCausalLM",)),
    ("lfm2_vl-nonorm-tiny.json", "", ("Lfm2VlForConditionalGeneration",)),
    ("lfm3-tiny.json", "", ("Lfm3ForCausalLM",)),
    ("llama4-vision-tiny.json", "", ("Llama4ForConditionalGeneration",)),
    ("llama-gqa-tiny.json", "", ("LlamaForCausalLM",)),
    ("llava-pixtral-tiny.json", "", ("LlavaForConditionalGeneration",)),
    ("llava-next-tiny.json", "", ("LlavaNextForConditionalGeneration",)),
    ("llava-onevision-tiny.json", "", ("LlavaOnevisionForConditionalGeneration",)),
    ("flops/mamba2-tiny.json", "", ("Mamba2ForCausalLM",)),
    ("mamba-tiny.json", "", ("MambaForCausalLM",)),
    ("minicpm3-tiny.json", "", ("MiniCPM3ForCausalLM",)),
    ("minicpm5_moe-tiny.json", "", ("MiniCPM5MoeForCausalLM",)),
    ("youtu-tiny.json", "", ("YoutuForCausalLM",)),
    ("minimax-tiny.json", "", ("MiniMaxForCausalLM",)),
    ("minimax_m2-tiny.json", "", ("MiniMaxM2ForCausalLM",)),
    ("minimax_m3_vl_text-tiny.json", "", ("MiniMaxM3VLForCausalLM",)),
    ("ministral3-tiny.json", "", ("Ministral3ForCausalLM",)),
    ("mistral3-tiny.json", "", ("Mistral3ForConditionalGeneration",)),
    ("mistral-tiny.json", "", ("MistralForCausalLM",)),
    ("mistral4-tiny.json", "", ("Mistral4ForCausalLM",)),
    ("flops/mixtral-tiny.json", "", ("MixtralForCausalLM",)),
    ("ministral-tiny.json", "", ("MinistralForCausalLM",)),
    ("helium-tiny.json", "", ("HeliumForCausalLM",)),
    ("hrm_text-tiny.json", "", ("HrmTextForCausalLM",)),
    ("diffllama-tiny.json", "", ("DiffLlamaForCausalLM",)),
    ("lara_mini-tiny.json", "", ("LaraMiniForCausalLM",)),
    ("jais2-tiny.json", "", ("Jais2ForCausalLM",)),
    ("hyperclovax-tiny.json", "", ("HyperCLOVAXForCausalLM",)),
    ("cohere-tiny-qknorm.json", "", ("CohereForCausalLM",)),
    ("mllama-tiny.json", "", ("MllamaForConditionalGeneration",)),
    ("mpt-tiny.json", "", ("MptForCausalLM",)),
    ("nanochat-tiny.json", "", ("NanoChatForCausalLM",)),
    ("nemotron-h-moe-tiny.json", "", ("NemotronHForCausalLM",)),
    ("nemotron-tiny.json", "", ("NemotronForCausalLM",)),
    ("olmo-tiny.json", "", ("OlmoForCausalLM",)),
    ("olmo2-tiny.json", "", ("Olmo2ForCausalLM",)),
    ("olmo3-tiny-full.json", "", ("Olmo3ForCausalLM",)),
    ("olmo_hybrid-tiny.json", "", ("OlmoHybridForCausalLM",)),
    ("olmoe-tiny.json", "", ("OlmoeForCausalLM",)),
    ("phi-tiny-dropout.json", "", ("PhiForCausalLM",)),
    ("phi3-tiny.json", "", ("Phi3ForCausalLM",)),
    ("glm-tiny.json", "", ("GlmForCausalLM",)),
    ("glm4-tiny.json", "", ("Glm4ForCausalLM",)),
    ("glm4v-tiny.json", "", ("Glm4vForConditionalGeneration",)),
    ("phi-3.5-moe-instruct.json", "", ("PhimoeForCausalLM",)),
    ("qwen2-7b.json", "", ("Qwen2ForCausalLM",)),
    ("qwen1.5-moe-a2.7b.json", "", ("Qwen2MoeForCausalLM",)),
    ("qwen2-vl-tiny.json", "", ("Qwen2VLForConditionalGeneration",)),
    ("qwen2.5-vl-tiny.json", "", ("Qwen2_5_VLForConditionalGeneration",)),
    ("qwen3-8b.json", "", ("Qwen3ForCausalLM",)),
    ("flops/qwen3-moe-tiny.json", "", ("Qwen3MoeForCausalLM",)),
    ("qwen3-next-tiny.json", "", ("Qwen3NextForCausalLM",)),
    ("qwen3-vl-tiny.json", "", ("Qwen3VLForConditionalGeneration",)),
    ("qwen3.5-vl-tiny.json", "", ("Qwen3_5ForConditionalGeneration",)),
    ("qwen3.5-35b-a3b.json", "", ("Qwen3_5MoeForConditionalGeneration",)),
    ("param2moe-tiny.json", "", ("Glm4MoeForCausalLM",)),
    ("sarvam_moe-tiny.json", "", ("Glm4MoeForCausalLM",)),
    ("sarvam_mla-tiny.json", "", ("DeepseekV3ForCausalLM",)),
    ("axk1-tiny.json", "", ("AXK1ForCausalLM",)),
    ("axk2-tiny.json", "", ("AXK2ForCausalLM",)),
    ("dots3_note-tiny.json", "", ("Dots3NoteForCausalLM",)),
    ("persimmon-tiny.json", "", ("PersimmonForCausalLM",)),
    ("seed_oss-tiny.json", "", ("SeedOssForCausalLM",)),
    ("smollm3-tiny.json", "", ("SmolLM3ForCausalLM",)),
    ("solar_open-tiny.json", "", ("SolarOpenForCausalLM",)),
    ("smolvlm-tiny.json", "", ("SmolVLMForConditionalGeneration",)),
    ("stablelm-tiny.json", "", ("StableLmForCausalLM",)),
    ("stablelm-tiny-parallel.json", "", ("StableLmForCausalLM",)),
    ("starcoder2-tiny.json", "", ("Starcoder2ForCausalLM",)),
    ("starcoder2-tiny-dropout.json", "", ("Starcoder2ForCausalLM",)),
    ("vaultgemma-tiny.json", "", ("VaultGemmaForCausalLM",)),
    ("zamba2-tiny.json", "", ("Zamba2ForCausalLM",)),
    ("recurrent_gemma-tiny.json", "", ("RecurrentGemmaForCausalLM",)),
]


def default_class(raw, cfg):
    """The class a config's "architectures" names, else the Auto class's for its model_type."""
    cls = getattr(transformers, (raw.get("architectures") or [""])[0], None)
    if cls is not None:
        return cls
    for auto in (transformers.AutoModelForCausalLM, transformers.AutoModelForMaskedLM, transformers.AutoModel):
        if type(cfg) in auto._model_mapping:
            return auto._model_mapping[type(cfg)]
    raise ValueError("no model class for " + type(cfg).__name__)


def all_cases():
    """Every config under sim/testdata/hf (flops/ included), as the class default_class names."""
    cases = []
    for path in sorted(glob.glob(os.path.join(HF, "*.json")) + glob.glob(os.path.join(HF, "flops", "*.json"))):
        raw = json.load(open(path))
        cases.append((os.path.relpath(path, HF), "", (default_class(raw, transformers.AutoConfig.for_model(**raw)).__name__,)))
    return cases


def main():
    cases = all_cases() if "--all" in sys.argv else CASES

    for config, prefix, heads in cases:
        raw = json.load(open(os.path.join(HF, config)))
        cfg = transformers.AutoConfig.for_model(**raw)
        for head in heads:
            with torch.device("meta"):
                model = getattr(transformers, prefix + head)(cfg)
            first = {id(p): n for n, p in model.named_parameters()}
            print(json.dumps({
                "config": config, "arch": prefix + head,
                "params": {n: p.numel() for n, p in model.named_parameters()},
                "aliases": {n: first[id(p)] for n, p in model.named_parameters(remove_duplicate=False) if first[id(p)] != n},
                "modules": [n for n, _ in model.named_modules()],
                "transformers": transformers.__version__, "torch": torch.__version__.split("+")[0],
            }))


if __name__ == "__main__":
    main()
