#!/usr/bin/env python3
"""Sleep and wake of gmr.torch on a real GPU (issues 23 and 33): what an LLM
server does between workloads, with a transformers Llama model built from a
config (random fp16 weights, nothing downloaded), under gmr.torch direct mode
and the default stack "vmm"; the bandwidth of sleep and wake beside a plain
pinned copy; a KV cache reserved now and committed later under CUDA graphs;
nothing unmapped under a running kernel.

  PYTHONPATH=python:tools/frameworks GMR_LIBRARY_DIR=.gpu/lib python3 \
      tools/frameworks/serving_check.py \
      [--parts model,cycles,bench,modelbench,kvcache,unmap,turns] [--cycles 100] [--json F]
  (tools/frameworks/serving_check.sh sets the paths, builds the shim, and
  writes $OUT/serving_check.txt)

Each part runs in processes of its own (PyTorch swaps its allocator once per
process):
  model   generate; CUDA graphs of the forward for batch sizes 1, 2, 4, 8;
          sleep with the weights, the graphs' static inputs and untagged
          memory backed up (KV cache and graph pools discarded): gmr holds
          at most 4 MiB, and device memory in use (cudaMemGetInfo) falls to
          what it was before the model (the CUDA context, cuBLAS) plus at
          most 32 MiB (the driver's CUDA graph executables; printed); wake;
          generate, eager and graph outputs bit-identical
          to before; bad input (double sleep, wake without sleep, allocation
          while asleep, sleep during a capture) refused with the pool intact;
          everything freed at the end.
  cycles  N sleep/wake cycles of the same model: device memory in use after
          each sleep and after each wake, and gmr's host (pinned) bytes, the
          same every cycle; outputs still identical.
  bench, modelbench
          sleep and wake bandwidth of one tagged buffer of 64 MiB .. 4 GiB
          and of the Llama model, default options and the other choices,
          beside a plain pinned copy of the same bytes, with the host memory
          held awake and asleep (serving_bench.py; issue 33, goal 1).
  kvcache, unmap
          a KV cache reserved now and committed later under CUDA graphs
          (replays bit-identical to eager across commits, decommits, a
          failed commit, sleep and wake), and decommit and sleep waiting for
          a kernel still running on the memory (serving_kv.py; goals 2, 3).
  turns   two processes on one GPU taking turns, each with a model and a KV
          cache of 60% of the device (they cannot both be awake): one
          sleeps, the other wakes and runs; a wake while the other is awake
          fails with gmr.OutOfMemoryError and succeeds once it sleeps; both
          outputs identical to their own before every sleep.
Prints "PASS|FAIL part: check ..." lines, markdown tables for BENCHMARKS.md
(the bandwidth table, then a GOAL line per default-options row: met or
MISSED, at 80% of the plain copy), and "N passed, M failed" last.
"""

import argparse
import json
import os
import subprocess
import sys
import time
import traceback

MIB = 1 << 20
GIB = 1 << 30
BATCHES = (8, 4, 2, 1)  # captured largest first, one shared graph pool (vLLM's order)
SEQ = 32


# ---- helpers used in the child processes -------------------------------------------

def _torch():
    import gmr.torch  # noqa: PLC0415
    gmr.torch.use()  # the default stack: vmm
    import torch  # noqa: PLC0415
    torch.manual_seed(0)
    return torch, gmr.torch


def _in_use(torch):
    torch.cuda.synchronize()
    free, total = torch.cuda.mem_get_info()
    return total - free


def _config(layers=8):
    from transformers import LlamaConfig  # noqa: PLC0415
    return LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=layers,
                       num_attention_heads=16, num_key_value_heads=16, vocab_size=32000,
                       max_position_embeddings=512, attn_implementation="eager")


def _model(torch, g, seed=0, layers=8):
    from transformers import LlamaForCausalLM  # noqa: PLC0415
    torch.manual_seed(seed)
    model = LlamaForCausalLM(_config(layers)).to(torch.float16).eval()
    with g.region("weights"):
        model = model.cuda()
    return model


def _inputs(torch, g, seed=1):
    gen = torch.Generator().manual_seed(seed)
    with g.region("inputs"):
        return {b: torch.randint(1, 32000, (b, SEQ), generator=gen).cuda() for b in BATCHES}


def _generate(model, ids):
    out = model.generate(ids, max_new_tokens=16, do_sample=False, pad_token_id=0)
    return out.cpu()


_MASKS = {}


