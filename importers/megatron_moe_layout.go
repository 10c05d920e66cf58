package importers

import (
	"fmt"
	"strconv"
	"strings"
)

// megatronExpertLayout is the experts' layout as parallel() keywords:
// --expert-model-parallel-size (ep; the experts a multiple of it,
// arguments.py l.1655-1658), --expert-tensor-parallel-size (tp unless
// given, l.587-588), --moe-router-dtype (None: the router in its input's
// dtype, transformer_config.py l.811), --moe-shared-expert-overlap, and
// the token dispatcher (--moe-token-dispatcher-type, allgather by
// default, l.891).
func megatronExpertLayout(t *tree, experts, tp int64) ([]string, error) {
	ep, err := t.integer("expert-model-parallel-size", 1, 1, 1<<20)
	if err != nil {
		return nil, err
	}
	if experts%ep != 0 {
		return nil, t.errorf("expert-model-parallel-size", "Megatron asserts the same: the experts a multiple of it",
			"%d experts do not split over %d expert-parallel ranks", experts, ep)
	}
	etp, err := t.integer("expert-tensor-parallel-size", tp, 1, 1<<20)
	if err != nil {
		return nil, err
	}
	if etp != 1 && etp != tp {
		return nil, t.errorf("expert-tensor-parallel-size", fmt.Sprintf("1 (whole experts) or the tensor-parallel size, %d (memsh splits experts like the dense layers or keeps them whole)", tp),
			"expert tensor parallelism of %d under tp %d is not modelled", etp, tp)
	}
	var args []string
	if ep > 1 {
		args = append(args, kw("ep", num(ep)))
	}
	if etp != tp {
		args = append(args, kw("expert_tp", num(etp)))
	}
	switch dt, err := t.str("moe-router-dtype", ""); {
	case err != nil:
		return nil, err
	case dt == "fp32" || dt == "fp64":
		args = append(args, kw("router_dtype", str(dt)))
	case dt != "":
		return nil, t.errorf("moe-router-dtype", "fp32 or fp64 (or leave it out: the router in its input's dtype)", "unknown dtype %s", quoteKey(dt))
	}
	if on, err := t.boolean("moe-shared-expert-overlap", false); err != nil {
		return nil, err
	} else if on {
		args = append(args, kw("shared_expert_overlap", "True"))
	}
	d, err := t.str("moe-token-dispatcher-type", "allgather")
	if err != nil {
		return nil, err
	}
	switch d {
	case "alltoall":
	case "allgather":
		// token_dispatcher.py MoEAllGatherTokenDispatcher (l.233-372):
		// with tp or ep > 1 it all-gathers every rank's tokens over the
		// tp x ep group into Megatron's global memory buffer, permutes
		// the local experts' rows out of them and reduce-scatters the
		// unpermuted outputs (in the probs' dtype); alone it permutes
		// locally, as the alltoall dispatcher does
		if tp*ep > 1 {
			t.notModelled = append(t.notModelled, "moe-token-dispatcher-type: allgather (Megatron's default): every tp x ep rank's tokens all-gathered into its global buffer and the outputs reduce-scattered; memsh replays the alltoall dispatcher")
		}
	case "flex":
		t.get("moe-flex-dispatcher-backend")
		return nil, t.errorf("moe-token-dispatcher-type", "alltoall (or allgather, replayed as alltoall)", "the flex dispatcher (DeepEP, HybridEP) is not modelled")
	default:
		return nil, t.errorf("moe-token-dispatcher-type", "allgather, alltoall or flex", "unknown dispatcher %s", quoteKey(d))
	}
	if on, err := t.boolean("moe-enable-deepep", false); err != nil {
		return nil, err
	} else if on {
		return nil, t.errorf("moe-enable-deepep", "leave it out: memsh replays the alltoall dispatcher", "DeepEP's dispatcher is not modelled")
	}
	// --moe-permute-fusion (off by default, transformer_config.py l.941):
	// without it the unfused permute's host syncs, parallel(permute_fusion=
	// False) (nn/moe_megatron_sync.go); its kernels as the fused ones
	if on, err := t.boolean("moe-permute-fusion", false); err != nil {
		return nil, err
	} else if !on {
		args = append(args, kw("permute_fusion", "False"))
		t.notModelled = append(t.notModelled, "moe-permute-fusion: off (Megatron's default): Megatron-Core's unfused permute and unpermute (moe_utils.py) sync with the GPU as replayed (parallel(permute_fusion=False)), but memsh lowers and prices Transformer Engine's fused kernels for them")
	}
	return args, nil
}

