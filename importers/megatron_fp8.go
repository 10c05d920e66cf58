package importers

// megatronFP8 is --fp8-format (e4m3 or hybrid: one byte an element
// either way) with --fp8-recipe (delayed by default) and
// --fp8-amax-history-len (1 by default): Transformer Engine's fp8 linears,
// train(float8="te-<recipe>"); --fp8-param-gather is fp8_param_gather=True
// (with mxfp8 only with --reuse-grad-buf-for-mxfp8-param-ag, the shared
// buffer memsh models).
func megatronFP8(t *tree, p *plan) error {
	format, err := t.str("fp8-format", "")
	if err != nil {
		return err
	}
	recipe, err := t.str("fp8-recipe", "delayed")
	if err != nil {
		return err
	}
	history, err := t.integer("fp8-amax-history-len", 1, 1, 1<<20)
	if err != nil {
		return err
	}
	gather, err := t.boolean("fp8-param-gather", false)
	if err != nil {
		return err
	}
	if format == "" {
		if gather { // TransformerConfig: "fp8_param must be used together with fp8 mode"
			return t.errorf("fp8-param-gather", "add --fp8-format hybrid (or e4m3), or drop --fp8-param-gather",
				"Megatron refuses fp8 parameters without fp8 training (fp8_param must be used together with fp8 mode)")
		}
		return nil
	}
	if format != "e4m3" && format != "hybrid" {
		return t.errorf("fp8-format", "e4m3 or hybrid", "unknown format %s", quoteKey(format))
	}
	switch recipe {
	case "delayed", "tensorwise", "mxfp8", "blockwise":
	default:
		return t.errorf("fp8-recipe", "delayed, tensorwise, mxfp8 or blockwise", "unknown recipe %s", quoteKey(recipe))
	}
	p.set("float8", str("te-"+recipe))
	if recipe == "delayed" && history != 1 {
		p.set("fp8_amax_history", num(history))
	}
	if !gather {
		return nil
	}
	distOpt, err := t.boolean("use-distributed-optimizer", false)
	if err != nil {
		return err
	}
	reuse, err := t.boolean("reuse-grad-buf-for-mxfp8-param-ag", false)
	if err != nil {
		return err
	}
	switch {
	case !distOpt: // arguments.py asserts it
		return t.errorf("fp8-param-gather", "add --use-distributed-optimizer, or drop --fp8-param-gather",
			"Megatron asserts --fp8-param-gather only supported with distributed optimizer")
	case recipe == "blockwise":
		t.notModelled = append(t.notModelled, "fp8-param-gather: fp8 parameters with the blockwise recipe (docs/float8.md)")
	case recipe == "mxfp8" && !reuse: // memsh models the shared buffer Megatron-Bridge's mxfp8 recipe sets
		t.notModelled = append(t.notModelled, "fp8-param-gather: MXFP8 parameters without --reuse-grad-buf-for-mxfp8-param-ag (a bf16 param buffer of their own)")
	default:
		p.set("fp8_param_gather", boolean(true))
	}
	return nil
}
