package builtins

import (
	"testing"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/builtins/models"
	"github.com/memsh/memsh/sim/nn"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// Parameter counts are hand-checked: nn.Linear is in*out (+out), q/k/v/o
// projections are dim*heads*head_dim and dim*kv_heads*head_dim, gated MLPs
// have three dim*hidden matrices.
func TestLayerParams(t *testing.T) {
	runEvalCases(t, []evalCase{
		{expr: "linear(4096, 11008).params", want: "45088768"},
		{expr: "linear(768, 3072, bias=True).params", want: "2362368"},
		{expr: "linear(in_features=8, out_features=4).params", want: "32"},
		{expr: "linear(8e0, 4).params", want: "32"},
		{expr: "embedding(32000, 4096).params", want: "131072000"},
		{expr: "layernorm(768).params", want: "1536"},
		{expr: "layernorm(768, bias=False).params", want: "768"},
		{expr: "rmsnorm(4096).params", want: "4096"},
		// Llama-2-7B attention: 4 * 4096².
		{expr: "attention(4096, 32).params", want: "67108864"},
		// Llama-3-8B: 8 kv heads of 128: 2 * 4096² + 2 * 4096 * 1024.
		{expr: "attention(4096, 32, kv_heads=8).params", want: "41943040"},
		// GPT-2 small c_attn + c_proj with biases: 4 * 768² + 3 * 768 + 768.
		{expr: "attention(768, 12, qkv_bias=True, out_bias=True).params", want: "2362368"},
		// Gemma-2B: 8 heads of 256, one kv head: 2 * 2048² + 2 * 2048 * 256.
		{expr: "attention(2048, 8, kv_heads=1, head_dim=256).params", want: "9437184"},
		{expr: "mlp(4096, 11008, act=\"swiglu\").params", want: "135266304"},
		{expr: "mlp(768, 3072, bias=True).params", want: "4722432"},
		// Jamba-1.5-Mini's Mamba layer (sim/hfconfig_test.go derives it).
		{expr: "mamba(4096, dt_rank=256).params", want: "105308448"},
		// dt_rank ceil(64/16) = 4: in_proj 64*256, conv 128*4 + 128, x_proj
		// 128*36, dt_proj 4*128 + 128, A_log 128*16, D 128, out_proj 128*64,
		// norms 4 + 2*16.
		{expr: "mamba(64).params", want: "32676"},
		// Mixtral: router 4096 * 8 + 8 experts of 3 * 4096 * 14336.
		{expr: "moe(4096, 14336, 8, 2).params", want: "1409318912"},
		{expr: "moe(64, 128, 4, 1, shared_experts=1).params", want: "123136"},
		{expr: "moe(64, 128, 4, 1, shared_experts=2, shared_hidden=32).params", want: "110848"},
		// the storage changes what quant= and lora= reach, not the count
		{expr: "moe(4096, 14336, 8, 2, impl=\"grouped\").params", want: "1409318912"},
		{expr: "moe(64, 128, 4, 1, impl=\"fused_loop\").params", want: "98560"},
		{expr: "moe(64, 128, 4, 1, impl=\"fused_loop\", clamped_glu=True).params", want: "98560"},
		// AFMoE's attention: q, k, v, o (4 * 64²), gate_proj (64²), q_norm
		// and k_norm (2 * 16); its experts: router 64 * 8, 8 experts of 3 *
		// 64 * 32, expert_bias 8.
		{expr: `attention(64, 4, qk_norm="olmo2_head", output_gate="gate_proj").params`, want: "20512"},
		{expr: `moe(64, 32, 8, 2, router="sigmoid", score_bias="parameter").params`, want: "49672"},
		{expr: `moe(64, 32, 8, 2, router="sigmoid", score_bias=True).params`, want: "49664"},
		{expr: "dropout(0.1).params", want: "0"},
		{expr: "act(\"gelu\").kind", want: `"act"`},
		{expr: "sequential(rmsnorm(8), linear(8, 8)).params", want: "72"},
		{expr: "sequential([linear(8, 8), linear(8, 8)]).params", want: "128"},
		{expr: "repeat(linear(8, 8), 3).params", want: "192"},
		{expr: "residual(linear(8, 8)).params", want: "64"},
		{expr: "len(repeat(linear(8, 8), 3).children)", want: "1"},
	})
}

func TestLayerValues(t *testing.T) {
	runEvalCases(t, []evalCase{
		{expr: "linear(4096, 11008)", want: "linear(4096 -> 11008, params=45088768)"},
		{expr: "linear(8, 8, name=\"q\").name", want: `"q"`},
		{expr: "linear(8, 8).name", want: "None"},
		{expr: "type(rmsnorm(8))", want: `"layer"`},
		{expr: "rmsnorm(8).kind", want: `"rmsnorm"`},
		{expr: "attention(64, 4, name=\"attn\")", want: `attention(dim 64, 4 heads, flash, name="attn", params=16384)`},
		{expr: "repeat(linear(8, 8), 3, name=\"layers\")", want: `repeat(3 x linear, name="layers", params=192)`},
	})
}

func TestLayerErrors(t *testing.T) {
	runEvalCases(t, []evalCase{
		{expr: "attention(4096, 24)", err: "attention: heads must divide dim (dim=4096, heads=24)"},
		{expr: "attention(64, 4, impl=\"flash2\")", err: `unknown attention impl "flash2" (known: flash, sdpa, flex, eager)`},
		{expr: "attention(64, 4, kv_heads=3)", err: "kv_heads must divide heads (heads=4, kv_heads=3)"},
		{expr: "attention(64, 4, kv_heads=0)", err: "kv_heads must be positive (got 0)"},
		{expr: "attention(64, 4, head_dim=-1)", err: "head_dim must be positive (got -1)"},
		{expr: `attention(64, 4, kv_heads=2, impl="eager", enable_gqa=True)`, err: `enable_gqa=True is scaled_dot_product_attention's argument, and impl is "eager"`},
		{expr: "attention(64, 4, dropout=1.0)", err: "dropout must be in [0, 1) (got 1)"},
		{expr: "attention(64, 4, fused_qkv=1)", err: "fused_qkv must be True, False or None (got int)"},
		{expr: `attention(64, 4, rope_tables="rotary_emb")`, err: `attention: rope_tables="rotary_emb" needs rope=True`},
		{expr: `attention(64, 4, rope_cat=True)`, err: `attention: rope_cat=True needs rope=True`},
		{expr: `mla(64, 4, 16, rope_tables="")`, err: `mla: rope_tables must name the rotary module, e.g. "rotary_emb" (got ""; None for no tables)`},
		{expr: `gemma4_attention(64, 4, 2, 16, rope_tables=1)`, err: `gemma4_attention: rope_tables must name the rotary module, e.g. "rotary_emb" (got 1; None for no tables)`},
		{expr: `attention(64, 4, qk_norm="llama")`, err: `attention: qk_norm must be True, False, "gemma", "olmo2_head", "olmo2" or "olmoe" (got "llama")`},
		{expr: `attention(64, 4, output_gate="q_proj")`, err: `attention: output_gate must be True, False or "gate_proj" (got "q_proj")`},
		{expr: `attention(64, 4, output_gate="gate_proj", fused_qkv=True)`, err: `output_gate="gate_proj" is modelled with separate q, k and v projections`},
		{expr: `attention(64, 4, qk_norm="olmo2_head", output_gate=True)`, err: `OLMo 2's RMSNorm over each head (qk_norm="olmo2_head") is modelled alone, without output_gate=True`},
		{expr: `moe(64, 32, 8, 2, score_bias="parameter")`, err: `moe: score_bias="parameter" is the sigmoid router's selection bias (router="sigmoid"; got router="softmax")`},
		{expr: `moe(64, 32, 8, 2, router="sigmoid", score_bias="buffer")`, err: `moe: score_bias must be True, False or "parameter" (got "buffer")`},
		{expr: `moe(64, 32, 8, 2, act="gelu", clamped_glu=True)`, err: `moe: clamped_glu is gpt-oss's gate over the gated halves of each expert (act="swiglu", not impl="dense_bmm"; got act="gelu", impl="loop")`},
		{expr: `attention(64, 4, rope=True, rope_dim=8)`, err: `attention: rope_dim and mrope shape the rotary tables, which need rope_tables="rotary_emb"`},
		{expr: `attention(64, 4, rope=True, rope_tables="rotary_emb", rope_dim=7)`, err: `attention: rope_dim must be an even number of dimensions up to head_dim 16 (got 7)`},
		{expr: `attention(64, 4, rope=True, rope_tables="")`, err: `attention: rope_tables must name the rotary module, e.g. "rotary_emb" (got ""; None for no tables)`},
		{expr: `attention(64, 4, rope=True, rope_tables=1)`, err: `attention: rope_tables must name the rotary module, e.g. "rotary_emb" (got 1; None for no tables)`},
		{expr: "linear(0, 8)", err: "in_features must be positive (got 0)"},
		{expr: "linear(\"8\", 8)", err: "in_features must be an int (got string)"},
		{expr: "linear(8.5, 8)", err: "in_features must be a whole number (got 8.5)"},
		{expr: "linear(8, 8, name=\"\")", err: "name must not be empty"},
		{expr: "linear(8, 8, name=3)", err: "name must be a string or None (got int)"},
		{expr: "embedding(-1, 8)", err: "rows must be positive (got -1)"},
		{expr: "rmsnorm(0)", err: "dim must be positive (got 0)"},
		{expr: "mlp(64, 256, act=\"gelu2\")", err: `unknown mlp activation "gelu2"`},
		{expr: "moe(64, 256, 8, 9)", err: "top_k (9) must be at most experts (8)"},
		{expr: "moe(64, 256, 8, 2, shared_experts=-1)", err: "shared_experts must not be negative"},
		{expr: "moe(64, 256, 8, 2, capacity=0.5)", err: "capacity must be at least 1.0 (got 0.5)"},
		{expr: "moe(64, 256, 8, 2, impl=\"scatter\")", err: `unknown moe impl "scatter" (known: loop, fused_loop, grouped, grouped_mm, dense_bmm, sequential)`},
		{expr: "moe(64, 256, 8, 2, router=\"argmax\")", err: `unknown moe router "argmax"`},
		{expr: "moe(64, 256, 8, 2, imbalance=2)", err: "unexpected keyword argument \"imbalance\""},
		{expr: "mamba(64, expand=0)", err: "expand x dim must be positive"},
		{expr: "mamba(64, dt_rank=0)", err: "dt_rank must be positive (got 0)"},
		{expr: "dropout(1.5)", err: "dropout probability must be in [0, 1) (got 1.5)"},
		{expr: "act(\"swish\")", err: `unknown activation "swish"`},
		{expr: "sequential()", err: "sequential needs at least one layer"},
		{expr: "sequential(1)", err: "layers[0] must be a layer (got int)"},
		{expr: "sequential(linear(8, 8), name=\"\")", err: "name must not be empty"},
		{expr: "repeat(linear(8, 8), 0)", err: "repeat count must be positive (got 0)"},
		{expr: "repeat(8, 2)", err: "layer must be a layer (got int)"},
		{expr: "residual(None)", err: "layer must be a layer (got NoneType)"},
	})
}

// TestAttentionDefaults checks the documented defaults of fused_qkv (off
// with rope or grouped-query attention) and softmax_fp32 (follows rope).
func TestAttentionDefaults(t *testing.T) {
	pre := Predeclared()
	for _, tc := range []struct {
		expr          string
		fused, smFP32 bool
		kv            int64
	}{
		{"attention(64, 4)", true, false, 0},
		{"attention(64, 4, kv_heads=4)", true, false, 4},
		{"attention(64, 4, kv_heads=2)", false, false, 2},
		{"attention(64, 4, rope=True)", false, true, 0},
		{"attention(64, 4, rope=True, fused_qkv=True, softmax_fp32=False)", true, false, 0},
		{"attention(64, 4, fused_qkv=False, softmax_fp32=True)", false, true, 0},
	} {
		t.Run(tc.expr, func(t *testing.T) {
			thread := &starlark.Thread{}
			(&host.State{}).Attach(thread)
			v, err := starlark.EvalOptions(&syntax.FileOptions{}, thread, "test.star", tc.expr, pre)
			if err != nil {
				t.Fatal(err)
			}
			a := v.(*models.Layer).Sim().(*nn.Attention)
			if a.FusedQKV != tc.fused || a.SoftmaxFP32 != tc.smFP32 || a.KVHeads != tc.kv || a.Impl != "flash" || !a.Causal {
				t.Errorf("got %+v", a)
			}
			if a.Dim != 64 || a.Heads != 4 || a.HeadDim != 0 {
				t.Errorf("sizes: %+v", a)
			}
		})
	}
}

// TestLayerDecl checks that layers record the constructor's position.
func TestLayerDecl(t *testing.T) {
	thread := &starlark.Thread{}
	(&host.State{}).Attach(thread)
	g, err := starlark.ExecFileOptions(&syntax.FileOptions{}, thread, "m.star", "x = 1\nl = linear(8, 8)\n", Predeclared())
	if err != nil {
		t.Fatal(err)
	}
	if got := host.PosString(g["l"].(*models.Layer).Decl()); got != "m.star:2:11" {
		t.Errorf("decl = %s, want m.star:2:11", got)
	}
}