def _forward(model, ids):
    """The model's forward with a causal mask and positions made on the device
    beforehand (outside any capture): transformers otherwise builds the mask
    with torch.tensor(..., device="cuda"), a copy from pageable host memory,
    which CUDA graph capture refuses. Eager and graph calls take the same
    path, so their outputs can be compared bit for bit."""
    import torch  # noqa: PLC0415
    b, t = ids.shape
    key = (b, t, ids.device)
    if key not in _MASKS:
        dtype = next(model.parameters()).dtype
        upper = torch.ones(t, t, dtype=torch.bool, device=ids.device).triu(1)
        mask = torch.zeros(b, 1, t, t, dtype=dtype, device=ids.device)
        mask.masked_fill_(upper, torch.finfo(dtype).min)
        positions = torch.arange(t, device=ids.device).unsqueeze(0).expand(b, t).contiguous()
        _MASKS[key] = (mask, positions)
    mask, positions = _MASKS[key]
    return model(ids, attention_mask=mask, position_ids=positions, use_cache=False)


def _capture(torch, model, inputs):
    """One CUDA graph of the forward per batch size, in one shared pool."""
    pool = torch.cuda.graph_pool_handle()
    graphs, outs = {}, {}
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for b in BATCHES:
            for _ in range(2):
                _forward(model, inputs[b])
    torch.cuda.current_stream().wait_stream(side)
    for b in BATCHES:
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, pool=pool):
            outs[b] = _forward(model, inputs[b]).logits
        graphs[b] = g
    return graphs, outs


def _snapshot(torch, model, inputs, graphs, outs):
    """Eager logits, graph logits (after a replay) and generated tokens, on the host."""
    eager = {b: _forward(model, inputs[b]).logits.cpu() for b in BATCHES}
    graph = {}
    for b in BATCHES:  # as a server does: replay, read the output, next
        graphs[b].replay()
        graph[b] = outs[b].cpu()
    tokens = _generate(model, inputs[1])
    return eager, graph, tokens


def _same(a, b):
    """Bit-identical (dicts of) host tensors."""
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    import torch  # noqa: PLC0415
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8))


# ---- parts ------------------------------------------------------------------------------

