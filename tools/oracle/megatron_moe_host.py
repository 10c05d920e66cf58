"""Aten ops of Megatron-Core's MoE router and alltoall token dispatcher, forward and backward, counted by
torch.profiler on a CPU run of Megatron-Core's own code (issue 19: the host side of a Megatron MoE layer).

memsh prices a group of ops whose aten ops are counted at its measured host time per aten op
(sim/timing/host_ops.go, 12.4 us on the H200's host), as it does for transformers' per-expert loop, whose
count came from a CPU run of that code too (cuda_loop_host.py --device cpu). This script counts the part of
a Megatron-Core MoE layer that is many small ops on the host: TopKRouter.forward (the gating GEMM, the score
function, top-k, the aux loss and its tracker) and MoEAlltoAllTokenDispatcher's dispatch_preprocess,
token_dispatch, dispatch_postprocess, combine_preprocess, token_combine and combine_postprocess, with
--ep ranks over gloo (all-gathers and all-to-alls as the runs make them), the experts replaced by one
multiply that is profiled apart and left out. It runs Megatron-Core from a source tree (--mcore: a
checkout of NVIDIA/Megatron-LM at the run's tag, e.g. `git archive core_v0.13.0 megatron/core`).

What a CPU run cannot show, named in the output: the device-to-host copies of the split sizes
(maybe_move_tensor_to_cpu copies nothing on CPU; patched here to copy, as on CUDA: aten::to, _to_copy,
empty_strided, copy_ each), record_stream (one op each on CUDA, none here), and Transformer Engine's fused
permute (--moe-permute-fusion: Triton kernels launched from Python; this run takes the unfused permute).

    python3 tools/oracle/megatron_moe_host.py --mcore core_v0.13.0 --case moonlight --ep 2 --fused --out moe_host.jsonl
    python3 tools/oracle/megatron_moe_host.py --mcore mc013 --case qwen3_swift --ep 1 --device cuda --out h.jsonl

--device cuda (one GPU a rank; not yet run) also times the forward and backward of the same calls, synchronized
at both ends, at a few hundred tokens where the GPU's work is microseconds: the host's time per aten op of
Megatron's own router and dispatcher, to hold against memsh's 12.4 us (an average over Hugging Face steps).
There the unfused permute is Megatron's own (--fused's stand-ins sync the host: leave it off).

One JSON line per rank and case; a few seconds each on a CPU. The record's "mcore" is --mcore as given, so name
the source tree after its tag (sim/testdata/megatron_moe_host.jsonl keeps rank 0 of core_v0.13.0 and core_v0.12.0
with --fused, and of core_r0.11.0 without).
"""
import argparse
import contextlib
import json
import os
import sys
import traceback

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

# The runs' router settings (tests: sim/calib_swift_moe_test.go, sim/calib_bridge_moe_test.go).
CASES = {
    # Megatron-Bridge Qwen3-30B-A3B preset: softmax top-8 of 128, aux loss, forced balanced routing.
    "qwen3_bridge": dict(num_moe_experts=128, moe_router_topk=8, moe_router_score_function="softmax",
                         moe_router_pre_softmax=False,
                         moe_router_load_balancing_type="aux_loss", moe_aux_loss_coeff=1e-3,
                         moe_router_force_load_balancing=True),
    # ms-swift moe.sh on Qwen1.5-MoE-A2.7B: softmax top-4 of 60 (pre-softmax: norm_topk_prob false), aux
    # loss 0.01, router in fp32.
    "qwen15": dict(num_moe_experts=60, moe_router_topk=4, moe_router_score_function="softmax",
                   moe_router_pre_softmax=True, moe_router_load_balancing_type="aux_loss", moe_aux_loss_coeff=1e-2,
                   moe_router_dtype="fp32"),
    # ms-swift qwen3_moe.sh on Qwen3-30B-A3B: softmax top-8 of 128 (norm_topk_prob true), aux loss 1e-3
    # (router_aux_loss_coef), router in bf16, no permute fusion.
    "qwen3_swift": dict(num_moe_experts=128, moe_router_topk=8, moe_router_score_function="softmax",
                        moe_router_pre_softmax=False, moe_router_load_balancing_type="aux_loss",
                        moe_aux_loss_coeff=1e-3),
    # ms-swift deepseek_v3.sh on Moonlight-16B-A3B: sigmoid top-6 of 64 with the expert bias, the scaling
    # factor, normalized top-k, seq_aux_loss 1e-3 (swift/megatron/model/gpt/config.py at cecf735f1).
    "moonlight": dict(num_moe_experts=64, moe_router_topk=6, moe_router_score_function="sigmoid",
                      moe_router_enable_expert_bias=True, moe_router_topk_scaling_factor=2.446,
                      moe_router_pre_softmax=False, moe_router_load_balancing_type="seq_aux_loss",
                      moe_aux_loss_coeff=1e-3, moe_router_dtype="fp32"),
}


