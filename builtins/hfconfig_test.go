package builtins

import (
	"fmt"
	"strings"
	"testing"

	"github.com/memsh/memsh/builtins/host"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// hfFiles is a script folder for hf_config: tiny.json is GPT-2 shaped
// (hidden 64, 2 layers, vocab 100, 128 positions, tied): wte 6,400 + wpe
// 8,192 + 2 x 49,984 per block (ln 128 + c_attn 12,480 + c_proj 4,160 +
// ln 128 + c_fc 16,640 + c_proj 16,448) + ln_f 128 = 114,688.
var hfFiles = map[string]string{
	"tiny.json": `{"model_type": "gpt2", "n_embd": 64, "n_layer": 2, "n_head": 4, "n_positions": 128, "vocab_size": 100}`,
	"bert.json": `{"model_type": "bert", "architectures": ["BertForMaskedLM"], "hidden_size": 64, "intermediate_size": 256, "num_hidden_layers": 2,
		"num_attention_heads": 4, "vocab_size": 100, "max_position_embeddings": 128}`,
	"t5.json":     `{"model_type": "t5"}`,
	"broken.json": "{\n  \"model_type\": \"gpt2\",\n}",
	"nosize.json": `{"model_type": "gpt2", "n_embd": "64"}`,
}

func runHFCases(t *testing.T, cases []evalCase) {
	t.Helper()
	pre := Predeclared()
	for _, tc := range cases {
		t.Run(tc.expr, func(t *testing.T) {
			thread := &starlark.Thread{Name: "test"}
			(&host.State{ReadFile: func(from, name string, _ int64, _ string) ([]byte, error) {
				if s, ok := hfFiles[name]; ok && from == "test.star" {
					return []byte(s), nil
				}
				return nil, fmt.Errorf("cannot read %s: no such file", name)
			}}).Attach(thread)
			v, err := starlark.EvalOptions(&syntax.FileOptions{}, thread, "test.star", tc.expr, pre)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, %v; want error containing %q", v, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("error: %v", err)
			}
			if got := v.String(); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func TestHFConfig(t *testing.T) {
	// bert.json: word 6,400 + token types 128 + positions 8,192 + LN 128 +
	// 2 x 49,984 per layer + MLM transform 4,160 + LN 128 + decoder bias 100
	// = 119,204; BertModel drops the transform, its LN and the bias (4,388)
	// and adds the pooler (4,160): 118,976; with a 2-label classifier
	// (64 x 2 + 2): 119,106.
	runHFCases(t, []evalCase{
		{expr: `hf_config("tiny.json").params`, want: "114688"},
		{expr: `hf_config("tiny.json")`, want: `model("gpt2", params=114688)`},
		{expr: `hf_config("tiny.json", attn="eager").tie_embeddings`, want: "True"},
		// GPT2LMHeadModel holds GPT2Model as .transformer, which names its
		// parameters (transformer.h.0.attn...); GPT2Model alone does not.
		{expr: `[(l.kind, l.name) for l in hf_config("tiny.json").layers]`, want: `[("sequential", "transformer")]`},
		{expr: `[l.kind for l in hf_config("tiny.json").layers[0].children]`, want: `["embedding", "add_embedding", "dropout", "repeat", "layernorm"]`},
		{expr: `[l.kind for l in hf_config("tiny.json", arch="GPT2Model").layers]`, want: `["embedding", "add_embedding", "dropout", "repeat", "layernorm"]`},
		{expr: `hf_config("bert.json").params`, want: "119204"},
		{expr: `hf_config("bert.json", arch="BertModel").params`, want: "118976"},
		{expr: `hf_config("bert.json", arch="BertModel").loss`, want: `"none"`},
		{expr: `hf_config("bert.json", arch="BertForSequenceClassification").params`, want: "119106"},
		{expr: `hf_config("tiny.json", loss="flash_cross_entropy").loss`, want: `"flash_cross_entropy"`},
		{expr: `hf_config("tiny.json", loss="cross_entropy").loss`, want: `"cross_entropy"`},
		// flash-attn's cross-entropy saves the fp32 logits ([4, 32, 100],
		// 51,200 B) where cross_entropy saves their log_softmax (the same
		// bytes), and one fp32 log-sum-exp a row (128 x 4 = 512 B) where
		// cross_entropy saves its total weight (one fp32, 4 B): 508 B more
		{expr: `(lambda a, b: b - a)(*[simulate(train(hf_config("tiny.json", loss=l), batch=4, seq=32)).saved_activations for l in [None, "flash_cross_entropy"]])`, want: "508"},
	})
}

func TestHFConfigErrors(t *testing.T) {
	runHFCases(t, []evalCase{
		{expr: `hf_config()`, err: "missing argument for path"},
		{expr: `hf_config("missing.json")`, err: "cannot read missing.json: no such file"},
		{expr: `hf_config("t5.json")`, err: `unsupported model_type "t5" (supported: afmoe, apertus, apertus1p5_text, arcee, aria_text, axk1, axk2, bailing_hybrid, bamba, bert, bitnet, bloom, codegen, cohere, cohere2, cohere2_moe, cohere_compass_text, cwm, dbrx, deberta-v2, deepseek_v2, deepseek_v3, deepseek_v32, deepseek_v4, diffllama, dots1, dots3_note_text, ernie4_5, ernie4_5_moe, exaone, exaone4, exaone_moe, falcon`},
		{expr: `hf_config("broken.json")`, err: "malformed broken.json at line 3, column 1: invalid character '}' looking for beginning of object key string"},
		{expr: `hf_config("tiny.json", pad_labels="no")`, err: "pad_labels must be True, False or None (got string)"},
		{expr: `hf_config("tiny.json", position_ids=1)`, err: "position_ids must be True, False or None (got int)"},
		{expr: `hf_config("bert.json", arch="BertModel", pad_labels=True)`, err: `pad_labels=True needs a causal LM with loss="cross_entropy" (bert.json has loss "none")`},
		{expr: `hf_config("tiny.json", loss="mse")`, err: `loss must be "cross_entropy" or "flash_cross_entropy" (got "mse")`},
		{expr: `hf_config("bert.json", arch="BertModel", loss="flash_cross_entropy")`, err: `loss="flash_cross_entropy" needs a causal LM with loss "cross_entropy" (bert.json has loss "none")`},
		{expr: `hf_config("tiny.json", loss="flash_cross_entropy", pad_labels=True)`, err: `pad_labels=True needs a causal LM with loss="cross_entropy" (tiny.json has loss "flash_cross_entropy")`},
		{expr: `hf_config("tiny.json", forward_upcast="yes")`, err: "forward_upcast must be True, False or None (got string)"},
		{expr: `hf_config("nosize.json")`, err: `nosize.json: "n_embd" must be an integer (got the string "64")`},
		{expr: `hf_config("tiny.json", attn="xformers")`, err: `attn must be "eager", "sdpa" or "flash" (got "xformers")`},
		{expr: `hf_config("tiny.json", arch=3)`, err: "arch must be a model class name"},
		{expr: `hf_config("tiny.json", arch="GPT2ForMaskedLM")`, err: `model class "GPT2ForMaskedLM" is not supported for model_type "gpt2" (supported: GPT2LMHeadModel, GPT2Model)`},
	})
}