def part_model(args):
    torch, g = _torch()
    import gmr  # noqa: PLC0415
    checks = []

    def check(name, ok, detail):
        checks.append({"check": name, "ok": bool(ok), "detail": detail})

    torch.cuda.init()
    print("device:", torch.cuda.get_device_name(0), "torch", torch.__version__, flush=True)
    x = torch.ones(64, 64, device="cuda", dtype=torch.float16)
    (x @ x).sum().item()  # cuBLAS up
    del x
    base = _in_use(torch)
    with torch.inference_mode():
        model = _model(torch, g)
        inputs = _inputs(torch, g)
        with g.region("kv_cache"):
            kv = torch.empty(512 * MIB, dtype=torch.uint8, device="cuda")  # a server's cache
        graphs, outs = _capture(torch, model, inputs)
        before = _snapshot(torch, model, inputs, graphs, outs)
        awake = _in_use(torch)
        info = g.sleep_info()
        tags = {k: v["live_bytes"] for k, v in info["tags"].items() if v["live_bytes"]}

        t0 = time.perf_counter()
        g.sleep(backup=["weights", "inputs", "untagged"])
        t_sleep = time.perf_counter() - t0
        asleep = _in_use(torch)
        info_asleep = g.sleep_info()
        # gmr's own: what the pool still holds (at most a few MiB), and device
        # memory in use fell by everything the pool held awake: what stays
        # above `base` is not gmr's but the CUDA context's growth since (the
        # graphs' executables, cuBLAS handles), reported.
        released = awake - asleep
        check("sleep frees the device",
              info_asleep["held_bytes"] <= 4 * MIB and
              released >= info["held_bytes"] - info_asleep["held_bytes"] - 4 * MIB,
              "in use %.1f MiB awake, %.1f MiB asleep (fell %.1f MiB; the pool held %.1f MiB "
              "awake, holds %.2f MiB asleep); the CUDA context grew %.1f MiB since %.1f MiB "
              "before the model; host copies %.1f MiB; live per tag %s"
              % (awake / MIB, asleep / MIB, released / MIB, info["held_bytes"] / MIB,
                 info_asleep["held_bytes"] / MIB, (asleep - base) / MIB, base / MIB,
                 info_asleep["host_bytes"] / MIB,
                 {k: "%.1f MiB" % (v / MIB) for k, v in tags.items()}))

        # Bad input while asleep: each refused, nothing changed.
        bad = []
        try:
            g.sleep(backup=["weights"])
            bad.append("double sleep accepted")
        except gmr.GmrError as e:
            bad += [] if e.status == "GMR_ERR_BUSY" else ["double sleep: %s" % e.status]
        try:
            torch.empty(1 << 20, device="cuda")
            bad.append("allocation while asleep accepted")
        except RuntimeError as e:
            bad += [] if "asleep" in str(e) else ["allocation while asleep: %s" % e]
        bad += [] if g.sleep_info() == info_asleep else ["the books changed"]
        bad += [] if _in_use(torch) == asleep else ["device memory changed"]
        check("bad input while asleep", not bad, "; ".join(bad) or
              "double sleep GMR_ERR_BUSY, torch.empty RuntimeError (asleep); nothing changed")

        t0 = time.perf_counter()
        g.wake()
        t_wake = time.perf_counter() - t0
        after = _snapshot(torch, model, inputs, graphs, outs)
        check("eager outputs bit-identical", _same(before[0], after[0]),
              "batch sizes %s" % (BATCHES,))
        check("graph outputs bit-identical", _same(before[1], after[1]),
              "%d graphs, replayed after wake" % len(graphs))
        check("generate bit-identical", _same(before[2], after[2]),
              "16 new tokens, greedy: %s" % after[2][0, -4:].tolist())
        # After wake and the same work the pool may hold a little more than
        # before sleep: sleep gave back its free memory, and the work's
        # temporaries grow it again by its own rule (within 1.5% above the
        # live peak, plus page rounding). The 100 cycles check that this
        # does not grow from cycle to cycle.
        held_again = g.sleep_info()["held_bytes"]
        check("awake again", held_again <= info["held_bytes"] * 1.02 + 2 * MIB and
              g.sleep_info()["host_bytes"] == 0,
              "in use %.1f MiB (was %.1f); the pool holds %.1f MiB (was %.1f); host copies %d "
              "bytes" % (_in_use(torch) / MIB, awake / MIB, held_again / MIB,
                         info["held_bytes"] / MIB, g.sleep_info()["host_bytes"]))

        bad = []
        try:
            g.wake()
            bad.append("wake without sleep accepted")
        except gmr.GmrError as e:
            bad += [] if e.status == "GMR_ERR_INVALID_ARGUMENT" else ["wake: %s" % e.status]
        cg = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(cg):
                y = _forward(model, inputs[1]).logits
                try:
                    g.sleep(backup=["weights"])
                    bad.append("sleep during capture accepted")
                except RuntimeError as e:
                    bad += [] if "captur" in str(e) else ["capture: %s" % e]
            cg.replay()
            torch.cuda.synchronize()
            worst = float((y.cpu().float() - before[0][1].float()).abs().max())
            bad += [] if worst < 0.1 else ["the graph of the refused sleep's capture is off "
                                           "eager by %g" % worst]
            del y
        except Exception as e:  # noqa: BLE001 (the capture itself must survive)
            bad.append("the capture broke: %s" % e)
        del cg
        bad += [] if not g.is_asleep() else ["asleep after refusals"]
        check("bad input while awake", not bad, "; ".join(bad) or
              "wake without sleep GMR_ERR_INVALID_ARGUMENT, sleep in a capture RuntimeError")
        saved = info_asleep["host_bytes"]
        del graphs, outs, kv, model, inputs
    import gc  # noqa: PLC0415
    _MASKS.clear()
    gc.collect()
    torch.cuda.synchronize()
    # cuBLAS keeps a workspace per stream from the allocator (one made during
    # a capture comes from the graph's pool): give them back too.
    torch._C._cuda_clearCublasWorkspaces()
    torch.cuda.empty_cache()
    left = g.sleep_info()
    live = {k: v["live_bytes"] for k, v in left["tags"].items() if v["live_bytes"]}
    check("nothing left at the end", not any(k in live for k in ("weights", "kv_cache", "graphs",
                                                                 "inputs")) and
          left["host_bytes"] == 0, "live per tag %s, host copies %d" % (live, left["host_bytes"]))
    return {"checks": checks, "times": [{"what": "Llama 8x1024 fp16, weights+inputs+untagged",
                                         "bytes": saved, "sleep_s": t_sleep, "wake_s": t_wake}]}