// megatronMoEKernels reads the flags that choose the MoE layer's kernels
// and recompute, and those of no effect on memory.
func megatronMoEKernels(t *tree) error {
	if on, err := t.boolean("moe-use-upcycling", false); err != nil {
		return err
	} else if on {
		return t.errorf("moe-use-upcycling", "leave it out: memsh replays training steps", "upcycling converts a dense checkpoint and trains no step")
	}
	t.notModelledIf("moe-layer-recompute", "the MoE layer checkpointed on its own")
	t.notModelledIf("moe-input-jitter-eps", "the router input's jitter (a [tokens, hidden] noise kept for the backward)")
	t.notModelledIf("moe-apply-probs-on-input", "the routing weights applied to the experts' input")
	t.notModelledIf("overlap-moe-expert-parallel-comm", "the expert-parallel all-to-alls overlapped with another micro-batch's compute (two micro-batches' layers interleaved)")
	// of no effect on memory: TE's fused top-k (the same [tokens,
	// experts] probs), the aux and z losses' coefficients (scalars; their
	// [tokens, experts] fp32 scores per MoE layer are not counted),
	// logging, a device limit on the selection
	for _, k := range []string{"moe-router-fusion", "moe-aux-loss-coeff", "moe-z-loss-coeff", "moe-per-layer-logging", "moe-router-topk-limited-devices"} {
		t.get(k)
	}
	return nil
}

// megatronMoESwitches are the MoE flags that take no value (store_true).
var megatronMoESwitches = []string{"moe-grouped-gemm", "moe-router-pre-softmax", "moe-router-enable-expert-bias", "moe-shared-expert-overlap",
	"moe-shared-expert-gate", "moe-permute-fusion", "moe-router-fusion", "moe-layer-recompute", "moe-pad-expert-input-to-capacity",
	"moe-use-upcycling", "moe-enable-deepep", "moe-per-layer-logging", "moe-apply-probs-on-input", "overlap-moe-expert-parallel-comm"}

// evalLayerPattern evaluates Megatron's --moe-layer-freq pattern, a
// Python expression over the characters , 0-9 [ ] ( ) + * (_eval_pattern):
// lists of ints, joined by + and repeated by * an int, in parentheses.
// The list may hold at most limit items; nothing else is evaluated.
func evalLayerPattern(s string, limit int64) ([]int64, error) {
	if len(s) > 4096 {
		return nil, fmt.Errorf("a pattern of %d characters", len(s))
	}
	for i := 0; i < len(s); i++ { // _eval_pattern's check before its eval
		if c := s[i]; !strings.ContainsRune(",[]()+*", rune(c)) && (c < '0' || c > '9') {
			return nil, fmt.Errorf("invalid pattern %q: Megatron allows only , digits [ ] ( ) + and * (got %q)", s, string(c))
		}
	}
	p := &patternParser{s: s, limit: max(limit, 1)}
	v, err := p.expr(0)
	if err != nil {
		return nil, err
	}
	if p.i != len(p.s) {
		return nil, fmt.Errorf("invalid pattern %q: unexpected %q", s, p.s[p.i:])
	}
	if !v.isList {
		return nil, fmt.Errorf("invalid pattern %q: a number, not a list (an int frequency is written without brackets)", s)
	}
	return v.list, nil
}

type patternValue struct {
	isList bool
	n      int64
	list   []int64
}

type patternParser struct {
	s     string
	i     int
	limit int64
}

func (p *patternParser) errorf(format string, args ...any) error {
	return fmt.Errorf("invalid pattern %q at %d: %s", p.s, p.i, fmt.Sprintf(format, args...))
}

