package replay

import (
	"fmt"
	"strings"

	"github.com/memsh/memsh/sim/core"
	"github.com/memsh/memsh/sim/units"
)

// Gather units: the parameters ZeRO-3 (a module) and FSDP (a module of
// fsdp_units, a repeated block, or the root) all-gather together, and the
// ops that read them.

// buildUnits groups parameters into gather units and finds the ops that
// read them. It fails when a module of fsdp_units holds no parameter (one
// that holds only parameters no op reads is a unit never gathered:
// holdsIdle).
func (d *distState) buildUnits() error {
	prog := d.p
	d.unitOf = fill(make([]int32, len(prog.Params)), none)
	d.opUnits = make([][]int32, len(prog.Ops))
	key := make(map[string]int32, len(prog.Params)) // a unit per module at most: no regrowing
	var blocks map[string]int
	if d.Mode == DistFSDP {
		blocks = d.fsdpBlocks()
	}
	d.blocks = blocks
	if d.Mode == DistZeRO {
		d.blocks = d.fsdpBlocks() // ZeRO-3's units are modules; its blocks place atEdge's
	}
	unitFor := func(pi int32) int32 {
		if u := d.unitOf[pi]; u != none {
			return u
		}
		k, root := d.unitKey(&prog.Params[pi], blocks)
		u, ok := key[k]
		if !ok {
			u = int32(len(d.units))
			key[k] = u
			d.units = append(d.units, gatherUnit{name: k, first: none, last: none, refFirst: none, refLast: none, tensor: none, grad: none, flatGrad: none, postFwd: none, pending: none, root: root})
			d.order = append(d.order, u)
		}
		d.unitOf[pi] = u
		un := &d.units[u]
		un.params = append(un.params, pi)
		un.numel += d.elems(pi)
		un.trainable = un.trainable || prog.Params[pi].Trainable
		un.reference = len(un.params) == 1 && prog.Params[pi].Reference || un.reference && prog.Params[pi].Reference
		return u
	}
	if pr := d.plan.Preference; pr != nil && pr.Reference == core.RefAdapters {
		d.refOps = make([]bool, len(prog.Ops))
		for i := range prog.Ops {
			d.refOps[i] = strings.HasPrefix(prog.Ops[i].Name, core.RefForward+".")
		}
	}
	for i := range prog.Ops {
		for _, pi := range prog.Ops[i].Params {
			u := unitFor(d.root(pi))
			if !containsUnit(d.opUnits[i], u) {
				d.opUnits[i] = append(d.opUnits[i], u)
			}
			un := &d.units[u]
			if d.refOps != nil && d.refOps[i] {
				if un.refFirst == none {
					un.refFirst = int32(i)
				}
				un.refLast = int32(i)
				continue
			}
			if un.first == none {
				un.first = int32(i)
			}
			un.last = int32(i)
		}
	}
	if d.fsdp1 {
		d.fsdp1FoldIdle(key, blocks)
	}
	if d.Mode == DistZeRO {
		for u := range d.units {
			d.units[u].keep = d.units[u].numel < d.zs.Persistence
		}
	}
	for _, name := range d.Par.FSDPUnits {
		if _, ok := key[name]; !ok && !d.holdsIdle(name, blocks) {
			return &units.Error{Path: "parallel", Msg: fmt.Sprintf("fsdp_units: %q names no module with parameters", name),
				Hint: "name modules by path as the model prints them: " + d.moduleNames()}
		}
	}
	return nil
}

// unitKey names the gather unit of parameter p (blocks: fsdpBlocks, under
// FSDP) and says whether it is FSDP's root unit.
func (d *distState) unitKey(p *core.ParamInfo, blocks map[string]int) (string, bool) {
	switch {
	case d.adapterUnits() && p.Role == core.RoleLoRA:
		// FSDP-QLoRA wraps each adapter on its own (peft's
		// fsdp_auto_wrap_policy, Answer.AI's fsdp_qlora), as
		// fms-hf-tuning does any PEFT model (fsdp_adapter_units), so
		// the frozen blocks' flat parameters need no gradient.
		return moduleOf(p.Name), false
	case d.Mode == DistFSDP && p.Reference:
		// DPO's reference copy: TRL's prepare_fsdp calls fully_shard
		// once on the whole copy (trl/models/utils.py at 1.8.0 and
		// 1.16.0; no auto-wrap of its layers, as the review of
		// huggingface/trl#6527 notes), so it is one unit, gathered
		// whole at its forward's start and resharded after it
		// (accelerate passes reshard_after_forward=True); it has no
		// backward.
		return core.RefCopy, false
	case d.Mode == DistFSDP:
		return fsdpUnit(p.Name, blocks)
	}
	return moduleOf(p.Name), false
}

