#!/usr/bin/env python3
"""Differential test of memsh against PyTorch: random configurations, measured, replayed, shrunk.

Needs torch 2.x in a venv outside the repo (the vectors record the version they were measured with):
    python3 -m venv ~/venv-oracle && ~/venv-oracle/bin/pip install torch==2.15.0
Commands (run from tools/oracle; one process at a time, one thread):
    ~/venv-oracle/bin/python difftest.py generate --seed 29 --count 560 --out /tmp/random.jsonl
        draw configurations from the seed and measure each at two depths (1 block and `layers` blocks);
        an existing --out is resumed (ids already there are skipped)
    ~/venv-oracle/bin/python difftest.py check /tmp/random.jsonl
        replay them through memsh (go test ./tools/oracle with MEMSH_ORACLE_VECTORS) and list the failures
    ~/venv-oracle/bin/python difftest.py split /tmp/random.jsonl
        write the vectors that replay exactly to vectors/random.jsonl, the others to vectors/open.jsonl
        (removed when none differs)
    ~/venv-oracle/bin/python difftest.py shrink /tmp/random.jsonl --ids s29-0343 --out /tmp/shrunk.jsonl
        reduce each failing case (here one) to the smallest configuration that still differs, and keep that one;
        run it from a tree whose memsh lacks the fix, so that the shrunk vector pins the one cause
    ~/venv-oracle/bin/python difftest.py remeasure vectors/random.jsonl --mode every --why "..."
        measure again, in place, the vectors whose checkpoint mode changed meaning in blocks.py (an open
        vector's memsh figures are pinned again; the note says why)
The stored vectors (vectors/*.jsonl) are replayed by replay_test.go in CI, without Python.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
ACTS = ["gelu", "relu", "silu", "tanh", "sigmoid", "swiglu", "geglu"]


def draw(rng):
    """One random configuration (a dict as script.go's Config reads it) and its depth."""
    a = rng.choice([1, 2, 3, 4, 6, 8])
    d = rng.choice([4, 6, 8, 12, 16, 24, 32])
    kv = rng.choice([x for x in range(1, a + 1) if a % x == 0])
    h = a * d
    rope = rng.random() < 0.5
    attn = rng.choice(["eager", "eager", "sdpa"])
    c = dict(h=h, a=a, kv=kv, ffn=rng.randint(3, 400), s=rng.randint(3, 96), b=rng.randint(1, 3),
             vocab=rng.randint(5, 500), norm=rng.choice(["layernorm", "layernorm_nobias", "rmsnorm"]),
             fused_qkv=kv == a and rng.random() < 0.5, qkv_bias=rng.random() < 0.5, out_bias=rng.random() < 0.5,
             rope=rope, softmax_fp32=rng.random() < (0.8 if rope else 0.2), attn=attn,
             attn_drop=0.0 if attn == "sdpa" or rng.random() < 0.5 else rng.choice([0.1, 0.25]),
             act=rng.choice(ACTS), mlp_bias=rng.random() < 0.5,
             mlp_drop=0.0 if rng.random() < 0.6 else 0.1, final_norm=rng.random() < 0.7,
             tie=rng.random() < 0.3, logits_fp32=rng.random() < 0.6, loss_chunks=rng.choice([1, 1, 1, 2, 3, 4]),
             dtype=rng.choice(["fp32", "bf16", "amp_bf16"]))
    if c["loss_chunks"] > 1:
        c["logits_fp32"] = True  # torchtune's loss upcasts each chunk
    mode = rng.choice(["none", "none", "full", "selective", "every", "modules"])
    ck = dict(mode=mode, reentrant=rng.random() < 0.5)
    if mode == "none":
        ck["reentrant"] = False
    if mode == "every":
        ck["every"] = rng.choice([2, 3])
    if mode == "modules":
        ck["modules"] = rng.choice([["attention"], ["mlp"], ["attention", "mlp"]])
    c["ckpt"] = ck
    if rng.random() < 0.2:
        roles = (["qkv"] if c["fused_qkv"] else ["q", "k", "v"]) + ["o", "up", "down"]
        roles += ["gate"] if c["act"] in ("swiglu", "geglu") else []
        targets = ["all-linear"] if rng.random() < 0.3 else sorted(rng.sample(roles, rng.randint(1, 3)))
        if rng.random() < 0.2 and not c["tie"]:
            targets.append("lm_head")
        rank = rng.randint(1, 8)
        c["lora"] = dict(rank=rank, alpha=float(2 * rank), targets=targets)
    elif rng.random() < 0.15:
        c["freeze"] = rng.choice([["embed"], ["norm"], ["embed", "norm"]])
    return c, rng.choice([2, 3])


def figures(c, depth):
    from measure import measure
    return measure(c, depth)


ASSERTED = ["params", "trainable", "param_bytes", "grad_bytes", "optimizer_bytes", "saved_activations",
            "saved_weight_copies"]


def vector(vid, c, depth, cmd, note=None):
    meas, extra = {}, {}
    for dp in sorted({1, depth}):
        f = figures(c, dp)
        meas[str(dp)] = {k: f[k] for k in ASSERTED}
        extra[str(dp)] = {k: v for k, v in f.items() if k not in ASSERTED}
    v = dict(id=vid, config=c, measured=meas, torch=torch.__version__, command=cmd,
             extra={"not_asserted": extra})
    if note:
        v["note"] = note
    return v


def read(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def generate(args):
    done = {v["id"] for v in read(args.out)}
    rng = random.Random(args.seed)
    invalid = 0
    with open(args.out, "a") as fo:
        for i in range(args.count):
            c, depth = draw(rng)
            vid = f"s{args.seed}-{i:04d}"
            if vid in done:
                continue
            cmd = f"difftest.py generate --seed {args.seed} --count {args.count} (case {i})"
            try:
                v = vector(vid, c, depth, cmd)
            except RuntimeError as e:  # PyTorch refuses the configuration (see the report: counted, not kept)
                invalid += 1
                print(f"{vid}: not measurable: {str(e).splitlines()[0][:200]}", file=sys.stderr, flush=True)
                continue
            fo.write(json.dumps(v, separators=(",", ":")) + "\n")
            fo.flush()
            print(f"{vid} ok", file=sys.stderr, flush=True)
    print(f"done; {invalid} not measurable", file=sys.stderr)


def replay(vectors):
    """memsh's figures for each vector, by id: {id: {depth: figures or {"error": ...}}}."""
    with tempfile.TemporaryDirectory() as tmp:
        src, out = os.path.join(tmp, "in.jsonl"), os.path.join(tmp, "out.jsonl")
        with open(src, "w") as f:
            for v in vectors:
                f.write(json.dumps(v) + "\n")
        env = dict(os.environ, MEMSH_ORACLE_VECTORS=src, MEMSH_ORACLE_OUT=out)
        subprocess.run(["go", "test", "-count=1", "-run", "TestVectors", "./tools/oracle"], cwd=ROOT, env=env,
                       capture_output=True, text=True)
        return {r["id"]: r["memsh"] for r in read(out)}


def diffs(v, got):
    out = {}
    for dp, want in v["measured"].items():
        g = (got or {}).get(dp) or {}
        if "error" in g:
            out[dp] = {"error": g["error"]}
            continue
        d = {k: g.get(k, 0) - want[k] for k in ASSERTED if g.get(k) != want[k]}
        if d:
            out[dp] = d
    return out


def check(args):
    vs = read(args.file)
    got = replay(vs)
    bad = 0
    for v in vs:
        d = diffs(v, got.get(v["id"]))
        if d:
            bad += 1
            print(json.dumps({"id": v["id"], "diff": d, "config": v["config"]}))
    print(f"{len(vs)} vectors, {bad} differ", file=sys.stderr)


def cause(v, d):
    """A first guess at the cause of a difference, from the configuration and the fields that differ."""
    c, fields = v["config"], set().union(*[set(x) for x in d.values()])
    if "trainable" in fields:
        return "LoRA: trainable parameters differ (adapter targets)"
    if c.get("lora") and c["dtype"] == "amp_bf16":
        return "LoRA under autocast: frozen weights' casts"
    if c.get("lora"):
        return "LoRA: saved tensors differ"
    if c.get("freeze"):
        return "frozen embedding or norms: saved tensors differ"
    return "saved tensors differ: " + ", ".join(sorted(fields))


def split(args):
    """Vectors that replay exactly go to vectors/random.jsonl, the others to vectors/open.jsonl with memsh's
    figures pinned and a first guess at the cause."""
    vs = read(args.file)
    got = replay([dict(v, open=None) if "open" in v else v for v in vs])
    ok, bad = [], []
    for v in vs:
        v.pop("open", None)
        d = diffs(v, got.get(v["id"]))
        if d:
            v["open"] = {"cause": cause(v, d), "memsh": got[v["id"]]}
            bad.append(v)
        else:
            ok.append(v)
    for name, rows in ((args.ok_out, ok), (args.open_out, bad)):
        if not rows:
            if name == args.open_out and os.path.exists(name):
                os.remove(name)  # nothing open: no file
            continue
        with open(name, "w") as f:
            for v in rows:
                f.write(json.dumps(v, separators=(",", ":")) + "\n")
    print(f"{len(ok)} pass, {len(bad)} open", file=sys.stderr)


def remeasure(args):
    vs = read(args.file)
    redo = [v for v in vs if v["config"]["ckpt"]["mode"] == args.mode]
    for v in redo:
        nv = vector(v["id"], v["config"], max(int(k) for k in v["measured"]), v["command"])
        v.update(measured=nv["measured"], torch=nv["torch"], extra=nv["extra"])
        v["note"] = (v["note"] + "; " if v.get("note") else "") + "remeasured: " + args.why
        print(f"{v['id']} remeasured", file=sys.stderr, flush=True)
    opened = [v for v in redo if "open" in v]
    if opened:
        got = replay([dict(v, open=None) for v in opened])
        for v in opened:
            v["open"]["memsh"] = got[v["id"]]
    with open(args.file, "w") as f:
        for v in vs:
            f.write(json.dumps(v, separators=(",", ":")) + "\n")
    print(f"{len(redo)} remeasured, {len(opened)} of them open", file=sys.stderr)


def simpler(c):
    """Candidate reductions of c, most drastic first: every size at its least, every size halved, then one
    option or one size at a time."""
    out = []

    def with_(**kw):
        n = json.loads(json.dumps(c))
        n.update(kw)
        if n != c:
            out.append(n)
    d = c["h"] // c["a"]
    least = dict(b=1, s=max(2, c["loss_chunks"]), ffn=1, vocab=2, a=1, kv=1, h=2)
    with_(**least)
    with_(**{k: v for k, v in least.items() if k not in ("a", "kv", "h")})  # keep the heads
    with_(b=max(1, c["b"] // 2), s=max(2, c["s"] // 2), ffn=max(1, c["ffn"] // 2), vocab=max(2, c["vocab"] // 2))
    for k, v in [("lora", None), ("freeze", None)]:
        if c.get(k):
            n = json.loads(json.dumps(c))
            del n[k]
            out.append(n)
    if c["ckpt"]["mode"] != "none":
        with_(ckpt=dict(mode="none", reentrant=False))
        if c["ckpt"]["reentrant"]:
            with_(ckpt=dict(c["ckpt"], reentrant=False))
    for k, v in [("attn_drop", 0.0), ("mlp_drop", 0.0), ("qkv_bias", False), ("out_bias", False),
                 ("mlp_bias", False), ("final_norm", False), ("tie", False), ("loss_chunks", 1),
                 ("rope", False), ("softmax_fp32", False), ("fused_qkv", False), ("logits_fp32", False),
                 ("attn", "eager"), ("act", "relu"), ("norm", "layernorm"), ("dtype", "fp32")]:
        if c[k] != v:
            with_(**{k: v})
    if c["kv"] != c["a"]:
        with_(kv=c["a"], fused_qkv=False)
    for k, lo in [("b", 1), ("s", 2), ("ffn", 1), ("vocab", 2)]:
        if c[k] > lo:
            with_(**{k: max(lo, c[k] // 2)})
            with_(**{k: c[k] - 1})
    if c["a"] > 1:
        with_(a=1, kv=1, h=d, fused_qkv=c["fused_qkv"])
    if d > 2:
        nd = max(2, (d // 2) // 2 * 2)
        with_(h=c["a"] * nd)
    return out


def shrink(args):
    """Greedy reduction: each round measures the candidate reductions (simpler()) in batches and replays a batch
    through memsh at once; the first that still differs becomes the case, until none does."""
    vs = [v for v in read(args.file)]
    if args.ids:
        vs = [v for v in vs if v["id"] in args.ids.split(",")]
    for v in vs:
        v.pop("open", None)
    got = replay(vs)
    failing = [v for v in vs if diffs(v, got.get(v["id"]))][:args.limit]
    print(f"{len(failing)} failing of {len(vs)}", file=sys.stderr)
    kept = {v["id"] for v in read(args.out)}
    with open(args.out, "a") as fo:
        for v in failing:
            sid = v["id"] + "-shrunk"
            if sid in kept:
                continue
            c, depth = v["config"], max(int(k) for k in v["measured"])
            cur, steps = v, 0
            while True:
                found = None
                cands = simpler(c)
                for at in range(0, len(cands), args.batch):
                    batch = []
                    for j, cand in enumerate(cands[at:at + args.batch]):
                        try:
                            batch.append(vector(f"{sid}-{at + j}", cand, depth, cur["command"]))
                        except RuntimeError:  # PyTorch refuses the reduction
                            continue
                    res = replay(batch)
                    found = next((cv for cv in batch if diffs(cv, res.get(cv["id"]))), None)
                    if found:
                        break
                if not found:
                    break
                c, cur, steps = found["config"], found, steps + 1
            cur["id"] = sid
            cur["note"] = f"shrunk from {v['id']} in {steps} steps; memsh differed: " + \
                json.dumps(diffs(cur, replay([cur]).get(sid)))
            cur["command"] = f"difftest.py shrink (from {v['id']}: {v['command']})"
            fo.write(json.dumps(cur, separators=(",", ":")) + "\n")
            fo.flush()
            print(f"{sid}: {cur['note']}", file=sys.stderr, flush=True)


def main():
    torch.set_num_threads(1)
    sys.path.insert(0, HERE)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("generate")
    g.add_argument("--seed", type=int, required=True)
    g.add_argument("--count", type=int, required=True)
    g.add_argument("--out", required=True)
    k = sub.add_parser("check")
    k.add_argument("file")
    s = sub.add_parser("shrink")
    s.add_argument("file")
    s.add_argument("--out", required=True)
    s.add_argument("--limit", type=int, default=1000, help="shrink at most this many failing cases")
    s.add_argument("--ids", help="only these vectors (comma-separated ids)")
    s.add_argument("--batch", type=int, default=8, help="candidates measured and replayed together")
    p = sub.add_parser("split")
    p.add_argument("file")
    p.add_argument("--ok-out", default=os.path.join(HERE, "vectors", "random.jsonl"))
    p.add_argument("--open-out", default=os.path.join(HERE, "vectors", "open.jsonl"))
    r = sub.add_parser("remeasure")
    r.add_argument("file")
    r.add_argument("--mode", required=True, help="the checkpoint mode whose vectors are measured again")
    r.add_argument("--why", required=True, help="what changed, for the vectors' notes")
    args = ap.parse_args()
    {"generate": generate, "check": check, "shrink": shrink, "split": split, "remeasure": remeasure}[args.cmd](args)


if __name__ == "__main__":
    main()