func (p *patternParser) peek() byte {
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

func (p *patternParser) expr(depth int) (patternValue, error) {
	if depth > 64 {
		return patternValue{}, p.errorf("nested too deeply")
	}
	v, err := p.term(depth)
	for err == nil && p.peek() == '+' {
		p.i++
		var w patternValue
		if w, err = p.term(depth); err != nil {
			break
		}
		switch {
		case v.isList && w.isList:
			if int64(len(v.list)+len(w.list)) > p.limit {
				return v, p.errorf("longer than %d layers", p.limit)
			}
			v.list = append(append([]int64{}, v.list...), w.list...)
		case !v.isList && !w.isList && v.n+w.n < 1<<20:
			v.n += w.n
		default:
			return v, p.errorf("+ joins two lists or two small numbers")
		}
	}
	return v, err
}

func (p *patternParser) term(depth int) (patternValue, error) {
	v, err := p.atom(depth)
	for err == nil && p.peek() == '*' {
		p.i++
		var w patternValue
		if w, err = p.atom(depth); err != nil {
			break
		}
		if v.isList && w.isList {
			return v, p.errorf("* repeats a list by a number")
		}
		if !v.isList && !w.isList {
			if v.n*w.n >= 1<<20 {
				return v, p.errorf("a number too large")
			}
			v.n *= w.n
			continue
		}
		if !v.isList {
			v, w = w, v
		}
		if int64(len(v.list))*w.n > p.limit {
			return v, p.errorf("longer than %d layers", p.limit)
		}
		out := make([]int64, 0, int64(len(v.list))*max(w.n, 0))
		for range w.n {
			out = append(out, v.list...)
		}
		v.list = out
	}
	return v, err
}

func (p *patternParser) atom(depth int) (patternValue, error) {
	switch c := p.peek(); {
	case c == '(':
		p.i++
		v, err := p.expr(depth + 1)
		if err != nil {
			return v, err
		}
		if p.peek() != ')' {
			return v, p.errorf("want )")
		}
		p.i++
		return v, nil
	case c == '[':
		p.i++
		v := patternValue{isList: true, list: []int64{}}
		for p.peek() != ']' {
			if len(v.list) > 0 {
				if p.peek() != ',' {
					return v, p.errorf("want , or ]")
				}
				p.i++
				if p.peek() == ']' { // a trailing comma
					break
				}
			}
			e, err := p.expr(depth + 1)
			if err != nil {
				return v, err
			}
			if e.isList {
				return v, p.errorf("a list inside a list")
			}
			if int64(len(v.list)) >= p.limit {
				return v, p.errorf("longer than %d layers", p.limit)
			}
			v.list = append(v.list, e.n)
		}
		p.i++
		return v, nil
	case c >= '0' && c <= '9':
		j := p.i
		for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			p.i++
		}
		n, err := strconv.ParseInt(p.s[j:p.i], 10, 64)
		if err != nil || n >= 1<<20 {
			return patternValue{}, p.errorf("a number too large")
		}
		return patternValue{n: n}, nil
	case c == 0:
		return patternValue{}, p.errorf("unexpected end")
	default:
		return patternValue{}, p.errorf("Megatron allows only , digits [ ] ( ) + and * (got %q)", string(c))
	}
}

// megatronExpertRanks refuses an expert-parallel size the data-parallel
// ranks do not divide: Megatron-Core folds the expert ranks over tp x cp
// x dp (parallel_state.py's expert grid, ep x etp x edp = tp x cp x dp),
// memsh takes them from the data-parallel group (core/expert.go). A
// layout that does not divide the GPUs is left to megatronLayout's error.
func megatronExpertRanks(t *tree, o Options, tp int64) error {
	ep, err := t.integer("expert-model-parallel-size", 1, 1, 1<<20)
	if err != nil || ep == 1 {
		return err
	}
	pp, err := t.integer("pipeline-model-parallel-size", 1, 1, 1<<20)
	if err != nil {
		return err
	}
	cp, err := t.integer("context-parallel-size", 1, 1, 1<<20)
	if err != nil {
		return err
	}
	gpus := o.GPUs * o.Nodes
	if gpus%(tp*pp*cp) != 0 {
		return nil
	}
	if dp := gpus / (tp * pp * cp); dp%ep != 0 {
		return t.errorf("expert-model-parallel-size", fmt.Sprintf("an expert-parallel size that divides the %d data-parallel ranks", dp),
			"%d expert ranks over tp %d x cp %d x dp %d (Megatron's MoE parallel folding) are not modelled: memsh takes them from the data-parallel group", ep, tp, cp, dp)
	}
	return nil
}
