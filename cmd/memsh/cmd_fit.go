package main

import (
	"cmp"
	_ "embed"
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/memsh/memsh/builtins"
	"github.com/memsh/memsh/builtins/host"
	"go.starlark.net/starlark"
)

// fitScript is the Starlark behind memsh fit: the plan, its report and
// advise()'s top changes, with the command line's values in argv.
//
//go:embed fit.star
var fitScript []byte

// fitFlags are memsh fit's own flags.
type fitFlags struct {
	gpu       string
	seq       int64
	batch     int64
	gpus      int64
	precision string
	images    string // COUNTxHEIGHTxWIDTH, a vision-language model's images per sample; "" for none
	videos    string // COUNTxFRAMESxHEIGHTxWIDTH, its videos per sample; "" for none
	top       int64
	lora      int64  // LoRA's rank on every linear layer but lm_head; 0 trains the whole model
	qlora     int64  // the same over a base in bitsandbytes' 4-bit nf4 with double quantization
	ckpt      string // train(checkpoint=)
	targets   string // --lora's targets, comma-separated (lora(targets=)); "" is all-linear
}

// qloraPrecision is --qlora's precision unless --precision says
// otherwise: QLoRA's base model loaded in bf16 (torch_dtype and
// bnb_4bit_compute_dtype) and trained under bf16 autocast, as
// examples/finetune_qlora.star and docs/peft.md run it.
const qloraPrecision = "bf16"

// cmdFit is memsh fit CONFIG.json --gpu GPU --seq N [--batch N] [--gpus N]
// [--precision P] [--lora R | --qlora R] [--targets LIST] [--checkpoint MODE] [--images
// COUNTxHxW] [--videos COUNTxFRAMESxHxW] [--top N] [--json]: the one-line answer for people who
// do not want a script. It runs fit.star as if it lay beside the config
// (so the config's folder is the only one it reads), printing the report
// and the advice, or writing both as JSON lines with --json.
func (e *env) cmdFit(operands []string) error {
	operands, err := parseInterspersed(e.flags(), operands)
	if err != nil {
		return err
	}
	f := e.out.fit
	switch {
	case len(operands) != 1:
		return usagef("fit needs one config.json: memsh fit CONFIG.json --gpu GPU --seq N [--batch N] [--gpus N]")
	case f.seq <= 0:
		return usagef("fit needs --seq N, the tokens per sequence (got %d)", f.seq)
	case f.batch <= 0:
		return usagef("fit: --batch must be a positive micro-batch (got %d)", f.batch)
	case f.gpus <= 0:
		return usagef("fit: --gpus must be a positive GPU count (got %d)", f.gpus)
	case f.top <= 0:
		return usagef("fit: --top must be a positive number of changes (got %d)", f.top)
	case gpuFlag("fit", f.gpu) != nil:
		return gpuFlag("fit", f.gpu)
	case f.lora < 0 || f.qlora < 0 || e.out.set["lora"] && f.lora == 0 || e.out.set["qlora"] && f.qlora == 0: // --lora 0 trained the whole model
		return usagef("fit: --lora and --qlora take a positive LoRA rank, e.g. --lora 16 (got %d)", min(f.lora, f.qlora))
	case f.lora > 0 && f.qlora > 0:
		return usagef("fit: --lora and --qlora are two ways to fine-tune: give one (--qlora R is --lora R over a 4-bit base)")
	case f.targets != "" && f.lora == 0 && f.qlora == 0:
		return usagef("fit: --targets names the modules --lora or --qlora adapts: give one of them too")
	case f.targets != "" && slices.Contains(strings.Split(f.targets, ","), ""):
		return usagef("fit: --targets is module names or roles joined by commas, e.g. --targets q_proj,v_proj (got %q)", f.targets)
	case e.out.csv:
		return usagef("fit takes --json, not --csv")
	}
	images, err := fitDims("images", f.images, "COUNTxHEIGHTxWIDTH", "2x448x448 is two images of 448 x 448 pixels in each sample")
	if err != nil {
		return err
	}
	videos, err := fitDims("videos", f.videos, "COUNTxFRAMESxHEIGHTxWIDTH", "1x16x448x448 is one video of 16 frames of 448 x 448 pixels in each sample")
	if err != nil {
		return err
	}
	config := filepath.ToSlash(operands[0])
	e.json.config = config
	dir, base := path.Split(config)
	script := path.Join(dir, "memsh-fit.star") // a name under the config's folder: what it may read
	rank, quant, precision := f.lora, "", f.precision
	if f.qlora > 0 {
		rank, quant = f.qlora, "nf4-dq"
		if !e.out.set["precision"] {
			precision = qloraPrecision
		}
	}
	args := []string{base, f.gpu, strconv.FormatInt(f.seq, 10), strconv.FormatInt(f.batch, 10),
		strconv.FormatInt(f.gpus, 10), precision, strconv.FormatInt(f.top, 10), images, videos,
		strconv.FormatInt(rank, 10), quant, f.ckpt, cmp.Or(f.targets, "all-linear")}
	sr := scriptRun{
		file: script, src: fitScript, args: args,
		out: e.stdout, color: useColor(e.color, e.stdout, e.getenv),
		errOut: e.stderr, errColor: useColor(e.color, e.stderr, e.getenv), plainErrors: true,
	}
	if e.out.json {
		sr.out, sr.color = e.stderr, sr.errColor
		sr.emit = jsonLines{e.stdout}.emit
	} else {
		n := 0
		sr.emit = func(_ *starlark.Thread, em host.Emitted) error { // the report, a blank line, the advice
			if n++; n > 1 {
				fmt.Fprintln(sr.out)
			}
			return builtins.PrintEmitted(sr.out, em, sr.color)
		}
	}
	_, err = e.execScript(e.ctx, sr)
	return err
}

// fitDims reads --flag s, positive whole numbers joined by x, as many as
// form names (COUNTxHEIGHTxWIDTH: --images 2x448x448 is two images of 448
// x 448 pixels in each sample), into fit.star's argument, the numbers
// joined by commas; "" when not given. example explains one.
func fitDims(flag, s, form, example string) (string, error) {
	if s == "" {
		return "", nil
	}
	parts := strings.Split(strings.ToLower(s), "x")
	if len(parts) == len(strings.Split(form, "x")) {
		n := make([]string, len(parts))
		ok := true
		for i, p := range parts {
			v, err := strconv.ParseInt(strings.TrimSpace(p), 10, 64)
			ok = ok && err == nil && v > 0
			n[i] = strconv.FormatInt(v, 10)
		}
		if ok {
			return strings.Join(n, ","), nil
		}
	}
	return "", usagef("fit: --%s is %s, positive whole numbers: %s (got %q)", flag, form, example, s)
}
