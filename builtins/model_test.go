package builtins

import "testing"

// llamaPrelude builds Llama-2-7B (hidden 4096, 32 layers, 32 heads, ffn
// 11008, vocab 32000, untied): 6,738,415,616 parameters, as
// sum(p.numel() for p in LlamaForCausalLM.parameters()) gives.
const llamaPrelude = `
dim = 4096
block = sequential(
    residual(sequential(rmsnorm(dim), attention(dim, 32, rope = True))),
    residual(sequential(rmsnorm(dim), mlp(dim, 11008, act = "swiglu"))),
)
llama = model("llama-2-7b", embedding(32000, dim), repeat(block, 32), rmsnorm(dim), vocab = 32000)
tiny = model("tiny", embedding(100, 8), linear(8, 8), vocab = 100)
tied = model("tied", embedding(100, 8), linear(8, 8), vocab = 100, tie_embeddings = True)
`

func TestModel(t *testing.T) {
	runPreludeCases(t, llamaPrelude, []evalCase{
		{expr: "llama.params", want: "6738415616"},
		{expr: "llama", want: `model("llama-2-7b", params=6738415616)`},
		{expr: "llama.name", want: `"llama-2-7b"`},
		{expr: "llama.vocab", want: "32000"},
		{expr: "llama.loss", want: `"cross_entropy"`},
		{expr: "llama.tie_embeddings", want: "False"},
		{expr: "len(llama.layers)", want: "3"},
		{expr: "llama.layers[1].params", want: "6476267520"},
		{expr: "type(llama)", want: `"model"`},
		// 100*8 embedding + 8*8 linear + 8*100 head; tied: the head once.
		{expr: "tiny.params", want: "1664"},
		{expr: "tied.params", want: "864"},
		{expr: "model(\"m\", [linear(8, 8), linear(8, 4)]).params", want: "96"},
		{expr: "model(\"m\", linear(8, 8), loss = \"mse\").vocab", want: "None"},
		{expr: "model(\"m\", act(\"relu\"), input_dim = 8).params", want: "0"},
		{expr: "llama.describe().params", want: "6738415616"},
		{expr: "type(llama.describe())", want: `"module_table"`},
		{expr: "[r.kind for r in tiny.describe().rows]", want: `["embedding", "linear", "linear"]`},
		{expr: "[r.params for r in tied.describe().rows]", want: "[800, 64, 0]"},
		{expr: "tiny.describe().rows[2].path", want: `"lm_head"`},
	})
}

func TestModelErrors(t *testing.T) {
	runEvalCases(t, []evalCase{
		{expr: `model()`, err: "model needs a name and layers"},
		{expr: `model(3, linear(8, 8))`, err: "model name must be a string (got int)"},
		{expr: `model("m")`, err: "model has no layers"},
		{expr: `model("m", 3)`, err: "layers[0] must be a layer (got int)"},
		{expr: `model("m", embedding(100, 8), linear(16, 8))`, err: "linear expects inputs with 16 features but the previous layer gives 8"},
		{expr: `model("m", act("relu"))`, err: "cannot tell the input width of the first layer"},
		{expr: `model("m", linear(8, 8), loss="l1")`, err: `unknown loss "l1" (known: cross_entropy, flash_cross_entropy, mse, none)`},
		{expr: `model("m", linear(8, 8), vocab=0)`, err: "vocab must be positive (got 0)"},
		{expr: `model("m", linear(8, 8), input_dim=-8)`, err: "input_dim must be positive (got -8)"},
		{expr: `model("m", linear(8, 8), tie_embeddings=True)`, err: "tie_embeddings needs vocab="},
		{expr: `model("m", linear(8, 8), vocab=10, tie_embeddings=True)`, err: "tie_embeddings needs an embedding"},
		{expr: `model("m", embedding(100, 8), linear(8, 4), vocab=100, tie_embeddings=True)`,
			err: "tie_embeddings needs the output head (vocab 100 x width 4) to have the embedding's shape (100 x 8)"},
		{expr: `model("m", linear(8, 8), logits_fp32=1)`, err: "logits_fp32 must be True, False or None"},
		{expr: `model("m", linear(8, 8), bias=True)`, err: "unexpected keyword argument \"bias\""},
		{expr: `model("m", linear(8, 8), position_ids=True)`, err: "position_ids=True needs a repeat() of layers to hand them to"},
		{expr: `model("m", linear(8, 8), position_ids=1)`, err: "position_ids"},
		{expr: `model("m", linear(8, 8), pad_labels=True)`, err: `pad_labels needs vocab= and loss="cross_entropy"`},
		{expr: `model("m", embedding(100, 8), vocab=100, loss="flash_cross_entropy", pad_labels=True)`, err: `got loss="flash_cross_entropy"`},
		{expr: `model("m", embedding(100, 8), vocab=100, pad_labels="yes")`, err: "pad_labels"},
	})
}
