#!/usr/bin/env python3
"""CUDA graph checks of gmr.torch on a real GPU (issue: PyTorch's CUDA graphs on
gmr, never a wrong result). Each (check, allocator) pair runs in a process of
its own, since PyTorch chooses its allocator once per process; every result is
compared with eager execution in the same process, and the table puts each gmr
stack beside PyTorch's own allocator ("native"). Memory is what the device has
in use (cudaMemGetInfo: total - free) when the check ends.

  PYTHONPATH=python python3 tools/frameworks/graph_checks.py \
      [--stacks 'native;vmm;pool > cuda(kind=device)'] [--only compile_infer,...] [--json F]

Prints one line per pair, "PASS|FAIL check [stack]: ...", then a table and
"N passed, M failed". A check FAILS on any result that differs from eager by
more than its tolerance, or on an error it does not expect.
"""

import argparse
import json
import os
import subprocess
import sys
import time
import traceback

MIB = 1 << 20
DEFAULT_STACKS = ["native", "vmm", "pool > cuda(kind=device)", "vmm_pages",
                  "pool > cuda(kind=async)"]


_MEMPOOL = {}


def _setup(stack):
    """Choose the allocator before CUDA starts; deterministic fp32 numerics.
    "mempool:SPEC" leaves PyTorch's allocator in charge and hands graphs a
    gmr MemPool (MemPool mode; only check_mempool_graphs uses it)."""
    if stack.startswith("mempool:"):
        import gmr.torch
        import torch
        _MEMPOOL["pool"] = gmr.torch.mempool(stack[len("mempool:"):] or None)
    elif stack != "native":
        import gmr.torch
        gmr.torch.use(None if stack == "vmm" else stack)
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    return torch


def _in_use(torch):
    torch.cuda.synchronize()
    free, total = torch.cuda.mem_get_info()
    return total - free


def _diff(a, b):
    return float((a.float() - b.float()).abs().max())


def _compile_infer(torch, trees):
    import torch._inductor.config as inductor_config
    inductor_config.triton.cudagraph_trees = trees
    layer = torch.nn.TransformerEncoderLayer(d_model=512, nhead=8, dim_feedforward=1024,
                                             batch_first=True, dropout=0.0)
    model = torch.nn.TransformerEncoder(layer, num_layers=4).cuda().eval()
    compiled = torch.compile(model, mode="reduce-overhead")
    worst, wrong, calls = 0.0, 0, 0
    with torch.no_grad():
        for _ in range(4):
            for batch in (1, 4, 16, 8):
                x = torch.randn(batch, 32, 512, device="cuda")
                got = compiled(x).clone()
                want = model(x)
                d = _diff(got, want)
                worst = max(worst, d)
                wrong += d > 1e-2
                calls += 1
    return {"wrong": wrong, "calls": calls, "max_abs_diff": worst}


def check_compile_infer_trees(torch):
    """torch.compile(mode="reduce-overhead") inference, CUDA graph trees on
    (PyTorch's default), batch sizes 1, 4, 16, 8 cycling."""
    return _compile_infer(torch, True)


def check_compile_infer_no_trees(torch):
    """The same with cudagraph_trees off (one private pool per graph)."""
    return _compile_infer(torch, False)


def _train_model(torch):
    torch.manual_seed(1)
    layer = torch.nn.TransformerEncoderLayer(d_model=256, nhead=4, dim_feedforward=512,
                                             batch_first=True, dropout=0.0)
    return torch.nn.Sequential(torch.nn.TransformerEncoder(layer, num_layers=2),
                               torch.nn.Flatten(), torch.nn.Linear(256 * 16, 10)).cuda()


