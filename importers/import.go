package importers

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
)

// Options are what the command line says that a trainer's config does
// not: the model's config.json, the sequence length, the GPUs, the
// environment the job will run in, overrides of the config's keys.
type Options struct {
	// Trainer forces an importer by name ("" detects it from the file).
	Trainer string
	// Function is the function of a Python config module that returns
	// the job's config (torchtitan's --config); "" for a config file.
	Function string
	// Path is where the config file lies (absolute), when the file's
	// name does not say: a Python module's package (its folder) is where
	// its relative imports come from. "" uses the file's name.
	Path string
	// Model is a Hugging Face config.json for the model, as the script
	// reads it (relative to the script's folder); "" for none.
	Model string
	// ModelData is that file's contents, which the caller reads (nil:
	// not read, the importer knows only its name). The Hugging Face
	// Trainer's importer reads the model's dtype from it.
	ModelData []byte
	// Seq is the tokens per sequence; 0 when not given.
	Seq int64
	// GPU is the catalog name of the card.
	GPU string
	// GPUs is the GPUs per node, Nodes the nodes.
	GPUs, Nodes int64
	// Top is how many of advise()'s changes the script lists (0: none).
	Top int64
	// Headroom is the fraction of the card the step must leave free, which
	// advise()'s changes must leave too.
	Headroom float64
	// Getenv reads the job's environment (PYTORCH_CUDA_ALLOC_CONF,
	// ANEMOI_INFERENCE_NUM_CHUNKS, ...); nil reads none.
	Getenv func(string) string
	// Overrides are key=value settings of the config's keys, applied
	// before importing, as the trainer's own command line takes them.
	Overrides []string
	// ReadFile reads a file a config names (the Trainer's deepspeed
	// config), by its name as the config gives it; nil reads none.
	ReadFile func(name string) ([]byte, error)
	// FindModel finds the config.json of a model the config names by a
	// Hub id or a folder (model_name_or_path, base_model) where
	// transformers' from_pretrained would (model_find.go), when Model is
	// not given and the zoo has no model of that name; nil finds none.
	FindModel func(name string) (FoundModel, error)
	// modelLooked is where FindModel looked for a model it did not find.
	modelLooked string
}

// FoundModel is what Options.FindModel found of a model: its config.json
// as the script reads it (Options.Model) and its contents, and where it
// was, in words. Data nil: not found; Looked then says where memsh looked
// (a sentence the hint of the importer's error ends with).
type FoundModel struct {
	Path   string
	Data   []byte
	From   string
	Looked string
}

// Result is an imported config: the Starlark plan script memsh check runs
// (and --emit-star prints), and what of the config it did not model.
type Result struct {
	Trainer string
	Script  string
	// Unknown lists the keys the importer did not understand; they are
	// left out of the plan.
	Unknown []string
	// DidYouMean maps an unknown key to the key the importer reads that
	// it is likely a typo of.
	DidYouMean map[string]string
	// NotModelled lists settings understood but not modelled ("key: why").
	NotModelled []string
	// ModelFrom says where the model's config.json was found when the
	// command line gave none (Options.FindModel); "" otherwise.
	ModelFrom string
}

// Error is a config the importer cannot turn into a plan: malformed,
// unknown-version or contradictory, at a key of the file.
type Error struct {
	// noLaunch: a job script without the launch the reader looks for
	// (findLaunch), which another reader may read; stopped: its reading
	// stopped first (a loop past shellCalls, shellTimeout)
	noLaunch, stopped bool
	File              string
	Line              int // 0 when unknown
	Key               string
	Msg               string
	Hint              string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	if e.Key != "" {
		b.WriteString(": key " + quoteKey(e.Key))
	}
	b.WriteString(": " + e.Msg)
	return b.String()
}

// trainer is one importer: how it reads a file, how it recognises one of
// its configs, and how it turns one into a plan.
type trainer struct {
	name  string
	about string   // what the importer reads
	exts  []string // file extensions it reads
	parse func(file string, data []byte) (*tree, error)
	// parseOpts, when set, parses with the command line's options (a
	// Python module's function, Options.Function) in place of parse.
	parseOpts func(file string, data []byte, o Options) (*tree, error)
	detect    func(t *tree) bool
	plan      func(t *tree, o Options) (*plan, error)
	// modelKey is the key that names the model by a Hub id or a folder,
	// as from_pretrained takes it ("" when the trainer builds its own).
	modelKey string
	// modelAlias are other keys that name it, read where modelKey is
	// absent (OpenRLHF's flat --pretrain, before v0.10.2)
	modelAlias []string
	// configOnly: the plan's model is always hf_config's, never the zoo's
	// (OpenRLHF's loss over the logits is an hf_config keyword), so a Hub
	// id the zoo has is looked for too (findModel).
	configOnly bool
	// noEffect are the keys that change nothing a memory replay sees
	// (paths, logging, learning rates, seeds): "key" or "prefix.*".
	noEffect []string
}

