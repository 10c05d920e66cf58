package importers

import "testing"

// pyFlexHF is the note of flex with the model's config.json.
const pyFlexHF = "model_spec.attn_backend: flex, model_registry's default (memsh replays it as flash-attn's kernel: " +
	"the same saved set (sim/flex_attention_test.go), flash-attn's backward workspaces)"

// TestTorchtitanPyAttention maps model_registry's attn_backend as
// get_attention_config does (models/common/config_utils.py at
// b5bcd76c6): flex (the default) and flex_flash to memsh's compiled
// FlexAttention, varlen to flash-attn's varlen kernel (memsh's flash),
// and, with the model's config.json, flash for both flex backends
// (hf_config takes transformers' kernels; FlexAttention's saved set is
// flash-attn's).
func TestTorchtitanPyAttention(t *testing.T) {
	const flexFlash = "model_spec.attn_backend: flex_flash, FlexAttention's FLASH backend (flash-attn's CuTe kernel, replayed with the Triton backend's workspaces; " +
		"memsh prices its kernel as flash-attn's over one causal row a sequence, train(doc_tokens=) per document, and leaves out its BlockMask's int32 tensors)"
	const tail = `batch = 2, seq = 8192, grad_accum = 8, precision = "bf16", optimizer = adamw(fused = True),
             gpu = "H100-80GB", parallel = parallel(dp = 8, fsdp = True), clip_grad_norm = 1.0)`
	override := func(backend string) Options {
		return Options{Function: "llama3_8b_no_ac", GPUs: 8, Overrides: []string{"model_spec.attn_backend=" + backend}}
	}
	noAC := torchtitanPyStep(4*2*8192*16, 2*8192, 1, 8) // llama3_8b_no_ac's, as TestTorchtitanPy's
	withModel := override("flex")
	withModel.Model = "llama-3-8b.json"
	runImportCases(t, []importCase{{
		name: "varlen: flash-attn's varlen kernel",
		file: pyRecipes,
		step: noAC,
		opts: override("varlen"),
		hand: `load("@stdlib//llm.star", "llama")` + "\n" + `plan = train(llama("llama3-8b", pad_labels = False, position_ids = False, attn = "flash"), ` + tail,
	}, {
		name:        "flex_flash: FlexAttention's FLASH backend",
		file:        pyRecipes,
		step:        noAC,
		opts:        override("flex_flash"),
		notModelled: []string{flexFlash},
		hand:        pyLlama8B + tail,
	}, {
		name:        "flex with the model's config.json: hf_config's flash",
		file:        pyRecipes,
		step:        noAC,
		opts:        withModel,
		files:       map[string]string{"llama-3-8b.json": "../../sim/testdata/hf/llama-3-8b.json"},
		notModelled: []string{pyFlexHF},
		hand:        `plan = train(hf_config("llama-3-8b.json", pad_labels = False, position_ids = False, attn = "flash"), ` + tail,
	}})
	const head = "from torchtitan.models.llama3 import model_registry\nfrom torchtitan.components.loss import CrossEntropyLoss\nfrom torchtitan.trainer import Trainer\n"
	config := func(backend string) string {
		return head + "def f():\n    return Trainer.Config(\n        model_spec=model_registry(\"8B\", attn_backend=\"" + backend + "\"),\n        loss=CrossEntropyLoss.Config(),\n    )\n"
	}
	runErrorCases(t, []errorCase{{
		name: "sdpa, which torchtitan refuses for language models", file: "x.py", opts: Options{Function: "f", GPUs: 8}, config: config("sdpa"),
		want:     "x.py:6: key model_spec.attn_backend: sdpa is no longer supported for language models; positions are always available so use flex, flex_flash, or varlen.",
		wantHint: `set attn_backend="flex"`,
	}, {
		name: "a backend torchtitan does not know", file: "x.py", opts: Options{Function: "f", GPUs: 8}, config: config("flash"),
		want: "x.py:6: key model_spec.attn_backend: Unknown backend: flash", wantHint: `"flex", "flex_flash" and "varlen"`,
	}})
}
