package hf

import (
	"math"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/nn"
)

// buildMamba is transformers' MambaForCausalLM (state-spaces' Mamba-1
// checkpoints, mamba-*-hf): under "backbone", the embeddings, blocks of
// x + mixer(norm(x)) with a MambaMixer (nn.Mamba without Jamba's inner
// norms), norm_f; the head tied to the embeddings unless the config says
// otherwise (PretrainedConfig's default); the sizes mambaStack's.
//
// The mixer runs as transformers runs it on a GPU: with the mamba_ssm and
// causal_conv1d kernels (attn "sdpa" or "flash": mamba_inner_fn), or
// without them (attn "eager": slow_forward, the PyTorch loop over the
// tokens). residual_in_fp32 keeps the residual stream in fp32
// (mixerStack). Not modelled: use_mambapy's parallel scan.
func buildMamba(c *hfConfig, attn string, head hfHead) *core.Model {
	if c.err == nil && c.flag("use_mambapy", false) && attn == "eager" {
		c.fail("use_mambapy", "is true: the mamba.py parallel scan is not modelled (use attn=\"sdpa\" for the mamba_ssm kernels)")
	}
	impl := nn.MambaFused
	if attn == "eager" {
		impl = nn.MambaSlow
	}
	return c.mambaStack(head, &nn.Mamba{Impl: impl})
}

// buildFalconMamba is transformers' FalconMambaForCausalLM (TII's
// falcon-mamba-7b and its instruct model), as 5.25.0 builds it
// (models/falcon_mamba/modeling_falcon_mamba.py): MambaForCausalLM's
// backbone and config keys (buildMamba) whose mixer puts x_proj's dt, B
// and C columns each through an RMS norm without a weight before dt_proj
// and the scan (nn.Mamba.WeightlessNorms). 5.25.0 has no fused path for
// it (FalconMambaMixer's note: mamba_inner_fn normalizes dt after
// dt_proj, FalconMamba before), so every attn runs the PyTorch loop
// (nn.MambaSlow), on a GPU as on the CPU; FalconMambaForCausalLM has no
// SDPA path (hfFamily.noFused). use_falcon_mambapy (the mamba.py parallel
// scan, where the mambapy package is installed) is refused; use_mambapy
// itself is never read (FalconMambaConfig.__post_init__ sets it from
// use_falcon_mambapy). Not modelled: the associative scan torch.compile
// traces (use_associative_scan).
func buildFalconMamba(c *hfConfig, attn string, head hfHead) *core.Model {
	if c.err == nil && c.flag("use_falcon_mambapy", false) {
		c.fail("use_falcon_mambapy", "is true: the mamba.py parallel scan is not modelled (leave it out for transformers' PyTorch loop)")
	}
	return c.mambaStack(head, &nn.Mamba{Impl: nn.MambaSlow, WeightlessNorms: true})
}

// mambaStack reads MambaConfig's keys (FalconMambaConfig's are the same)
// into mixer, whose Impl and norms the caller set, under mixerStack's
// backbone. intermediate_size, when the config carries it, wins over
// expand x hidden_size (MambaConfig sets it from expand, then the
// config's own keys override it); time_step_rank "auto" is
// ceil(hidden_size / 16).
func (c *hfConfig) mambaStack(head hfHead, mixer *nn.Mamba) *core.Model {
	hidden := c.size("hidden_size")
	layers := c.size("num_hidden_layers")
	vocab := c.size("vocab_size")
	tie := c.flag("tie_word_embeddings", true)
	rank := (hidden + 15) / 16
	if r, ok := c.raw["time_step_rank"]; ok && r != "auto" {
		rank = c.size("time_step_rank")
	}
	expand := c.number("expand", 2)
	if c.err == nil && (expand <= 0 || expand*float64(hidden) > 1<<40) {
		c.fail("expand", "must be positive and expand x hidden_size not too large (got %g)", expand)
	}
	if c.err == nil && !c.has("intermediate_size") && expand*float64(hidden) < 1 {
		c.fail("expand", "times %q (%d) must be at least 1 (got %g): MambaConfig's intermediate_size is int(expand * hidden_size)", c.at("hidden_size"), hidden, expand)
	}
	if c.err != nil {
		return nil
	}
	mixer.Name, mixer.Dim, mixer.DTRank = "mixer", hidden, rank
	mixer.Inner = c.sizeOr("intermediate_size", int64(math.Floor(expand*float64(hidden))))
	mixer.State, mixer.ConvK = c.sizeOr("state_size", 16), c.sizeOr("conv_kernel", 4)
	mixer.Bias, mixer.ConvBias = c.flag("use_bias", false), c.flag("use_conv_bias", true)
	return c.mixerStack(head, mixer, hidden, layers, vocab, tie)
}

// setMambaSkipFP32 sets nn.Mamba.SkipFP32 on the PyTorch-path mixers of
// layers (transformers 5.15's fp32 skip: mambaSkipFP32Since).
func setMambaSkipFP32(layers []core.Layer, on bool) {
	var walk func(l core.Layer)
	walk = func(l core.Layer) {
		if m, ok := l.(*nn.Mamba); ok && m.Impl == nn.MambaSlow {
			m.SkipFP32 = on
		}
		for _, c := range l.Children() {
			walk(c)
		}
	}
	for _, l := range layers {
		walk(l)
	}
}
