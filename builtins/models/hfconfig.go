package models

import (
	"errors"
	"fmt"
	"strings"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/sim/hf"
	"github.com/memsh/memsh/sim/units"
	"go.starlark.net/starlark"
)

// hfConfigBuiltins: hf_config, a model from a Hugging Face config.json.
func HfConfigBuiltins() []host.Builtin {
	return []host.Builtin{{
		Name: "hf_config",
		Sig:  `hf_config(path, attn="sdpa", arch=None)`,
		Doc: "A model from a Hugging Face config.json (path relative to the script, inside its folder tree or a folder " +
			"allowed with --allow-read; a regular file of at most 4 MiB), " +
			"built as transformers builds it, with the exact parameter count of the Hugging Face model " +
			"(tied weights once, buffers never). model_type may be " + strings.Join(hf.ModelTypes(), ", ") + ". " +
			"attn is the attention kernel the model runs with: \"eager\", \"sdpa\" or \"flash\" " +
			"(BLOOM runs eager whatever is asked, as transformers does). arch picks the model class instead of " +
			"the config's architectures[0]: for BERT \"BertForMaskedLM\" (the default), \"BertModel\", " +
			"\"BertForSequenceClassification\" or \"BertForTokenClassification\"; for decoders the causal LM " +
			"(the default) or the base model (\"LlamaModel\": no head).",
		Fn: hfConfigFn,
	}}
}

// maxConfigBytes is the largest config.json hf_config reads: 4 MiB, a
// hundred times the largest configs on the Hugging Face hub (a few KiB to
// tens of KiB).
const maxConfigBytes = 4 << 20

func hfConfigFn(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var path string
	attn := "sdpa"
	var arch starlark.Value = starlark.None
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "path", &path, "attn?", &attn, "arch?", &arch); err != nil {
		return nil, err
	}
	archName := ""
	if arch != starlark.None {
		s, ok := starlark.AsString(arch)
		if !ok || s == "" {
			return nil, fmt.Errorf("arch must be a model class name such as \"BertModel\" (got %s)", arch.Type())
		}
		archName = s
	}
	decl := host.CallerPos(thread)
	data, err := host.ReadScriptFile(thread, path, maxConfigBytes, "config files")
	if err != nil {
		if !strings.Contains(err.Error(), path) {
			err = fmt.Errorf("cannot read %s: %w", path, err)
		}
		return nil, err
	}
	m, err := hf.FromConfigArch(data, attn, archName)
	if err != nil {
		var se *units.Error
		if errors.As(err, &se) {
			c := *se // name the file the user gave
			if strings.Contains(c.Msg, "config.json") {
				c.Msg = strings.Replace(c.Msg, "config.json", path, 1)
			} else {
				c.Path = path
			}
			return nil, &c
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return NewModel(m, nil, decl), nil
}
