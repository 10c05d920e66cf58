package builtins

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/builtins/models"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"github.com/memsh/memsh/sim/units"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// llama4_attention's weights, counted by hand: q_proj dim x heads*head_dim,
// k_proj and v_proj dim x kv*head_dim, o_proj heads*head_dim x dim; the L2
// norm has no weight, the NoPE layers' temperature tuning none either.
func TestLlama4Attention(t *testing.T) {
	runEvalCases(t, []evalCase{
		// 64*64 + 2*64*32 + 64*64 = 12,288.
		{expr: `llama4_attention(64, 4, 2, head_dim = 16).params`, want: "12288"},
		{expr: `llama4_attention(64, 4, 2, head_dim = 16, rope = False).params`, want: "12288"},
		{expr: `llama4_attention(64, 4, 2, head_dim = 16, chunk = 32, impl = "eager").params`, want: "12288"},
		// attention_bias: 64 + 32 + 32 on q, k, v and 64 on o_proj.
		{expr: `llama4_attention(64, 4, 2, head_dim = 16, bias = True).params`, want: "12480"},
		// Llama4TextConfig's head_dim, 128: 64*512 + 2*64*256 + 512*64.
		{expr: `llama4_attention(64, 4, 2).params`, want: "98304"},
		{expr: `llama4_attention(64, 4, 2).kind`, want: `"attention"`},
		{expr: `llama4_attention(64, 4, 2).name`, want: `"self_attn"`},
		{expr: `llama4_attention(64, 4, 2, name = "attn").name`, want: `"attn"`},
	})
}

// TestLlama4AttentionErrors: each refusal names the keyword and, where
// there is one, gives the hint the user sees under the error.
func TestLlama4AttentionErrors(t *testing.T) {
	pre := Predeclared()
	for _, tc := range []struct{ expr, err, hint string }{
		{`llama4_attention(64, 4, 2, impl = "flash")`,
			`llama4_attention: impl="flash": transformers has no flash-attention 2 path for Llama 4 (Llama4PreTrainedModel._supports_flash_attn is False)`,
			`use impl="sdpa" (transformers' default), "eager", or "flex"`},
		{`llama4_attention(64, 4, 2, impl = "xla")`, `llama4_attention: unknown impl "xla"`, `impl is "sdpa", "eager" or "flex"`},
		{`llama4_attention(64, 4, 2, impl = "eager", enable_gqa = True)`,
			`llama4_attention: enable_gqa=True is scaled_dot_product_attention's argument, and impl is "eager"`, `leave enable_gqa out with impl="eager"`},
		{`llama4_attention(64, 4, 2, chunk = 0)`, `llama4_attention: chunk must be positive (got 0)`, `chunk is attention_chunk_size`},
		{`llama4_attention(64, 4, 2, head_dim = -1)`, `llama4_attention: head_dim must be positive (got -1)`, `sizes are counts`},
		{`llama4_attention(64, 0, 2)`, `llama4_attention: heads must be positive (got 0)`, `sizes are counts`},
		{`llama4_attention(64, 4, 2, chunk = 1 << 30)`, `llama4_attention: chunk=1073741824 is larger than memsh simulates (at most 1048576)`, `chunks of 8192`},
		{`llama4_attention(64, 4, 3, head_dim = 16)`, `kv_heads must divide heads (heads=4, kv_heads=3)`, ""},
		{`llama4_attention(64, 4, 2, dropout = 1.0)`, `dropout must be in [0, 1) (got 1)`, ""},
		{`llama4_attention(64, 4, 2, chunk = "8k")`, `chunk`, ""},
		{`llama4_attention(64, 4, 2, enable_gqa = 1)`, `enable_gqa must be True, False or None (got int)`, ""},
	} {
		t.Run(tc.expr, func(t *testing.T) {
			thread := &starlark.Thread{Name: "test"}
			(&host.State{}).Attach(thread)
			v, err := starlark.EvalOptions(&syntax.FileOptions{}, thread, "test.star", tc.expr, pre)
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("got %v, %v; want an error containing %q", v, err, tc.err)
			}
			var ue *units.Error
			if tc.hint != "" && (!errors.As(err, &ue) || !strings.Contains(ue.Hint, tc.hint)) {
				t.Errorf("%v: hint %q, want one containing %q", err, hintOf(ue), tc.hint)
			}
		})
	}
}

func hintOf(e *units.Error) string {
	if e == nil {
		return ""
	}
	return e.Hint
}

// TestMoESharedExpertName: moe()'s ungated shared expert is
// Llama4TextMoe's shared_expert beside the top-k sigmoid router,
// DeepSeek's shared_experts otherwise.
func TestMoESharedExpertName(t *testing.T) {
	for _, tc := range []struct{ expr, want string }{
		{`model("m", moe(8, 16, 4, 1, impl = "dense_bmm", router = "topk_sigmoid", norm_topk = False, shared_experts = 1, name = "feed_forward"), vocab = 8)`,
			"feed_forward.shared_expert.gate_proj.weight"},
		{`model("m", moe(8, 16, 4, 1, router = "sigmoid", shared_experts = 1, name = "mlp"), vocab = 8)`, "mlp.shared_experts.gate_proj.weight"},
	} {
		thread := &starlark.Thread{Name: "test"}
		(&host.State{}).Attach(thread)
		v, err := starlark.EvalOptions(&syntax.FileOptions{}, thread, "test.star", tc.expr, Predeclared())
		if err != nil {
			t.Fatal(err)
		}
		prec, _ := core.LookupPrecision("bf16")
		p := &core.Plan{Model: v.(*models.Model).Sim(), Batch: 1, Seq: 8, GradAccum: 1, Members: 1, Precision: prec,
			Optimizer: core.Optimizer{Kind: core.AdamW}, Device: hw.Device{Name: "test", Memory: 1 << 40}}
		prog, err := p.LowerProgram()
		if err != nil {
			t.Fatal(err)
		}
		var shared []string
		for _, pi := range prog.Params {
			if strings.Contains(pi.Name, "shared") {
				shared = append(shared, pi.Name)
			}
		}
		if !slices.Contains(shared, tc.want) {
			t.Errorf("%s: shared expert parameters %v, want %s", tc.expr, shared, tc.want)
		}
	}
}