def check_compile_train_trees(torch):
    """Training of a small transformer under torch.compile(mode="reduce-overhead")
    (forward, backward, AdamW), trees on; losses compared with eager training
    from the same weights and data."""
    import copy
    model = _train_model(torch)
    eager = copy.deepcopy(model)
    compiled = torch.compile(model, mode="reduce-overhead")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    opt_eager = torch.optim.AdamW(eager.parameters(), lr=1e-3)
    worst, wrong, steps = 0.0, 0, 8
    gen = torch.Generator(device="cuda").manual_seed(2)
    for _ in range(steps):
        x = torch.randn(8, 16, 256, device="cuda", generator=gen)
        y = torch.randint(0, 10, (8,), device="cuda", generator=gen)
        torch.compiler.cudagraph_mark_step_begin()
        loss = torch.nn.functional.cross_entropy(compiled(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        loss_eager = torch.nn.functional.cross_entropy(eager(x), y)
        loss_eager.backward()
        opt_eager.step()
        opt_eager.zero_grad(set_to_none=True)
        d = abs(float(loss) - float(loss_eager))
        worst = max(worst, d)
        wrong += d > 1e-2
    final = max(_diff(p, q) for p, q in zip(model.parameters(), eager.parameters()))
    wrong += final > 1e-2
    return {"wrong": wrong, "calls": steps, "max_abs_diff": max(worst, final)}


def check_graphed_callables(torch):
    """torch.cuda.make_graphed_callables on a module in training: outputs and
    gradients compared with an eager copy."""
    import copy
    torch.manual_seed(3)
    model = torch.nn.Sequential(torch.nn.Linear(512, 2048), torch.nn.GELU(),
                                torch.nn.Linear(2048, 512)).cuda()
    eager = copy.deepcopy(model)
    sample = torch.randn(64, 512, device="cuda", requires_grad=True)
    graphed = torch.cuda.make_graphed_callables(model, (sample,))
    worst, wrong, steps = 0.0, 0, 20
    for _ in range(steps):
        x = torch.randn(64, 512, device="cuda", requires_grad=True)
        x2 = x.detach().clone().requires_grad_(True)
        out = graphed(x)
        out.square().sum().backward()
        ref = eager(x2)
        ref.square().sum().backward()
        d = max(_diff(out, ref), _diff(x.grad, x2.grad),
                max(_diff(p.grad, q.grad) for p, q in zip(model.parameters(),
                                                          eager.parameters())))
        for m in (model, eager):
            for p in m.parameters():
                p.grad = None
        worst = max(worst, d)
        wrong += d > 1e-3
    return {"wrong": wrong, "calls": steps, "max_abs_diff": worst}


def _mlp_step(torch, w1, w2, x):
    h = torch.nn.functional.gelu(x @ w1)
    scratch = h * 0.5          # temporaries freed inside the capture
    out = (scratch + h) @ w2
    return out.tanh()


def check_shared_pool(torch):
    """Several graphs share one pool (graph_pool_handle), captured largest
    batch first, replayed in mixed order with eager work in between (the
    LLM-serving pattern); each replay compared with eager."""
    w1 = torch.randn(1024, 4096, device="cuda") / 32
    w2 = torch.randn(4096, 1024, device="cuda") / 64
    pool = torch.cuda.graph_pool_handle()
    graphs = {}
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for batch in (64, 32, 16, 8, 1):
            static_x = torch.randn(batch, 1024, device="cuda")
            _mlp_step(torch, w1, w2, static_x)  # warm-up
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=pool, stream=stream):
                static_out = _mlp_step(torch, w1, w2, static_x)
            graphs[batch] = (g, static_x, static_out)
    torch.cuda.current_stream().wait_stream(stream)
    gen = torch.Generator(device="cuda").manual_seed(4)
    worst, wrong, calls = 0.0, 0, 0
    order = [1, 64, 8, 32, 16, 1, 16, 64, 8, 32] * 10
    for i, batch in enumerate(order):
        g, static_x, static_out = graphs[batch]
        x = torch.randn(batch, 1024, device="cuda", generator=gen)
        static_x.copy_(x)
        # Eager work between replays: allocations that must never land on
        # the pool's memory.
        noise = [torch.randn(batch * (1 + i % 7), 1024, device="cuda") for _ in range(3)]
        g.replay()
        junk = sum(n.sum() for n in noise)
        got = static_out.clone()
        want = _mlp_step(torch, w1, w2, x)
        d = _diff(got, want)
        worst = max(worst, d)
        wrong += d > 1e-3
        calls += 1
        del noise, junk
    return {"wrong": wrong, "calls": calls, "max_abs_diff": worst}


def check_fork_stream(torch):
    """A capture on a side stream that forks a second stream inside the
    capture (record_stream on the forked use, freed before the join)."""
    s1 = torch.cuda.Stream()
    s2 = torch.cuda.Stream()
    static_x = torch.randn(4096, 1024, device="cuda")
    g = torch.cuda.CUDAGraph()

    def body(x):
        a = x * 2
        s2.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s2):
            b = a.sin()               # a is read on s2
            c = b * 3
        a.record_stream(s2)
        del a                         # freed on s1 while s2 may still read it
        d = torch.empty_like(x).fill_(1.0)  # the same size: must not reuse a
        torch.cuda.current_stream().wait_stream(s2)
        return c + d

    s1.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s1):
        body(static_x)
        torch.cuda.synchronize()
        with torch.cuda.graph(g, stream=s1):
            static_out = body(static_x)
    torch.cuda.current_stream().wait_stream(s1)
    worst, wrong, calls = 0.0, 0, 0
    for _ in range(50):
        x = torch.randn(4096, 1024, device="cuda")
        static_x.copy_(x)
        g.replay()
        d = _diff(static_out, (x * 2).sin() * 3 + 1.0)
        worst = max(worst, d)
        wrong += d > 1e-4
        calls += 1
    return {"wrong": wrong, "calls": calls, "max_abs_diff": worst}