def part_cycles(args):
    torch, g = _torch()
    checks = []
    with torch.inference_mode():
        model = _model(torch, g)
        inputs = _inputs(torch, g)
        with g.region("kv_cache"):
            kv = torch.empty(256 * MIB, dtype=torch.uint8, device="cuda")
        graphs, outs = _capture(torch, model, inputs)
        before = _snapshot(torch, model, inputs, graphs, outs)
        rows = []
        for cycle in range(args.cycles):
            g.sleep(backup=["weights", "inputs", "untagged"])
            a = (_in_use(torch), g.sleep_info()["host_bytes"])
            g.wake()
            w = (_in_use(torch), g.sleep_info()["host_bytes"])
            rows.append((a, w))
        after = _snapshot(torch, model, inputs, graphs, outs)
        asleep = {r[0] for r in rows}
        awake = {r[1] for r in rows}
        checks.append({"check": "%d cycles: memory constant" % args.cycles,
                       "ok": (len(asleep) == 1 and len(awake) == 1 and
                              all(w[1] == 0 for _, w in rows)),
                       "detail": "asleep (device in use, host copies): %s; awake: %s"
                                 % (sorted(asleep)[:3], sorted(awake)[:3])})
        checks.append({"check": "%d cycles: outputs bit-identical" % args.cycles,
                       "ok": _same(before[0], after[0]) and _same(before[1], after[1]) and
                       _same(before[2], after[2]), "detail": "eager, graphs, generate"})
        del kv
    return {"checks": checks}


def _timed(torch, fn):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def _turn_child(role, fraction, pipe_in, pipe_out, rounds):
    """One of two servers taking turns (runs in its own process). a builds
    first and sleeps; b builds while a sleeps; a's wake while b is awake
    must fail (no room: each cache takes `fraction` of the device); then
    each wakes, runs and sleeps in turn, `rounds` times."""
    torch, g = _torch()
    import gmr  # noqa: PLC0415
    out = {"role": role, "ok": True, "notes": []}

    def wait(msg):
        line = pipe_in.readline().strip()
        if line != msg:
            raise RuntimeError("%s expected %r, got %r" % (role, msg, line))

    def say(msg):
        pipe_out.write(msg + "\n")
        pipe_out.flush()

    def serve(r):
        g.wake()
        kv.fill_(r + 1)  # the server uses its cache
        if not _same(ref, _generate(model, ids)):
            out["ok"] = False
            out["notes"].append("round %d: output differs" % r)
        g.sleep(backup=["weights", "inputs", "untagged"])

    try:
        if role == "b":
            wait("go")
        with torch.inference_mode():
            model = _model(torch, g, seed=10 if role == "a" else 20, layers=4)
            ids = _inputs(torch, g, seed=3 if role == "a" else 4)[2]
            free, total = torch.cuda.mem_get_info()
            with g.region("kv_cache"):
                kv = torch.zeros(int(total * fraction), dtype=torch.uint8, device="cuda")
            ref = _generate(model, ids)
            if role == "a":
                g.sleep(backup=["weights", "inputs", "untagged"])
                say("go")
                wait("awake")
                try:
                    g.wake()
                    out["ok"] = False
                    out["notes"].append("a wake without room succeeded")
                except gmr.OutOfMemoryError as e:
                    out["notes"].append("wake without room: OutOfMemoryError, still asleep: %s"
                                        % g.is_asleep())
                    out["ok"] = out["ok"] and g.is_asleep()
                say("tried")
            else:
                say("awake")
                wait("tried")
                g.sleep(backup=["weights", "inputs", "untagged"])
                say("go")
            for r in range(rounds):
                wait("go")
                serve(r)
                say("go")
            if role == "a":
                wait("go")  # b's last turn
            del kv
    except Exception as e:  # noqa: BLE001
        out["ok"] = False
        out["notes"].append("%s: %s" % (type(e).__name__, e))
        traceback.print_exc()
    print("TURN " + json.dumps(out), flush=True)


