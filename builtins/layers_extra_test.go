package builtins

import "testing"

func TestExtraLayers(t *testing.T) {
	runEvalCases(t, []evalCase{
		// 1024 positions x 768: GPT-2's wpe.
		{expr: `add_embedding(1024, 768, max_seq = 1024, name = "wpe").params`, want: "786432"},
		{expr: `add_embedding(2, 768, per_sample = True).kind`, want: `"add_embedding"`},
		{expr: `scale(55.4).params`, want: "0"},
		// 768 x 768 + 768.
		{expr: `pooler(768).params`, want: "590592"},
		// GPT-NeoX block at hidden 64: 2 layer norms (256) + qkv 64x192+192 +
		// dense 64x64+64 + mlp 64x256+256 + 256x64+64 = 49,984.
		{expr: `residual(parallel(sequential(layernorm(64), attention(64, 4, qkv_bias = True, out_bias = True)), sequential(layernorm(64), mlp(64, 256, bias = True)))).params`, want: "49984"},
		{expr: `model("m", embedding(10, 8), scale(2.0), linear(8, 8), vocab = 10, tie_embeddings = True, head_bias = True).params`, want: "154"},
	})
}

func TestExtraLayerErrors(t *testing.T) {
	runEvalCases(t, []evalCase{
		{expr: `add_embedding(0, 768)`, err: "rows must be positive (got 0)"},
		{expr: `add_embedding(1024, 768, max_seq = 0)`, err: "max_seq must be positive (got 0)"},
		{expr: `add_embedding(2, 768, buffer = "token_type_ids")`, err: "buffer and buffer_len go together"},
		{expr: `add_embedding(2, 768, buffer_len = 512)`, err: "buffer and buffer_len go together"},
		{expr: `add_embedding(512, 768, buffer_ids = True)`, err: "buffer_ids=True needs the buffer"},
		{expr: `add_embedding(1024, 768, max_seq = 2048)`, err: "max_seq must be in 0..rows (rows=1024, max_seq=2048)"},
		{expr: `parallel()`, err: "parallel needs at least one branch"},
		{expr: `parallel(3)`, err: "branches[0] must be a layer (got int)"},
		{expr: `scale(0)`, err: "scale factor must be positive (got 0)"},
		{expr: `scale("x")`, err: "factor must be"},
		{expr: `pooler(-1)`, err: "dim must be positive (got -1)"},
		{expr: `model("m", linear(8, 8), head_bias = True)`, err: "head_bias needs vocab="},
		{expr: `model("m", linear(8, 8), head_name = "decoder")`, err: "head_name needs vocab="},
		{expr: `model("m", embedding(10, 8), vocab = 10, head_name = "")`, err: "head_name: name must not be empty"},
	})
}
