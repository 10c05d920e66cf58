package importers

import (
	"strconv"
	"strings"

	"github.com/memsh/memsh/sim/hf"
)

// hfTransformers is the job's transformers release, memsh.transformers
// ("4.57.1"), and its major; "" and 5 when absent: hf_config's default
// release, a 5.x.
func hfTransformers(t *tree) (string, int, error) {
	const key, hint = "memsh.transformers", "the job's whole release, as pip show transformers prints it: memsh.transformers=4.57.1"
	raw, _ := t.get(key)
	if raw == nil {
		return "", 5, nil
	}
	v, ok := raw.(string)
	if !ok { // 4.50 read as a number would be 4.5
		return "", 0, t.errorf(key, hint, "want a transformers release such as 4.57.1, got %s", describe(raw))
	}
	parts := strings.Split(v, ".")
	major, err := strconv.Atoi(parts[0])
	ok = len(parts) >= 2 && len(parts) <= 3 && err == nil && (major == 4 || major == 5)
	for _, part := range parts[1:] {
		n, err := strconv.Atoi(part)
		ok = ok && err == nil && n >= 0 && n <= 1000
	}
	if !ok {
		return "", 0, t.errorf(key, hint, "want a transformers 4.x or 5.x release, got %s", quoteKey(v))
	}
	if hf.ReleaseAfterNewest(v) {
		return "", 0, t.errorf(key, "memsh has read transformers' wheels up to "+hf.DefaultTransformers+": memsh.transformers="+hf.DefaultTransformers+" models the run as that release does, or leave the key out",
			"transformers %s is newer than the releases memsh models", quoteKey(v))
	}
	return v, major, nil
}

// hfPrecision is the Trainer's autocast (bf16, fp16) over the weights
// the model was loaded in: torch_dtype (or dtype, its later name; TRL's
// ModelConfig), else what from_pretrained loads (hfLoadedDtype).
// qlora says the model is quantized and its norms upcast to fp32
// (hfRun.kbitNormsFP32).
func hfPrecision(t *tree, o Options, p *plan, qlora bool) error {
	bf16, err := t.boolean("bf16", false)
	if err != nil {
		return err
	}
	fp16, err := t.boolean("fp16", false)
	if err != nil {
		return err
	}
	key := "torch_dtype"
	dtype, err := t.str(key, "")
	if err != nil {
		return err
	}
	if d, err := t.str("dtype", ""); err != nil {
		return err
	} else if d != "" {
		dtype, key = d, "dtype"
	}
	switch dtype {
	case "", "auto", "bfloat16", "float16", "float32":
	default:
		return t.errorf(key, "bfloat16, float16, float32 or auto", "unknown dtype %s", quoteKey(dtype))
	}
	from := key + " " + dtype // where the dtype comes from, for the errors below
	if dtype == "" || dtype == "auto" {
		if dtype, from, err = hfLoadedDtype(t, o, dtype); err != nil {
			return err
		}
	}
	switch {
	case bf16 && fp16:
		return t.errorf("bf16", "the Trainer refuses both: keep one", "and fp16 are both true")
	case dtype == "bfloat16" && fp16:
		return t.errorf("fp16", "fp16 autocast over bf16 weights: use bf16: true", "with %s", from)
	case dtype == "float16" && fp16 && !p.has("lora"):
		// the Trainer's GradScaler refuses fp16 gradients at its first
		// unscale_ (torch/amp/grad_scaler.py: "Attempting to unscale FP16
		// gradients."); LoRA's adapters are fp32 (PEFT's
		// autocast_adapter_dtype), so their gradients are not
		return t.errorf("fp16", "load the weights in float32 (torch_dtype: float32), train LoRA adapters, or use bf16: true with bfloat16 weights",
			"with %s: the GradScaler refuses to unscale fp16 gradients (torch: \"Attempting to unscale FP16 gradients.\")", from)
	case (dtype == "bfloat16" || bf16) && qlora:
		// peft's prepare_model_for_kbit_training upcasts the weights it does
		// not quantize, peft_module_casting_to_bf16 casts embeddings and
		// lm_head back: the norms stay fp32 (memsh doc precision)
		p.set("precision", call("precision", kw("params", str("bf16")), kw("autocast", "True"), kw("norms", str("fp32"))))
	case dtype == "bfloat16":
		p.set("precision", str("bf16")) // the weights, grads and AdamW state in bf16; autocast changes nothing
	case dtype == "float16":
		p.set("precision", str("fp16"))
	case bf16:
		p.set("precision", str("bf16-mixed"))
	case fp16:
		p.set("precision", str("fp16-mixed"))
	default:
		p.set("precision", str("fp32"))
	}
	return nil
}