// adapterUnits: FSDP1 wraps each LoRA adapter as a unit of its own
// (unitKey).
func (d *distState) adapterUnits() bool {
	return d.fsdp1 && (d.plan.Quant != "" || d.Par.AdapterUnits)
}

// fsdpBlocks maps the modules FSDP wraps as units to their precedence:
// modules wrapped on their own come first (negative positions), so they
// win over a block that contains them, as a nested fully_shard takes its
// parameters out of the outer unit (fsdpUnit).
func (d *distState) fsdpBlocks() map[string]int {
	prefixes := blockPrefixes(d.plan.Model)
	blocks := make(map[string]int, len(d.Par.FSDPUnits)+len(prefixes))
	for i, u := range d.Par.FSDPUnits {
		blocks[u] = i - len(d.Par.FSDPUnits)
	}
	for i, b := range prefixes {
		if _, ok := blocks[b]; !ok {
			blocks[b] = i
		}
	}
	return blocks
}

// holdsIdle reports whether the unit name holds parameters no op of the
// step reads: a tower the step does not run (a vision tower without
// images, Gemma 4's audio tower), an expert no token reached. FSDP2
// wraps such a module as any other and never gathers it: its pre-forward
// hook never fires, and the root's final backward callback runs its
// post_backward, a no-op for a group that was never unsharded: no
// gradient to reduce (torch/distributed/fsdp/_fully_shard/_fsdp_state.py,
// _root_post_backward_final_callback; _fsdp_param_group.py post_backward:
// "safe to call even when this FSDP parameter group was not used in
// backward (should be a no-op)"). Its sharded parameters are held as
// those of any parameter no op reads are; the unit adds nothing.
func (d *distState) holdsIdle(name string, blocks map[string]int) bool {
	for pi := range d.p.Params {
		if k, _ := fsdpUnit(d.p.Params[pi].Name, blocks); k == name {
			return true
		}
	}
	return false
}

// moduleNames lists the modules of the root unit's parameters (those not
// in a block), without the scopes the lowering adds, for hints.
func (d *distState) moduleNames() string {
	seen := map[string]bool{}
	var out []string
	for pi, u := range d.unitOf {
		if u == none || !d.units[u].root {
			continue
		}
		m := moduleOf(d.p.Params[pi].Name)
		for {
			head, rest, ok := strings.Cut(m, ".")
			if !ok || !isScope(head) {
				break
			}
			m = rest
		}
		if !seen[m] && len(out) < 8 {
			seen[m] = true
			out = append(out, fmt.Sprintf("%q", m))
		}
	}
	return strings.Join(out, ", ")
}

// isScope reports whether a path element is one the lowering adds:
// stage3, mb0, member1, rollout2.
func isScope(s string) bool {
	for _, p := range []string{"stage", "mb", "member", "rollout"} {
		if n, ok := strings.CutPrefix(s, p); ok && n != "" && strings.Trim(n, "0123456789") == "" {
			return true
		}
	}
	return false
}

func containsUnit(us []int32, u int32) bool {
	for _, x := range us {
		if x == u {
			return true
		}
	}
	return false
}

// moduleOf is a parameter's module path ("layers.3.attn.q_proj").
func moduleOf(name string) string {
	for i := len(name) - 1; i >= 0; i-- {
		if name[i] == '.' {
			return name[:i]
		}
	}
	return name
}

// fsdpUnit is the FSDP unit of a parameter: the module of fsdp_units or
// the repeated block whose path prefixes its name, allowing leading scopes
// the lowering adds (pipeline micro-batches "mbK", ensemble members
// "memberK"), else the root. units maps each unit path to its position;
// the lowest position that matches wins. It looks up every dotted sub-path
// of the name rather than trying every block: a scan made FSDP over 65,536
// blocks quadratic (FuzzSizes).
func fsdpUnit(name string, units map[string]int) (string, bool) {
	best, pos, found := "", 0, false
	for s := 0; s < len(name); s++ {
		if s > 0 && name[s-1] != '.' {
			continue // a sub-path starts the name or follows a dot
		}
		for e := s + 1; e < len(name); e++ {
			if name[e] != '.' {
				continue // and ends before a dot
			}
			if i, ok := units[name[s:e]]; ok && (!found || i < pos) {
				best, pos, found = name[s:e], i, true
			}
		}
	}
	if !found {
		return "root", true
	}
	return best, false
}

// blockPrefixes are the module paths of the blocks of the model's
// repeat()s, as the lowering names them (core.BlockPaths).
func blockPrefixes(m *core.Model) []string {
	return core.BlockPaths(m)
}