def check_release_reuse(torch):
    """A graph deleted and its pool released: device memory comes back at
    empty_cache, and a new capture of the same size reuses it."""
    import gc

    def capture(n):
        static_x = torch.randn(n, device="cuda")
        g = torch.cuda.CUDAGraph()
        torch.cuda.synchronize()
        with torch.cuda.graph(g):
            tmp = [static_x * k for k in range(8)]   # 8 x n floats inside the pool
            out = sum(tmp)
        return g, static_x, out

    n = 64 * MIB // 4
    base = _in_use(torch)
    g, x, out = capture(n)
    g.replay()
    ok1 = _diff(out, x * 28) < 1e-3
    held = _in_use(torch) - base
    del g, out, x
    gc.collect()
    torch.cuda.empty_cache()
    after_release = _in_use(torch) - base
    g2, x2, out2 = capture(n)
    g2.replay()
    ok2 = _diff(out2, x2 * 28) < 1e-3
    second = _in_use(torch) - base
    wrong = (not ok1) + (not ok2)
    if after_release > held // 2:
        wrong += 1  # memory did not come back
    return {"wrong": wrong, "calls": 2, "max_abs_diff": 0.0,
            "detail": "in use over the start: %d MiB with the graph, %d MiB after its release "
                      "and empty_cache, %d MiB with a second graph of the same size"
                      % (held // MIB, after_release // MIB, second // MIB)}


def check_capture_oom(torch):
    """A capture that runs out of memory: a clear error, and the process goes
    on (eager work and the next capture run)."""
    total = torch.cuda.get_device_properties(0).total_memory
    g = torch.cuda.CUDAGraph()
    text = ""
    try:
        with torch.cuda.graph(g):
            torch.empty(2 * total, dtype=torch.uint8, device="cuda")
    except Exception as e:  # noqa: BLE001 (torch raises RuntimeError or OutOfMemoryError)
        text = "%s: %s" % (type(e).__name__, " ".join(str(e).split())[:300])
    del g
    x = torch.ones(1 << 20, device="cuda")
    eager_ok = float((x * 2).sum()) == 2.0 * (1 << 20)
    g2 = torch.cuda.CUDAGraph()
    static = torch.ones(1 << 20, device="cuda")
    with torch.cuda.graph(g2):
        out = static * 3
    g2.replay()
    graph_ok = float(out.sum()) == 3.0 * (1 << 20)
    wrong = (not text) + (not eager_ok) + (not graph_ok)
    return {"wrong": wrong, "calls": 1, "max_abs_diff": 0.0, "detail": text or "no error"}


def check_mempool_graphs(torch):
    """Graphs captured into one pool that, under "mempool:SPEC", is a gmr
    MemPool (PyTorch's caching allocator carving gmr's segments), replayed in
    mixed order with eager allocations between; each replay against eager.
    Other stacks capture into graph_pool_handle() for the same check."""
    pool = _MEMPOOL["pool"].id if "pool" in _MEMPOOL else torch.cuda.graph_pool_handle()
    w1 = torch.randn(1024, 2048, device="cuda") / 32
    w2 = torch.randn(2048, 1024, device="cuda") / 45
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    graphs = {}
    with torch.cuda.stream(stream):
        for batch in (32, 8, 1):
            static_x = torch.randn(batch, 1024, device="cuda")
            _mlp_step(torch, w1, w2, static_x)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=pool, stream=stream):
                static_out = _mlp_step(torch, w1, w2, static_x)
            graphs[batch] = (g, static_x, static_out)
    torch.cuda.current_stream().wait_stream(stream)
    worst, wrong, calls = 0.0, 0, 0
    for i, batch in enumerate([1, 32, 8] * 20):
        g, static_x, static_out = graphs[batch]
        x = torch.randn(batch, 1024, device="cuda")
        static_x.copy_(x)
        noise = torch.randn(batch * (1 + i % 5), 1024, device="cuda")
        g.replay()
        got = static_out.clone()
        d = _diff(got, _mlp_step(torch, w1, w2, x))
        worst = max(worst, d)
        wrong += d > 1e-3
        calls += 1
        del noise
    return {"wrong": wrong, "calls": calls, "max_abs_diff": worst}


CHECKS = {name[len("check_"):]: fn for name, fn in globals().items() if name.startswith("check_")}


def run_one(name, stack):
    torch = _setup(stack)
    start = time.time()
    out = CHECKS[name](torch)
    out["in_use_mib"] = _in_use(torch) // MIB
    out["seconds"] = round(time.time() - start, 1)
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--stacks", default=";".join(DEFAULT_STACKS),
                   help="';'-separated gmr specs; 'native' is PyTorch's allocator")
    p.add_argument("--only", help="comma-separated check names")
    p.add_argument("--json", help="write the results here")
    p.add_argument("--timeout", type=int, default=300)
    p.add_argument("--one", nargs=2, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one:
        try:
            print("RESULT " + json.dumps(run_one(*args.one)), flush=True)
            return 0
        except Exception:  # noqa: BLE001
            traceback.print_exc()
            return 1
    names = args.only.split(",") if args.only else list(CHECKS)
    stacks = [s.strip() for s in args.stacks.split(";") if s.strip()]
    results, passed, failed = [], 0, 0
    for name in names:
        for stack in stacks:
            try:
                run = subprocess.run([sys.executable, os.path.abspath(__file__), "--one", name,
                                      stack], capture_output=True, text=True,
                                     timeout=args.timeout)
                lines = [l for l in run.stdout.splitlines() if l.startswith("RESULT ")]
                out = json.loads(lines[-1][7:]) if lines else {
                    "error": " | ".join(run.stderr.strip().splitlines()[-6:])[-900:]}
            except subprocess.TimeoutExpired:
                out = {"error": "timed out after %d s" % args.timeout}
            ok = "error" not in out and out["wrong"] == 0
            passed += ok
            failed += not ok
            out.update(check=name, stack=stack)
            results.append(out)
            print("%s %s [%s]: %s" % ("PASS" if ok else "FAIL", name, stack,
                                      json.dumps({k: v for k, v in out.items()
                                                  if k not in ("check", "stack")})), flush=True)
    print("\n| check | " + " | ".join(stacks) + " |")
    print("| --- |" + " --- |" * len(stacks))
    for name in names:
        cells = []
        for stack in stacks:
            r = next(x for x in results if x["check"] == name and x["stack"] == stack)
            cells.append("error" if "error" in r else "%d/%d wrong, %d MiB" % (
                r["wrong"], r["calls"], r["in_use_mib"]))
        print("| %s | %s |" % (name, " | ".join(cells)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    print("%d passed, %d failed" % (passed, failed))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