// hfLoadedDtype is the dtype from_pretrained loads the model in when the
// run does not say one (set, "auto"): transformers 4.x loads float32
// (torch's default dtype), transformers 5 and "auto" under either the
// checkpoint's own, the "dtype" key of the model's config.json (or
// "torch_dtype", its name before 4.56) when it has one (modeling_utils.py
// _get_dtype: "Will use dtype=... as defined in model's config object"),
// else the weights' (which memsh cannot read). A zoo model's checkpoint
// dtype is its Hub config.json's (zooCheckpointDtype); without a
// config.json otherwise the weights are float32 and the guess listed as
// not modelled. from names where the dtype comes from.
func hfLoadedDtype(t *tree, o Options, set string) (dtype, from string, err error) {
	_, major, err := hfTransformers(t)
	if err != nil {
		return "", "", err
	}
	if set == "" && major == 4 {
		return "float32", "transformers 4.x's float32", nil
	}
	what := "torch_dtype: auto loads the checkpoint's own dtype"
	if set == "" {
		what = "torch_dtype: unset, so transformers 5 loads the checkpoint's own dtype (4.x float32: memsh.transformers=4.57.1 says a 4.x run)"
	}
	if o.ModelData == nil {
		name, _ := t.str("model_name_or_path", "")
		if m, ok := hfModels[name]; ok && o.Model == "" {
			d := zooCheckpointDtype(m)
			return d, name + "'s checkpoint dtype " + d, nil
		}
		t.notModelled = append(t.notModelled, what+", which memsh reads as float32 without the model's config.json: pass --model config.json, or set torch_dtype (or dtype)")
		return "", "", nil
	}
	text, _ := hf.PythonJSON(o.ModelData) // a Mamba-2 config.json's Infinity; a NaN dtype named, not read as absent
	mt, err := parseJSON(o.Model, text)
	if err != nil {
		return "", "", err
	}
	for _, key := range []string{"dtype", "torch_dtype"} {
		d, err := mt.str(key, "")
		if err != nil {
			return "", "", err
		}
		switch d {
		case "":
			continue
		case "bfloat16", "float16", "float32":
			return d, o.Model + "'s " + key + " " + d, nil
		}
		return "", "", mt.errorf(key, "memsh models bfloat16, float16 and float32 weights: set torch_dtype (or dtype) in the training config",
			"the model's dtype %s is not modelled", quoteKey(d))
	}
	t.notModelled = append(t.notModelled, what+": "+o.Model+" has no dtype (or torch_dtype), so transformers reads the weights' own, which memsh reads as float32: set torch_dtype (or dtype) to say which")
	return "", "", nil
}

// zooCheckpointDtype is the dtype the Hub's config.json of a zoo model's
// checkpoints says (torch_dtype), which from_pretrained loads under
// transformers 5 or dtype "auto": float16 for Llama 2 (meta-llama's
// Llama-2-*-hf, sim/testdata/hf/llama-2-7b.json, llama-2-70b.json),
// bfloat16 for every other model hfModels names (Llama 3, 3.1, 3.2 and
// 3.3, Mistral 7B, Gemma, Qwen2, Qwen2.5, Qwen3, Phi-3-mini, Phi-4:
// llama-3-8b.json, llama-3.1-70b.json, mistral-7b-v0.1.json, gemma-7b.json,
// qwen2-7b.json, qwen3-8b.json, phi-3-mini-4k.json there).
func zooCheckpointDtype(m zooModel) string {
	if m.fn == "llama" && (m.size == "7b" || m.size == "13b" || m.size == "70b") {
		return "float16"
	}
	return "bfloat16"
}
