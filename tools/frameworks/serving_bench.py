"""Sleep and wake bandwidth on a GPU (issue 33, goal 1), for serving_check.py:
gmr.torch's sleep and wake of single buffers (64 MiB .. 4 GiB) and of the
Llama model of serving_check, beside a plain pinned copy of the same bytes
measured in the same process, and the host memory held while awake and
while asleep.

Parts (each runs in a process of its own, started by serving_check.py):
  bench       one tagged buffer per size: the plain copy (tensor.copy_ into
              and out of a pinned buffer made beforehand), then gmr with the
              default options (pageable backups through the 256 MiB staging
              ring) and with the other choices (pinned backups kept across
              cycles, pageable ones kept, pinned ones made at each sleep as
              before issue 33); at 1 GiB also copy_threads 4 and 16 and rings
              of 64 MiB and 1 GiB. One untimed cycle first (the first sleep
              pins the ring), then the median of three timed cycles; the
              buffer is compared with its first contents after every wake.
  modelbench  the Llama model alone (weights and inputs backed up, nothing
              discarded), the same way, beside a plain copy of its bytes.
Timings are wall time around gmr.torch.sleep / wake after a
torch.cuda.synchronize(); GB/s = bytes backed up / time (1 GB = 1e9 bytes).
"""

import gc
import os
import statistics
import time

MIB = 1 << 20
GIB = 1 << 30
SIZES = (64 * MIB, 256 * MIB, GIB, 4 * GIB)
TIMED = 3

# (name, sleep options) for each way of backing up.
VARIANTS = (
    ("default (pageable, 256 MiB ring)", {}),
    ("pinned, kept across cycles", {"host": "pinned", "keep_backup": True}),
    ("pageable, kept across cycles", {"keep_backup": True}),
    ("pinned at each sleep (before issue 33)", {"host": "pinned"}),
)
TUNING = (
    ("default, copy_threads=4", {"copy_threads": 4}),
    ("default, copy_threads=16", {"copy_threads": 16}),
    ("pageable, 64 MiB ring", {"staging_bytes": 64 * MIB}),
    ("pageable, 1 GiB ring", {"staging_bytes": GIB}),
)


def rss_bytes():
    """Resident memory of this process (VmRSS), pinned and pageable alike."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def host_figures(g):
    """What gmr holds on the host for sleep, and the process's RSS."""
    info = g.sleep_info()
    return {"pinned": info["host_pinned_bytes"], "pageable": info["host_pageable_bytes"],
            "ring": info["staging_bytes"], "kept": info["kept_backup_bytes"],
            "rss": rss_bytes()}


def _sync_time(torch, fn):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def plain_copy(torch, nbytes):
    """Median D2H and H2D seconds of a plain copy between a device buffer and
    a pinned buffer made beforehand (what the goals compare with)."""
    dev = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    pinned = torch.empty(nbytes, dtype=torch.uint8, pin_memory=True)
    d2h, h2d = [], []
    for _ in range(TIMED + 1):
        d2h.append(_sync_time(torch, lambda: pinned.copy_(dev, non_blocking=True)))
        h2d.append(_sync_time(torch, lambda: dev.copy_(pinned, non_blocking=True)))
    del dev, pinned
    gc.collect()
    torch.cuda.empty_cache()
    # PyTorch caches pinned blocks: give them back, so that the host memory
    # read later is gmr's.
    empty_host = getattr(torch._C, "_host_emptyCache", None)
    if empty_host is not None:
        empty_host()
    return statistics.median(d2h[1:]), statistics.median(h2d[1:])


def cycles(torch, g, options, backup, check):
    """One untimed sleep/wake cycle, then TIMED timed ones. Returns the row's
    figures: first and median sleep and wake seconds, host memory asleep and
    awake, and whether `check()` held after every wake."""
    ok = True
    sleeps, wakes = [], []
    asleep = awake = None
    for i in range(TIMED + 1):
        s = _sync_time(torch, lambda: g.sleep(backup=backup, **options))
        asleep = host_figures(g)
        w = _sync_time(torch, g.wake)
        awake = host_figures(g)
        ok = ok and check()
        sleeps.append(s)
        wakes.append(w)
    return {"first_sleep_s": sleeps[0], "first_wake_s": wakes[0],
            "sleep_s": statistics.median(sleeps[1:]), "wake_s": statistics.median(wakes[1:]),
            "asleep": asleep, "awake": awake, "ok": ok}


