package tables

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/memsh/memsh/builtins/host"
	"github.com/memsh/memsh/sim/advise"
	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/hw"
	"go.starlark.net/starlark"
)

// advise(keys=): the changes in a trainer's config's own keys. memsh
// check's plan script passes the keys its importer read each train()
// keyword from (importers.Result.Keys: per_device_train_batch_size for
// batch, gradient_checkpointing for checkpoint, ...), and the table gets
// a config column beside change: each setting as "key: value" in that
// config's terms, or, for a keyword no key of the config sets (or a value
// the key cannot say: checkpoint="op" against a true/false key), the
// keyword as memsh writes it, marked as having no key in the config.

// adviseKeys reads keys=: None, or a dict of train() keyword to the
// config's key ("!key": a bool key that says the opposite, LLaMA-Factory's
// disable_gradient_checkpointing for checkpoint).
func adviseKeys(v starlark.Value) (map[string]string, error) {
	if v == starlark.None {
		return nil, nil
	}
	d, ok := v.(*starlark.Dict)
	if !ok {
		return nil, fmt.Errorf("advise: keys must be a dict of train() keyword to the config's key, e.g. {\"batch\": \"per_device_train_batch_size\"} (got %s)", v.Type())
	}
	keys := make(map[string]string, d.Len())
	for _, item := range d.Items() {
		k, ok1 := starlark.AsString(item[0])
		c, ok2 := starlark.AsString(item[1])
		if !ok1 || !ok2 || k == "" || c == "" {
			return nil, host.WithHint(fmt.Errorf("advise: keys maps a train() keyword to the config's key, both non-empty strings (got %s: %s)", item[0], item[1]),
				`keys = {"batch": "per_device_train_batch_size", "grad_accum": "gradient_accumulation_steps"}`)
		}
		keys[k] = c
	}
	return keys, nil
}

// noConfigKey marks a setting no key of the config says; noFlag one no
// flag of the command says (memsh fit's: the keyword is for a plan
// script).
const (
	noConfigKey = " (no key in the config)"
	noFlag      = " (no fit flag)"
)

// configText is a row's changes in the config's keys, or in a command
// line's flags when keys name flags ("--batch": memsh fit's).
func configText(r advise.Row, keys map[string]string) string {
	flags := false
	for _, k := range keys {
		flags = flags || strings.HasPrefix(k, "--")
	}
	var parts []string
	for _, c := range r.Changes {
		for _, s := range c.Settings {
			parts = append(parts, settingInConfig(s, keys, flags))
		}
	}
	return strings.Join(parts, ", ")
}

// settingInConfig is one setting as "key: value" in the config's terms
// ("--flag value" for a command line's), or memsh's keyword marked as
// having no key (no flag).
func settingInConfig(s advise.Setting, keys map[string]string, flags bool) string {
	none := noConfigKey
	if flags {
		none = noFlag
	}
	if m, ok := s.Value.(advise.ModelChange); ok {
		return m.Text + none
	}
	key, ok := keys[s.Keyword]
	if !ok {
		return s.String() + none
	}
	if flags {
		if v, ok := flagValue(s.Value); ok {
			return key + " " + v
		}
		return s.String() + none
	}
	v, ok := configValue(s.Value)
	if k, inverse := strings.CutPrefix(key, "!"); inverse { // a bool saying the opposite: disable_gradient_checkpointing
		b, err := strconv.ParseBool(v)
		v, ok, key = strconv.FormatBool(!b), ok && err == nil, k
	}
	if ok {
		return key + ": " + v
	}
	return s.String() + none
}

// flagValue is an engine value as a flag's operand: a count, a name
// (precision, the GPU), a checkpoint mode train() takes as a string.
func flagValue(v any) (string, bool) {
	switch x := v.(type) {
	case int64:
		return strconv.FormatInt(x, 10), true
	case string:
		return x, true
	case hw.Device:
		return x.Name, true
	case core.Checkpoint:
		if t := x.String(); !strings.ContainsAny(t, "(=") {
			return t, true
		}
	}
	return "", false
}

// configValue is an engine value as a config's scalar: a count, a bool,
// the checkpoint or compile a true/false key says, and a GRPO objective's
// sleep mode (vllm_enable_sleep_mode); false for any other.
func configValue(v any) (string, bool) {
	switch x := v.(type) {
	case int64:
		return strconv.FormatInt(x, 10), true
	case bool:
		return strconv.FormatBool(x), true
	case core.Checkpoint:
		switch x.Mode {
		case "full":
			return "true", true
		case "", "none":
			return "false", true
		}
	case core.Compile:
		if x.Mode == "" || x.Mode == "default" {
			return strconv.FormatBool(x.On()), true
		}
	case core.Preference: // the one preference change advise makes: a GRPO step's vLLM engine asleep (vllm_sleep)
		if x.GRPO() && x.GRPOConfig.VLLM == core.VLLMColocate {
			return strconv.FormatBool(x.GRPOConfig.Sleep), true
		}
	}
	return "", false
}
