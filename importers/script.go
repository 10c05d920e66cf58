package importers

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// plan is the Starlark an importer builds: the loads, any definitions the
// model needs, the model expression and train()'s keywords, in order.
type plan struct {
	title string
	loads map[string][]string // module -> names
	defs  []string            // lines before the plan (a graph model's parts)
	model string
	train []arg
	// keys maps a train() keyword to the config's key it was read from
	// (keyOf), for advise(keys=).
	keys map[string]string
}

// arg is one keyword argument: its name and its Starlark expression.
type arg struct{ key, expr string }

func (p *plan) load(module string, names ...string) {
	if p.loads == nil {
		p.loads = map[string][]string{}
	}
	for _, n := range names {
		if !slices.Contains(p.loads[module], n) {
			p.loads[module] = append(p.loads[module], n)
		}
	}
}

func (p *plan) set(key, expr string) { p.train = append(p.train, arg{key, expr}) }

// reset gives key, set before, its value: where a later key (a pipeline's
// micro-batch size) says what an earlier one holds.
func (p *plan) reset(key, expr string) {
	for i, a := range p.train {
		if a.key == key {
			p.train[i].expr = expr
			return
		}
	}
	p.set(key, expr)
}

// cluster sets train(cluster=) for a job over several nodes: o.Nodes of
// o.GPUs each.
func (p *plan) cluster(o Options) {
	if o.Nodes > 1 {
		p.set("cluster", call("cluster", kw("nodes", num(o.Nodes)), kw("gpus_per_node", num(o.GPUs))))
	}
}

// offload adds a keyword to the plan's offload(...), made on first use.
func (p *plan) offload(a string) {
	for i, x := range p.train {
		if x.key == "offload" {
			p.train[i].expr = strings.TrimSuffix(x.expr, ")") + ", " + a + ")"
			return
		}
	}
	p.set("offload", call("offload", a))
}

// formatFloat is f as a Starlark float literal.
func formatFloat(f float64) string {
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eEn") {
		s += ".0"
	}
	return s
}

// toFloat reads a number of a config.
func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case int64:
		return float64(x), true
	case float64:
		return x, !math.IsNaN(x) && !math.IsInf(x, 0)
	case string: // YAML 1.1 spellings PyYAML reads as floats: 2e-5
		f, err := strconv.ParseFloat(x, 64)
		return f, err == nil && !math.IsNaN(f) && !math.IsInf(f, 0)
	}
	return 0, false
}

// render writes the script: a header naming the config and what it left
// out, the plan, and main(), which memsh check runs.
func (p *plan) render(res *Result, o Options) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# The plan of %s, as memsh check imported it.\n", comment(p.title))
	b.WriteString("# memsh check runs main(): the report, then advise()'s changes.\n")
	if len(res.Unknown) > 0 {
		b.WriteString("#\n# Not understood, left out of the plan:\n")
		for _, k := range res.Unknown {
			b.WriteString("#   " + comment(res.WithDidYouMean(k)) + "\n")
		}
	}
	if len(res.NotModelled) > 0 {
		b.WriteString("#\n# Understood, not modelled:\n")
		for _, k := range res.NotModelled {
			b.WriteString("#   " + comment(k) + "\n")
		}
	}
	b.WriteString("\n")
	mods := make([]string, 0, len(p.loads))
	for m := range p.loads {
		mods = append(mods, m)
	}
	sort.Strings(mods)
	for _, m := range mods {
		names := make([]string, len(p.loads[m]))
		for i, n := range p.loads[m] {
			names[i] = str(n)
		}
		fmt.Fprintf(&b, "load(%s, %s)\n", str(m), strings.Join(names, ", "))
	}
	if len(mods) > 0 {
		b.WriteString("\n")
	}
	for _, d := range p.defs {
		b.WriteString(d + "\n")
	}
	if len(p.defs) > 0 {
		b.WriteString("\n")
	}
	b.WriteString("plan = train(\n    " + p.model + ",\n")
	for _, a := range p.train {
		fmt.Fprintf(&b, "    %s = %s,\n", a.key, a.expr)
	}
	b.WriteString(")\n\ndef main():\n    report = simulate(plan)\n")
	if o.Top <= 0 {
		b.WriteString("    return report\n")
		return b.String()
	}
	budget := ""
	if o.Headroom > 0 {
		budget = ", budget = " + strconv.FormatFloat(1-o.Headroom, 'g', 6, 64)
	}
	keys := ""
	if len(p.keys) > 0 { // the advice in the config's own keys too (advice_keys.go)
		keys = ",\n                            keys = " + keysExpr(p.keys)
	}
	fmt.Fprintf(&b, "    goal = \"speed\" if report.fits else \"fit\"\n    return [report, advise(plan, goal = goal%s, top = %d%s)]\n", budget, o.Top, keys)
	return b.String()
}

// str is s as a Starlark string literal.
func str(s string) string { return strconv.QuoteToASCII(strings.ToValidUTF8(s, "\uFFFD")) }

// num is n as a Starlark int.
func num(n int64) string { return strconv.FormatInt(n, 10) }

// boolean is b as a Starlark bool.
func boolean(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

// strList is names as a Starlark list of strings.
func strList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = str(n)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// call is a Starlark call: name(args...), each "key = expr" or an expr.
func call(name string, args ...string) string { return name + "(" + strings.Join(args, ", ") + ")" }

// kw is one keyword argument of a call.
func kw(key, expr string) string { return key + " = " + expr }

// plainKey is what a key may hold to appear in a comment or message as it
// is; anything else is quoted (a key with a newline cannot end a comment).
var plainKey = regexp.MustCompile(`^[A-Za-z0-9_.,:;*/()+=<>'"%$@!?\[\] -]*$`)

// comment is s safe inside a one-line comment.
func comment(s string) string {
	if plainKey.MatchString(s) {
		return s
	}
	return str(s)
}

// quoteKey is a key or value as a message shows it.
func quoteKey(s string) string {
	if s != "" && plainKey.MatchString(s) && !strings.ContainsAny(s, " \"'") {
		return s
	}
	return str(s)
}
