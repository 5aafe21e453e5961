#!/usr/bin/env python3
"""Markdown tables for BENCHMARKS.md from one tools/gpu/full_run.sh result.

    tools/gpu/summarize_full_run.py full-run.tgz      # or an extracted folder

Per trace: every gmr stack's cold mean (pass 1 on a fresh stack) and warm mean
(the best of passes 2..3) per call, the warm pass's allocate and free p50/p99,
the peak held and its ratio to the peak of live bytes, beside RAPIDS RMM's pool
and cudaMallocAsync from RMM's replayer in the same run. Then the thread
scaling and fixed-pair tables as bench printed them.
"""
import os
import re
import sys
import tarfile
import tempfile

TRACES = ["gpt2_train", "resnet50_train", "gpt2_graph_capture", "multistream", "llm_multigraph"]
ROW = re.compile(
    r"^(?P<stack>.*?)\s+(?P<pass>\d) (?P<kind>cold|warm)\s+\d+\s+\d+\s+\d+\s+\d+\s+(?P<mean>\d+)\s+"
    r"(?P<ap50>\d+) / (?P<ap99>\d+)\s+(?P<fp50>\d+) / (?P<fp99>\d+)\s+(?P<peak>[\d.]+)\s+(?P<ratio>[\d.]+)\s*(?P<frag>[\d.]+|n/a)?")


def folder_of(path):
    if os.path.isdir(path):
        return path
    out = tempfile.mkdtemp()
    with tarfile.open(path) as t:
        t.extractall(out)
    return out


def replay_rows(text):
    rows, stack = {}, None
    for line in text.splitlines():
        m = ROW.match(line)
        if not m:
            continue
        if m.group("stack").strip():
            stack = m.group("stack").strip()
        rows.setdefault(stack, []).append(m.groupdict())
    return rows


def rmm_rows(text):
    out = []
    for line in text.splitlines():
        kv = dict(re.findall(r"(\w+)=(\S+)", line))
        if "mode" not in kv:
            continue
        warm = min(float(kv[k]) for k in kv if re.match(r"pass[2-9]_ns", k))
        out.append((f"RMM {kv['mode']} (rmm_replay)", float(kv["pass1_ns"]), warm,
                    int(kv["peak_held"]) / 2**20, float(kv["ratio"])))
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    d = folder_of(sys.argv[1])
    for t in TRACES:
        path = os.path.join(d, f"replay_{t}.txt")
        if not os.path.exists(path):
            continue
        print(f"\n**{t}** (ns per call; warm = best of passes 2-3; p50/p99 of the warm pass)\n")
        print("| stack | cold mean | warm mean | alloc p50/p99 | free p50/p99 | peak held MiB | held/live "
              "| frag@peak (cold, warm) |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for stack, passes in replay_rows(open(path).read()).items():
            cold = passes[0]
            warm = min(passes[1:], key=lambda p: int(p["mean"])) if len(passes) > 1 else cold
            ratios = sorted({p["ratio"] for p in passes})
            peaks = sorted({p["peak"] for p in passes}, key=float)
            print(f"| `{stack}` | {cold['mean']} | {warm['mean']} | {warm['ap50']}/{warm['ap99']} | "
                  f"{warm['fp50']}/{warm['fp99']} | {'-'.join(peaks) if len(peaks) > 1 else peaks[0]} | "
                  f"{'-'.join(ratios) if len(ratios) > 1 else ratios[0]} | "
                  f"{cold['frag'] or 'n/a'}, {warm['frag'] or 'n/a'} |")
        rmm = os.path.join(d, f"rmm_{t}.txt")
        if os.path.exists(rmm):
            for name, cold, warm, peak, ratio in rmm_rows(open(rmm).read()):
                print(f"| {name} | {cold:.0f} | {warm:.0f} | - | - | {peak:.1f} | {ratio:.3f} | - |")
    for t in ["gpt2_graph_capture", "llm_multigraph"]:
        path = os.path.join(d, f"capture_{t}.txt")
        if os.path.exists(path):
            print(f"\n**{t}, captures replayed for real** (nothing reserved)\n")
            for line in open(path):
                if "captures begun" in line:
                    print("- " + line.strip()[:200])
    for name in ["threads", "fixed"]:
        path = os.path.join(d, f"{name}.txt")
        if os.path.exists(path):
            print(f"\n`{name}`:\n\n```")
            for line in open(path):
                if re.match(r"^(workload|threads=|fixed\()", line):
                    print(line.rstrip())
            print("```")


if __name__ == "__main__":
    main()
