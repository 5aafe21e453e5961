#!/usr/bin/env python3
"""Tables from tools/frameworks/anchor_run.sh's output (anchor_run.txt).

Per trace and allocator, over the rounds: footprint (peak held / peak live,
the largest of passes 1-3), warm mean ns per call (best of passes 2-3), the
growth cost per call (pass 1 mean minus warm mean) and, for gmr stacks, the
driver calls of pass 1 (tools/replay's second table). RMM's rmm_replay gives
its per-pass means; its warm is the best of passes 2-3 as well.

Usage: python3 tools/frameworks/summarize_anchor_run.py gpu-out/anchor_run.txt
"""

import re
import sys
from collections import defaultdict

ROW = re.compile(r"^(?P<name>\S.*?)?\s+(?P<pass>\d) (?P<kind>cold|warm)\s+(?P<rest>.*)$")
SECTION = re.compile(r"^=== (\S+) rep (\d+) (\S+)(?: (\S+))?$")
RMM = re.compile(r"pass1_ns=([\d.]+) pass2_ns=([\d.]+) pass3_ns=([\d.]+).* ratio=([\d.]+)")


def parse(path: str) -> tuple[dict, dict]:
    """Returns ({(trace, who): [per round: {pass: (mean_ns, ratio)}]}, {(trace, who): total calls})."""
    runs: dict = defaultdict(list)
    calls: dict = {}
    trace = who = None
    table = 0
    current = None
    for line in open(path, encoding="utf-8", errors="replace"):
        line = line.rstrip("\n")
        m = SECTION.match(line)
        if m:
            trace, _, kind, extra = m.groups()
            who = kind if extra is None else "%s %s" % (kind, extra.rsplit("/", 1)[-1])
            table = 0
            continue
        if trace is None or line.startswith("==="):
            continue
        if line.startswith("stack "):
            table += 1
            continue
        if line.startswith("driver calls per pass"):
            continue
        m = RMM.search(line)
        if m and who == "rmm":
            p1, p2, p3, ratio = (float(x) for x in m.groups())
            runs[(trace, "RMM pool")].append({1: (p1, ratio), 2: (p2, ratio), 3: (p3, ratio)})
            continue
        m = ROW.match(line)
        if not m:
            continue
        name = (m.group("name") or "").strip()
        fields = m.group("rest").split()
        if table == 1:
            if name:
                label = name if who in ("gmr", "torch") else "%s [%s]" % (name, who.split()[-1])
                current = {}
                runs[(trace, label)].append(current)
            mean = float(fields[4])
            # gmr: ... peak MiB, /live, frag; torch_replay adds alloc MiB, device MiB, py ns.
            ratio = float(fields[-5] if who == "torch" else fields[-2])
            current[int(m.group("pass"))] = (mean, ratio)
        elif table == 2 and who == "gmr" and m.group("pass") == "1":
            calls.setdefault((trace, name), []).append(int(fields[-1]))
    return runs, calls


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    runs, calls = parse(sys.argv[1])
    print("| trace | allocator | held/live | warm ns (rounds) | growth ns (rounds) | pass 1 driver calls |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    for (trace, who), rounds in runs.items():
        ratios = [r for rnd in rounds for (_, r) in rnd.values()]
        warm = [min(rnd[2][0], rnd[3][0]) for rnd in rounds if 2 in rnd and 3 in rnd]
        growth = [rnd[1][0] - w for rnd, w in zip(rounds, warm)]
        n_calls = calls.get((trace, who))
        print("| %s | %s | %.3f | %s | %s | %s |" % (
            trace, who, max(ratios) if ratios else float("nan"),
            ", ".join("%.0f" % w for w in warm), ", ".join("%.0f" % g for g in growth),
            ", ".join(str(c) for c in n_calls) if n_calls else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