// trainers is every importer, in the order detection tries them.
var trainers = []*trainer{torchtuneTrainer, torchtitanTrainer, torchtitanPyTrainer, torchtitanDictTrainer, swiftConfigTrainer, axolotlTrainer, llamaFactoryTrainer, hfTrainer, deepspeedTrainer, megatronTrainer, swiftTrainer, openrlhfTrainer, anemoiTrainer}

func trainerNames() string {
	var names []string
	for _, tr := range trainers {
		if !slices.Contains(names, tr.name) {
			names = append(names, tr.name)
		}
	}
	return strings.Join(names, ", ")
}

// Import reads a trainer's config (file is its name, for messages and to
// tell its format) and returns the plan script for it.
func Import(file string, data []byte, o Options) (*Result, error) {
	tr, t, err := pick(file, data, o)
	if err != nil {
		return nil, err
	}
	for _, ov := range o.Overrides {
		if err := t.override(ov); err != nil {
			return nil, err
		}
	}
	if o.Getenv == nil {
		o.Getenv = func(string) string { return "" }
	}
	if o.GPUs <= 0 || o.Nodes <= 0 {
		return nil, &Error{File: "command line", Msg: fmt.Sprintf("--gpus and --nodes must be positive (got %d and %d)", o.GPUs, o.Nodes)}
	}
	from, err := findModel(tr, t, &o)
	if err != nil {
		return nil, err
	}
	p, err := tr.plan(t, o)
	if err != nil {
		var e *Error
		if errors.As(err, &e) && e.Key != "" {
			if k := t.typoOf(e.Key); k != "" {
				c := *e
				if c.Hint == "" {
					c.Hint = fmt.Sprintf("the config has %s: a typo of %s?", quoteKey(k), quoteKey(e.Key))
				} else {
					c.Hint += fmt.Sprintf(" (the config has %s: a typo?)", quoteKey(k))
				}
				return nil, &c
			}
		}
		return nil, err
	}
	unknown := t.notUnderstood(tr.noEffect)
	res := &Result{Trainer: tr.name, Unknown: unknown, DidYouMean: t.suggestions(unknown, tr.noEffect), NotModelled: t.notes(), ModelFrom: from}
	p.title = fmt.Sprintf("%s config %s", tr.name, path.Base(file))
	res.Script = p.render(res, o)
	return res, nil
}

// pick finds the importer for a file: the one named, else the first whose
// extension and keys match.
func pick(file string, data []byte, o Options) (*trainer, *tree, error) {
	ext, name := strings.ToLower(path.Ext(file)), o.Trainer
	if name != "" {
		var named *trainer // of a trainer with two config formats (torchtitan), the file's
		for _, tr := range trainers {
			if tr.name == name && (named == nil || slices.Contains(tr.exts, ext)) {
				named = tr
			}
		}
		if named != nil {
			t, err := named.read(file, data, o)
			return named, t, err
		}
		return nil, nil, &Error{File: "command line", Msg: fmt.Sprintf("unknown trainer %s", quoteKey(name)),
			Hint: "known: " + trainerNames()}
	}
	var lastErr error
	for _, tr := range trainers {
		if !slices.Contains(tr.exts, ext) || shellStopped(lastErr) && slices.Contains(tr.exts, ".sh") {
			continue // a job script that stopped one shell reader (past its commands or its deadline) stops the next alike
		}
		t, err := tr.read(file, data, o)
		if err != nil {
			// a job script's reader that found no launch of its own keeps
			// another reader's error about the launch it found
			if lastErr == nil || !noLaunch(err) || noLaunch(lastErr) {
				lastErr = err
			}
			continue
		}
		if tr.detect(t) {
			return tr, t, nil
		}
	}
	if lastErr != nil {
		return nil, nil, lastErr
	}
	return nil, nil, &Error{File: file, Msg: "not a config memsh check knows",
		Hint: "memsh check reads the configs of " + trainerNames() + "; --trainer NAME says which one a file is"}
}

// read parses a config with the importer's parser.
func (tr *trainer) read(file string, data []byte, o Options) (*tree, error) {
	if tr.parseOpts != nil {
		return tr.parseOpts(file, data, o)
	}
	return tr.parse(file, data)
}

// noLaunch says whether err is a job script's reader finding no launch of
// its own in it.
func noLaunch(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.noLaunch
}

// shellStopped says whether err is a job script's reading that stopped
// before it found a launch.
func shellStopped(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.stopped
}