def install_fused_standins(td):
    """--moe-permute-fusion: Transformer Engine's moe_permute_with_probs, moe_unpermute and
    moe_sort_chunks_by_index are autograd Functions over Triton kernels. Without TE, stand-ins of the same
    shapes, each an autograd Function whose forward and backward run under record_function("fused_standin"),
    so that their aten ops are left out: the counts are then the dispatcher's own, less what TE's fused calls
    cost on the host (a lower bound for the fused runs)."""

    class Perm(torch.autograd.Function):
        @staticmethod
        def forward(ctx, tokens, probs, routing_map, n):
            with record_function("fused_standin"):
                idx = routing_map.t().contiguous().nonzero()[:, 1][:n]
                ctx.save_for_backward(idx)
                ctx.shape = tokens.shape
                return tokens.index_select(0, idx), probs.t().contiguous().masked_select(routing_map.t()), idx

        @staticmethod
        def backward(ctx, g, gp, gi):
            with record_function("fused_standin"):
                (idx,) = ctx.saved_tensors
                out = g.new_zeros(ctx.shape).index_add_(0, idx, g)
                return out, None, None, None

    class Unperm(torch.autograd.Function):  # with probs (before 0.13): TE's unpermute with merging probs
        @staticmethod
        def forward(ctx, x, idx, shape, probs):
            with record_function("fused_standin"):
                ctx.save_for_backward(idx)
                ctx.probs = probs
                return x.new_zeros(shape).index_add_(0, idx, x)

        @staticmethod
        def backward(ctx, g):
            with record_function("fused_standin"):
                (idx,) = ctx.saved_tensors
                gp = torch.zeros_like(ctx.probs) if ctx.probs is not None else None
                return g.index_select(0, idx), None, None, gp

    class Same(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            with record_function("fused_standin"):
                return x.clone()

        @staticmethod
        def backward(ctx, g):
            with record_function("fused_standin"):
                return g.clone()

    import inspect
    with_probs = "probs" in inspect.signature(td.sort_chunks_by_idxs).parameters  # core_v0.13.0
    five = "align_size" in inspect.signature(td.permute).parameters  # 2026: two more (padding) outputs

    def permute(tokens, routing_map, probs=None, num_out_tokens=None, fused=False, drop_and_pad=False, **kw):
        n = num_out_tokens if num_out_tokens is not None else int(routing_map.sum())
        x, p, idx = Perm.apply(tokens, probs if probs is not None else routing_map.float(), routing_map, n)
        if not with_probs:  # before 0.13: (permuted, sorted_indices)
            return x, idx
        if five:
            return x, (p if probs is not None else None), idx, None, None
        return x, (p if probs is not None else None), idx

    def unpermute(permuted_tokens, sorted_indices, restore_shape, probs=None, routing_map=None, fused=False,
                  drop_and_pad=False, **kw):
        return Unperm.apply(permuted_tokens, sorted_indices, restore_shape, probs)

    def sort_chunks_by_idxs(input, split_sizes, sorted_idxs, probs=None, fused=False):
        if not with_probs:
            return Same.apply(input)
        return Same.apply(input), (Same.apply(probs) if probs is not None else None)

    td.permute, td.unpermute, td.sort_chunks_by_idxs = permute, unpermute, sort_chunks_by_idxs


class _Event:
    def synchronize(self):
        pass


class _Stream:
    def __init__(self, *a, **k):
        pass

    def wait_stream(self, s):
        pass

    def record_event(self, e=None):
        return _Event()

    def synchronize(self):
        pass


def patch_cuda():
    """Megatron-Core's dispatcher makes a side stream for its device-to-host copies: no-ops on CPU."""
    torch.cuda.Stream = _Stream
    torch.cuda.current_stream = lambda *a, **k: _Stream()
    torch.cuda.stream = lambda s: contextlib.nullcontext()
    torch.cuda.current_device = lambda: "cpu"


def counts(prof, lo, hi, names=None):
    n = 0
    for e in prof.events():
        s = e.time_range.start
        if lo <= s <= hi and e.name.startswith("aten::"):
            if names is None or e.name in names:
                n += 1
    return n


def windows(prof, tag):
    return [(e.time_range.start, e.time_range.end) for e in prof.events() if e.name == tag]


def run(rank, world, args, q):
    try:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(args.port))
        cuda = args.device == "cuda"
        if cuda:
            torch.cuda.set_device(rank)
            torch.set_default_device("cuda")
        dist.init_process_group("nccl" if cuda else "gloo", rank=rank, world_size=world)
        sys.path.insert(0, args.mcore)
        if not cuda:
            patch_cuda()
        from megatron.core import parallel_state
        from megatron.core.transformer.moe import moe_utils
        from megatron.core.transformer.transformer_config import TransformerConfig

        def to_host(tensor, as_numpy=False, record_stream=False):
            if torch.is_tensor(tensor):
                tensor = tensor.to(torch.device("cpu"), non_blocking=True, copy=True)  # as a CUDA tensor's copy
                if as_numpy:
                    tensor = tensor.numpy()
            return tensor

        if not cuda:  # on CUDA the copies are real
            moe_utils.maybe_move_tensor_to_cpu = to_host
        if not hasattr(moe_utils, "te_general_gemm"):  # core_v0.13.0 names it only when TE imports
            moe_utils.te_general_gemm = None
        from megatron.core.transformer.moe import token_dispatcher as td
        if not cuda:
            td.maybe_move_tensor_to_cpu = to_host
        if args.fused:
            install_fused_standins(td)
        from megatron.core.transformer.moe.router import TopKRouter
        from megatron.core.transformer.moe.token_dispatcher import MoEAlltoAllTokenDispatcher

        from torch.profiler import record_function as _rf
        globals()["record_function"] = _rf
        parallel_state.initialize_model_parallel(1, 1, expert_model_parallel_size=world)
        case = dict(CASES[args.case])
        if not args.force_balance:
            case.pop("moe_router_force_load_balancing", None)
        import dataclasses
        fields = {f.name for f in dataclasses.fields(TransformerConfig)}
        dropped = sorted(k for k in case if k not in fields)  # settings the release does not have
        case = {k: v for k, v in case.items() if k in fields}
        cfg = TransformerConfig(num_layers=2, hidden_size=args.hidden, num_attention_heads=4,
                                ffn_hidden_size=4 * args.hidden, moe_ffn_hidden_size=args.hidden,
                                use_cpu_initialization=True, moe_token_dispatcher_type="alltoall",
                                expert_model_parallel_size=world, moe_grouped_gemm=True,
                                moe_permute_fusion=False, bf16=True, params_dtype=torch.bfloat16,
                                add_bias_linear=False, **case)
        E = cfg.num_moe_experts
        local = E // world
        kw = {}
        try:  # core_v0.13.0 passes its process groups; older releases read parallel_state
            from megatron.core.transformer.moe.moe_layer import get_default_model_comm_pgs
            kw = dict(model_comm_pgs=get_default_model_comm_pgs())
        except ImportError:
            try:  # 2026's Megatron-LM (Megatron-Bridge's pin) names them pg_collection
                from megatron.core.transformer.moe.moe_utils import get_default_pg_collection
                kw = dict(pg_collection=get_default_pg_collection())
            except ImportError:
                pass
        router = TopKRouter(config=cfg, **kw)
        router.set_layer_number(1)
        disp = MoEAlltoAllTokenDispatcher(local, [rank * local + i for i in range(local)], config=cfg, **kw)
        from torch.profiler import profile, ProfilerActivity, record_function

        class Standin(torch.autograd.Function):  # the experts, left out of the counts
            @staticmethod
            def forward(ctx, x, p):
                with record_function("standin"):
                    if p is None:  # before 0.13 the unpermute weights the rows
                        ctx.p = None
                        return x.clone()
                    ctx.save_for_backward(p)
                    ctx.p = True
                    return x * p.unsqueeze(-1).to(x.dtype)

            @staticmethod
            def backward(ctx, g):
                with record_function("standin"):
                    if ctx.p is None:
                        return g.clone(), None
                    (p,) = ctx.saved_tensors
                    return g * p.unsqueeze(-1).to(g.dtype), None

        class Loss(torch.autograd.Function):  # the test's loss, left out of the counts like the experts
            @staticmethod
            def forward(ctx, y):
                with record_function("standin"):
                    ctx.shape, ctx.dtype = y.shape, y.dtype
                    return y.float().sum()

            @staticmethod
            def backward(ctx, g):
                with record_function("standin"):
                    return g.to(ctx.dtype).expand(ctx.shape)

        def step():
            h = torch.randn(args.tokens, 1, args.hidden, dtype=torch.bfloat16, requires_grad=True)
            with record_function("fwd"):
                with record_function("router"):
                    probs, routing_map = router(h)
                if hasattr(disp, "dispatch_preprocess"):  # core_v0.13.0
                    with record_function("preprocess"):
                        x, p = disp.dispatch_preprocess(h, routing_map, probs)
                    with record_function("dispatch"):  # from the sync (before_ep_alltoall) on
                        x, p = disp.token_dispatch(x, p)
                        x, _, p = disp.dispatch_postprocess(x, p)
                    y = Standin.apply(x, p)
                    with record_function("combine"):
                        y = disp.combine_preprocess(y)
                        y = disp.token_combine(y)
                        y = disp.combine_postprocess(y)
                else:  # token_permutation / token_unpermutation (core_r0.11.0, core_v0.12.0)
                    with record_function("dispatch"):
                        x, _ = disp.token_permutation(h, probs, routing_map)
                    y = Standin.apply(x, None)
                    with record_function("combine"):
                        y, _ = disp.token_unpermutation(y)
                loss = Loss.apply(y)
            with record_function("bwd"):
                loss.backward()

        for _ in range(3):
            step()
        timing = None
        if cuda:  # the host's time per call, the GPU nearly idle at these shapes
            import time
            fw, bw = [], []
            for _ in range(args.iters):
                torch.cuda.synchronize()
                h = torch.randn(args.tokens, 1, args.hidden, dtype=torch.bfloat16, requires_grad=True)
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                probs, routing_map = router(h)
                x, p = disp.dispatch_preprocess(h, routing_map, probs)
                x, p = disp.token_dispatch(x, p)
                x, _, p = disp.dispatch_postprocess(x, p)
                y = disp.combine_postprocess(disp.token_combine(disp.combine_preprocess(Standin.apply(x, p))))
                loss = Loss.apply(y)
                torch.cuda.synchronize()
                t1 = time.perf_counter()
                loss.backward()
                torch.cuda.synchronize()
                t2 = time.perf_counter()
                fw.append(t1 - t0)
                bw.append(t2 - t1)
            fw.sort()
            bw.sort()
            timing = dict(iters=args.iters, fwd_s_median=fw[len(fw) // 2], bwd_s_median=bw[len(bw) // 2])
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        with profile(activities=acts) as prof:
            step()
        rec = dict(case=args.case, mcore=args.mcore, ep=world, rank=rank, tokens=args.tokens, hidden=args.hidden,
                   experts=E, local_experts=local, torch=torch.__version__, force_balance=args.force_balance)
        (flo, fhi), (blo, bhi) = windows(prof, "fwd")[0], windows(prof, "bwd")[0]
        st = windows(prof, "standin") + windows(prof, "fused_standin")
        sf = sum(counts(prof, lo, hi) for lo, hi in st if flo <= lo <= fhi)
        sb = sum(counts(prof, lo, hi) for lo, hi in st if blo <= lo <= bhi)
        fs = windows(prof, "fused_standin")

        def net(k):  # a window's aten ops less the stand-ins inside it
            return sum(counts(prof, lo, hi) - sum(counts(prof, a, b) for a, b in st if lo <= a <= hi)
                       for lo, hi in windows(prof, k))

        part = {k: net(k) for k in ("router", "preprocess", "dispatch", "combine")}
        rec.update(fused=args.fused, fused_standin_calls=len(fs), dropped_settings=dropped, device=args.device)
        if timing:  # includes the experts' and loss's stand-ins (a few small ops each)
            timing["fwd_us_per_aten"] = 1e6 * timing["fwd_s_median"] / max(1, rec["fwd_aten"] + sf)
            timing["bwd_us_per_aten"] = 1e6 * timing["bwd_s_median"] / max(1, rec["bwd_aten"] + sb)
            rec["timing"] = timing
        rec.update(fwd_aten=counts(prof, flo, fhi) - sf, bwd_aten=counts(prof, blo, bhi) - sb,
                   standin_fwd=sf, standin_bwd=sb, parts=part,
                   fwd_d2h_copies=counts(prof, flo, fhi, {"aten::_to_copy"}),
                   not_counted="record_stream per copy on CUDA; TE's fused permute (this run: "
                               + ("stood in for, left out)" if args.fused else "unfused)"))
        if args.names:
            from collections import Counter
            for tag, lo, hi in (("fwd", flo, fhi), ("bwd", blo, bhi)):
                c = Counter(e.name for e in prof.events() if lo <= e.time_range.start <= hi and e.name.startswith("aten::"))
                rec[tag + "_names"] = dict(c.most_common(25))
        q.put(rec)
    except Exception:
        q.put(dict(case=args.case, rank=rank, error=traceback.format_exc()))
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mcore", required=True, help="a Megatron-LM source tree holding megatron/core")
    ap.add_argument("--case", default="moonlight", help=",".join(CASES))
    ap.add_argument("--ep", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=512)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--force-balance", action="store_true")
    ap.add_argument("--fused", action="store_true", help="--moe-permute-fusion: TE's fused permutes left out")
    ap.add_argument("--names", action="store_true", help="also the most frequent aten ops of each pass")
    ap.add_argument("--device", default="cpu", help="cpu (counts) or cuda (counts and host time per call)")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--port", type=int, default=29511)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=run, args=(r, args.ep, args, q)) for r in range(args.ep)]
    for p in procs:
        p.start()
    recs = [q.get(timeout=600) for _ in procs]
    for p in procs:
        p.join()
    with open(args.out, "a") as f:
        for r in sorted(recs, key=lambda r: r.get("rank", 0)):
            f.write(json.dumps(r) + "\n")
            print(json.dumps(r))


if __name__ == "__main__":
    main()