def part_bench(args):
    import gmr.torch as g  # noqa: PLC0415
    g.use()
    import torch  # noqa: PLC0415
    torch.manual_seed(0)
    rows, checks = [], []
    baseline = rss_bytes()
    for size in SIZES:
        d2h, h2d = plain_copy(torch, size)
        with g.region("bench"):
            buf = torch.empty(size, dtype=torch.uint8, device="cuda")
        buf.random_(0, 256)
        ref = buf.cpu()
        ref_sample = buf[::4093].cpu()  # a strided view: nothing allocated on the device

        def same_sample():
            return bool(torch.equal(buf[::4093].cpu(), ref_sample))

        variants = VARIANTS + (TUNING if size == GIB else ())
        for name, options in variants:
            r = cycles(torch, g, options, ["bench"], same_sample)
            full = bool(torch.equal(buf.cpu(), ref))
            checks.append({"check": "bench %d MiB, %s: contents after %d cycles"
                                    % (size // MIB, name, TIMED + 1),
                           "ok": r["ok"] and full,
                           "detail": "sampled after each wake, whole buffer after the last"})
            rows.append(dict(r, what="%s MiB buffer, %s" % (size // MIB, name), bytes=size,
                             plain_d2h_s=d2h, plain_h2d_s=h2d, default=not options,
                             rss_base=baseline))
            # Drop what this variant kept, so the next one starts the same.
            g.sleep(backup=["bench"])
            g.wake()
        del buf, ref, ref_sample
        gc.collect()
        torch.cuda.empty_cache()
    return {"checks": checks, "bandwidth": rows}


def part_modelbench(args):
    import serving_check as sc  # noqa: PLC0415
    torch, g = sc._torch()
    checks, rows = [], []
    baseline = rss_bytes()
    with torch.inference_mode():
        model = sc._model(torch, g)
        inputs = sc._inputs(torch, g)
        ids = inputs[1]
        before = sc._generate(model, ids)
        backup = ["weights", "inputs", "untagged"]
        info = g.sleep_info()
        saved = sum(info["tags"][t]["live_bytes"] for t in backup if t in info["tags"])
        d2h, h2d = plain_copy(torch, saved)

        def same_output():
            return sc._same(before, sc._generate(model, ids))

        for name, options in VARIANTS:
            r = cycles(torch, g, options, backup, same_output)
            checks.append({"check": "Llama model, %s: generate bit-identical after %d cycles"
                                    % (name, TIMED + 1),
                           "ok": r["ok"], "detail": "%d bytes backed up" % saved})
            rows.append(dict(r, what="Llama 8x1024 fp16 model, %s" % name, bytes=saved,
                             plain_d2h_s=d2h, plain_h2d_s=h2d, default=not options,
                             rss_base=baseline))
            g.sleep(backup=backup)
            g.wake()
        del model, inputs, ids
    return {"checks": checks, "bandwidth": rows}


def _gbs(nbytes, seconds):
    return nbytes / seconds / 1e9 if seconds and seconds > 0 else float("nan")


def summary(rows):
    """The bandwidth table (markdown) and the goal lines; returns the text."""
    out = ["", "Sleep and wake beside a plain pinned copy of the same bytes (median of %d "
           "cycles after one untimed; GB/s = 1e9 bytes/s):" % TIMED, "",
           "| what | bytes | sleep GB/s | plain D2H GB/s | sleep % | wake GB/s | plain H2D GB/s "
           "| wake % | first sleep / wake s | pinned awake / asleep MiB | pageable awake / "
           "asleep MiB | RSS awake / asleep MiB |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    goals = []
    for r in rows:
        s, w = _gbs(r["bytes"], r["sleep_s"]), _gbs(r["bytes"], r["wake_s"])
        d, h = _gbs(r["bytes"], r["plain_d2h_s"]), _gbs(r["bytes"], r["plain_h2d_s"])
        sp, wp = 100 * s / d, 100 * w / h
        a, z = r["awake"], r["asleep"]
        out.append("| %s | %d | %.1f | %.1f | %.0f%% | %.1f | %.1f | %.0f%% | %.3f / %.3f | "
                   "%.0f / %.0f | %.0f / %.0f | %.0f / %.0f |"
                   % (r["what"], r["bytes"], s, d, sp, w, h, wp, r["first_sleep_s"],
                      r["first_wake_s"], a["pinned"] / MIB, z["pinned"] / MIB,
                      a["pageable"] / MIB, z["pageable"] / MIB,
                      (a["rss"] - r["rss_base"]) / MIB, (z["rss"] - r["rss_base"]) / MIB))
        if r.get("default"):
            met = sp >= 80 and wp >= 80
            goals.append("GOAL %s: %s (sleep %.0f%%, wake %.0f%% of the plain copy; pinned "
                         "while awake %.0f MiB)" % ("met" if met else "MISSED", r["what"], sp, wp,
                                                    a["pinned"] / MIB))
    out.append("")
    out.append("(pinned/pageable: what gmr holds for sleep, its statistics host_pinned_bytes "
               "and host_pageable_bytes; RSS: the process's resident memory above its start)")
    return "\n".join(out + [""] + goals)


if __name__ == "__main__":
    raise SystemExit("run through tools/frameworks/serving_check.py --parts bench,modelbench; "
                     "this file has its parts (pid %d)" % os.getpid())