def part_turns(args):
    """Run two children with pipes between them: a sleeps and says go; b
    builds, runs, sleeps, says go; a wakes; ..."""
    rounds = 3
    # a -> b and b -> a pipes
    ab_r, ab_w = os.pipe()
    ba_r, ba_w = os.pipe()
    env = dict(os.environ)
    code = ("import sys, os; sys.path.insert(0, %r); import serving_check as s; "
            "s._turn_child(sys.argv[1], float(sys.argv[2]), os.fdopen(int(sys.argv[3])), "
            "os.fdopen(int(sys.argv[4]), 'w'), int(sys.argv[5]))"
            % os.path.dirname(os.path.abspath(__file__)))
    a = subprocess.Popen([sys.executable, "-c", code, "a", "0.6", str(ba_r), str(ab_w),
                          str(rounds)], pass_fds=(ba_r, ab_w), env=env, stdout=subprocess.PIPE,
                         text=True)
    b = subprocess.Popen([sys.executable, "-c", code, "b", "0.6", str(ab_r), str(ba_w),
                          str(rounds)], pass_fds=(ab_r, ba_w), env=env, stdout=subprocess.PIPE,
                         text=True)
    for fd in (ab_r, ab_w, ba_r, ba_w):
        os.close(fd)
    results = []
    for p in (a, b):
        try:
            text, _ = p.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            p.kill()
            text = "TURN " + json.dumps({"role": "?", "ok": False, "notes": ["timed out"]})
        for line in text.splitlines():
            if line.startswith("TURN "):
                results.append(json.loads(line[5:]))
    checks = [{"check": "two processes take turns (%s)" % r["role"], "ok": r["ok"],
               "detail": "; ".join(r["notes"]) or "%d rounds, outputs identical" % rounds}
              for r in results]
    if len(results) < 2:
        checks.append({"check": "two processes take turns", "ok": False,
                       "detail": "a process died (see its traceback)"})
    return {"checks": checks}


def _parts():
    import serving_bench  # noqa: PLC0415
    import serving_kv  # noqa: PLC0415
    return {"model": part_model, "cycles": part_cycles, "bench": serving_bench.part_bench,
            "modelbench": serving_bench.part_modelbench, "kvcache": serving_kv.part_kvcache,
            "unmap": serving_kv.part_unmap, "turns": part_turns}


def run_child(part, args):
    cmd = [sys.executable, os.path.abspath(__file__), "--child", part, "--cycles",
           str(args.cycles)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    sys.stderr.write(proc.stderr[-4000:] if proc.returncode else "")
    result = None
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            result = json.loads(line[7:])
        elif line.strip():
            print("   %s: %s" % (part, line), flush=True)
    if result is not None:
        # The process must also end cleanly (nothing asleep or leaked makes
        # its exit crash or hang).
        result["checks"].append({"check": "the process exits cleanly",
                                 "ok": proc.returncode == 0,
                                 "detail": "exit status %d" % proc.returncode})
        return result
    return {"checks": [{"check": part, "ok": False,
                        "detail": "the process ended (%d) without a result: %s"
                                  % (proc.returncode, proc.stderr.strip()[-300:])}]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--parts", default="model,cycles,bench,modelbench,kvcache,unmap,turns")
    ap.add_argument("--cycles", type=int, default=100)
    ap.add_argument("--json")
    ap.add_argument("--child")
    args = ap.parse_args()
    if args.child:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        try:
            result = _parts()[args.child](args)
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            result = {"checks": [{"check": args.child, "ok": False,
                                  "detail": "%s: %s" % (type(e).__name__, e)}]}
        print("RESULT " + json.dumps(result), flush=True)
        return 0
    # The parent makes no CUDA context of its own (the parts measure memory).
    all_checks, all_times, all_bandwidth = [], [], []
    for part in args.parts.split(","):
        start = time.time()
        r = run_child(part, args)
        for c in r["checks"]:
            print("%s %s: %s: %s" % ("PASS" if c["ok"] else "FAIL", part, c["check"], c["detail"]),
                  flush=True)
        print("   (%s: %.0f s)" % (part, time.time() - start), flush=True)
        all_checks += [dict(c, part=part) for c in r["checks"]]
        all_times += r.get("times", [])
        all_bandwidth += r.get("bandwidth", [])
    if all_times:
        print("\n| what | bytes | sleep s | sleep GB/s | wake s | wake GB/s |")
        print("| --- | ---: | ---: | ---: | ---: | ---: |")
        for t in all_times:
            def rate(s):
                return "%.1f" % (t["bytes"] / s / 1e9) if s == s and s > 0 else "-"
            print("| %s | %d | %.4f | %s | %s | %s |" % (
                t["what"], t["bytes"], t["sleep_s"], rate(t["sleep_s"]),
                "%.4f" % t["wake_s"] if t["wake_s"] == t["wake_s"] else "-", rate(t["wake_s"])))
        print("(first sleep and wake of the model part; the bandwidth table below is the "
              "steady state)")
    if all_bandwidth:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import serving_bench  # noqa: PLC0415
        print(serving_bench.summary(all_bandwidth))
    passed = sum(c["ok"] for c in all_checks)
    print("\n%d passed, %d failed" % (passed, len(all_checks) - passed))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"checks": all_checks, "times": all_times, "bandwidth": all_bandwidth}, f,
                      indent=1)
    return 0 if passed == len(all_checks) else 1


if __name__ == "__main__":
    sys.exit(main())
