package importers

import (
	"fmt"
	"regexp"
	"strings"
)

// axolotlUnfrozen reads unfrozen_parameters as Axolotl's
// freeze_layers_except runs it (utils/freeze.py at 067b021c8): every
// parameter frozen but those a LayerNamePattern matches with re.match, a
// pattern's dots literal unless a "+" follows (re.sub(r"\.(?!\+)", "\\.",
// ...)) and a trailing [start:end] a range whose gradient outside it a
// hook zeroes: the whole gradient is still allocated, so memsh drops the
// range. It returns train(trainable=)'s expression, "" when unset. The
// patterns name the checkpoint's parameters as named_parameters() lists
// them, so the model must be its config.json (o.ModelData): the zoo's
// models name theirs otherwise.
//
// With an adapter it runs on the PEFT model, whose parameters are named
// base_model.model...: not modelled. A pattern naming lm_head or
// embed_tokens makes train.py call enable_input_require_grads (inputGrads).
func axolotlUnfrozen(t *tree, o Options, adapter string) (expr string, inputGrads bool, err error) {
	const key = "unfrozen_parameters"
	l, ok := t.leaves[key]
	if !ok || l.value == nil {
		return "", false, nil
	}
	t.used[key] = true
	var raw []string
	switch v := l.value.(type) {
	case string:
		raw = []string{v}
	case []any:
		for _, x := range v {
			s, ok := x.(string)
			if !ok {
				return "", false, t.errorf(key, `a list of patterns: unfrozen_parameters: ["model.language_model.*", "lm_head"]`, "must be a list of strings, here %s", describe(x))
			}
			raw = append(raw, s)
		}
	default:
		return "", false, t.errorf(key, `a list of patterns: unfrozen_parameters: ["model.language_model.*", "lm_head"]`, "must be a list of strings, here %s", describe(v))
	}
	if len(raw) == 0 {
		return "", false, nil
	}
	if adapter != "" {
		return "", false, t.errorf(key, "leave it out with an adapter, or write the plan in Starlark",
			"with adapter %s is not modelled: Axolotl applies it to the PEFT model, whose parameters are named base_model.model...", adapter)
	}
	if o.ModelData == nil {
		return "", false, t.errorf(key, "pass the model's config.json: --model config.json",
			"names the checkpoint's parameters as transformers names them (model.layers.0...), which memsh reads from the model's config.json, not its zoo")
	}
	var pats []string
	for _, r := range raw {
		p, ranged := axolotlLayerPattern(r)
		if _, err := regexp.Compile(`^(?:` + p + `)`); err != nil {
			return "", false, t.errorf(key, "memsh reads RE2's syntax (no lookarounds or backreferences): write the pattern without them",
				"pattern %q is not a regular expression memsh reads: %v", r, err)
		}
		if ranged {
			t.notModelled = append(t.notModelled, fmt.Sprintf("%s: %q's index range: a hook zeroes the gradient outside it, which is still allocated whole (memsh trains the whole parameter)", key, r))
		}
		pats = append(pats, str(p))
		inputGrads = inputGrads || strings.Contains(r, "lm_head") || strings.Contains(r, "embed_tokens")
	}
	return "[" + strings.Join(pats, ", ") + "]", inputGrads, nil
}

// axolotlRange is LayerNamePattern._parse_pattern's range suffix.
var axolotlRange = regexp.MustCompile(`^(.+)\[([0-9]*)(?::([0-9]*))?\]$`)

// axolotlLayerPattern is a LayerNamePattern's name regex: the range
// dropped (ranged says there was one), each dot not followed by "+"
// escaped.
func axolotlLayerPattern(p string) (name string, ranged bool) {
	if m := axolotlRange.FindStringSubmatch(p); m != nil {
		p, ranged = m[1], true
	}
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] == '.' && (i+1 >= len(p) || p[i+1] != '+') {
			b.WriteString(`\.`)
			continue
		}
		b.WriteByte(p[i])
	}
	return b.String(), ranged
}
