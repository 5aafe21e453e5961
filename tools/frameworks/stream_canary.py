#!/usr/bin/env python3
"""PyTorch side streams on gmr, checked bit for bit (issue 30, item 2): a
canary that needs no simulation.

With gmr.torch as PyTorch's allocator, a program of rounds runs on
torch.cuda.Stream side streams A, B, C (, D). Each round, A fills a tensor X,
sleeps (torch.cuda._sleep: a long kernel), then reads X into a fingerprint
and drops X, so X is freed on A while A's read is still queued; the other
streams then allocate tensors of sizes that make the allocator want X's memory
(X's size, half, double, ...), fill them with patterns of their own, sleep a
little and read them back; A makes small calls in between (the pools record
on demand at a stream's next call); streams wait on each other in chains
(B -> C -> D, never on A); and some rounds hand X to a user stream U with
Tensor.record_stream(U) before dropping it on A, after which A itself and the
others allocate. Memory handed to a stream before the work that reads it is
done shows as a wrong fingerprint.

Each fingerprint is compared with the same program run eagerly on one stream
in the same process (no sleeps, no side streams), and with the same
multi-stream program on PyTorch's own allocator (a "native" process). A
positive control runs PyTorch's allocator with the record_stream calls left
out, and must show mismatches (else the canary could not see a reuse). Every
allocator runs in a process of its own (PyTorch picks its allocator once per
process). One line per stack:

  stream_canary: stack=vmm rounds=80 results=1460 mismatches=0 (eager 0, native 0) ... PASS

Usage (repository root, after tools/gpu/stage.sh; tools/gpu/stream_safety_run.sh
runs it with the environment set):
  PYTHONPATH=python GMR_LIBRARY_DIR=.gpu/lib python3 tools/frameworks/stream_canary.py \\
      [--stacks 'vmm;pool > cuda;...'] [--rounds N] [--streams 3,4] [--json FILE]
Exit status 0 when every stack has zero mismatches, else 1.
"""

import argparse
import contextlib
import json
import os
import random
import subprocess
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

DEFAULT_STACKS = ("vmm", "pool > cuda", "vmm_pages",
                  "tracking > limiting(limit=8GiB) > pool > cuda")
NATIVE = "native"
# The positive control: PyTorch's allocator with the record_stream calls left
# out, so X goes back to A while U still reads it; it must show mismatches.
CONTROL = "native-without-record_stream"
MARK = "stream_canary:"
RESULT = "STREAM_CANARY_RESULT "
KIB = 1 << 10
MIB = 1 << 20
# Clock ticks of torch.cuda._sleep: A's read waits long enough for the host to
# queue the whole round behind it (lengths only; nothing is timed).
LONG_SLEEP = 30_000_000
SHORT_SLEEP = 1_000_000

Op = Tuple[Any, ...]


def make_program(seed: int, rounds: int, streams: int, max_bytes: int) -> List[List[Op]]:
    """The rounds of one run: the same ops for the side-stream and eager runs.

    Ops (stream 0 is A):
      ("x", bytes, a, b): A fills X, sleeps long, reads X, drops X.
      ("rs", bytes, a, b, user): A fills X; `user` waits for A, sleeps long,
          reads X; X.record_stream(user); X dropped (freed on A).
      ("take", stream, bytes, a, b, hold): alloc, fill, short sleep, read; keep
          the tensor until the round ends when `hold`, else drop it.
      ("beat", bytes, a, b): a small alloc, fill, read, drop on A.
      ("chain", src, dst): dst waits for what src has queued.

    Args:
        seed: the program's random seed.
        rounds: how many rounds.
        streams: A and the others (3 or more).
        max_bytes: the largest X.

    Returns:
        One list of ops per round.

    Raises:
        ValueError: fewer than 3 streams.
    """
    if streams < 3:
        raise ValueError("the canary needs A and at least two other streams")
    rng = random.Random(seed)

    def pattern() -> Tuple[int, int]:
        return rng.randrange(1, 1 << 12), rng.randrange(0, 1 << 12)

    def x_size(cls: int) -> int:
        if cls == 0:
            lo, hi = 256, 16 * KIB
        elif cls == 1:
            lo, hi = 64 * KIB, 2 * MIB
        else:
            lo, hi = min(8 * MIB, max_bytes // 2), max_bytes
        return max(8, rng.randrange(lo, hi + 1) // 8 * 8)

    def taker_size(x: int) -> int:
        pick = rng.randrange(7)
        if pick in (0, 1):
            return x
        if pick == 2:
            return max(8, x // 16 * 8)
        if pick == 3:
            return x + 64 * KIB
        if pick == 4:
            return 2 * x
        if pick == 5:
            return (x + x // 2) // 8 * 8
        return x_size(rng.randrange(3))

    def other() -> int:
        return rng.randrange(1, streams)

    program: List[List[Op]] = []
    for r in range(rounds):
        kind = r % 4  # 0 random takers, 1 a request larger than X first, 2 chains, 3 record_stream
        x = x_size((r // 4) % 3)
        ops: List[Op] = []
        if kind == 3:
            ops.append(("rs", x) + pattern() + (other(),))
            ops.append(("take", 0, x) + pattern() + (False,))  # A itself asks first
        else:
            ops.append(("x", x) + pattern())
        if kind == 1:
            ops.append(("take", 1, 2 * x + 64 * KIB) + pattern() + (True,))
            ops.append(("beat", 4 * KIB) + pattern())
            ops.append(("take", 2, x) + pattern() + (rng.random() < 0.5,))
        elif kind == 2:
            ops.append(("take", 1, x) + pattern() + (False,))
            ops.append(("chain", 1, 2))
            ops.append(("take", 2, max(8, x // 16 * 8)) + pattern() + (False,))
            if streams > 3:
                ops.append(("chain", 2, 3))
                ops.append(("take", 3, x) + pattern() + (True,))
        for _ in range(3 * (streams - 1) + 2):
            s = 0 if kind == 3 and rng.random() < 1 / 3 else other()
            ops.append(("take", s, taker_size(x)) + pattern() + (rng.random() < 0.5,))
            if s != 0 and rng.random() < 1 / 3:
                dst = other()
                if dst != s:
                    ops.append(("chain", s, dst))
            if kind != 3 and rng.random() < 1 / 3:
                ops.append(("beat", max(8, rng.randrange(256, 64 * KIB) // 8 * 8)) + pattern())
        program.append(ops)
    return program


class Runner:
    """Runs a program on side streams (streams given) or eagerly on the
    current stream (streams None: no sleeps, no waits, no record_stream)."""

    def __init__(self, torch: Any, streams: Optional[List[Any]],
                 record_streams: bool = True) -> None:
        """Args:
            torch: the torch module.
            streams: torch.cuda.Stream objects, A first; None: eager.
            record_streams: call Tensor.record_stream where the program says
                (False only for the positive control).
        """
        self.torch = torch
        self.streams = streams
        self.record_streams = record_streams
        self.results: List[Any] = []
        self.record_stream_calls = 0

    def on(self, i: int) -> Any:
        """The context that makes a stream current.

        Args:
            i: the stream's index (0 is A).

        Returns:
            torch.cuda.stream(stream i), or a context doing nothing when eager.
        """
        if self.streams is None:
            return contextlib.nullcontext()
        return self.torch.cuda.stream(self.streams[i])

    def sleep(self, cycles: int) -> None:
        """Queues a kernel that spins on the current stream (nothing when eager).

        Args:
            cycles: how many clock ticks it spins.
        """
        if self.streams is not None:
            self.torch.cuda._sleep(cycles)

    def fill(self, nbytes: int, a: int, b: int) -> Any:
        """Allocates and writes a tensor on the current stream.

        Args:
            nbytes: its size (a multiple of 8).
            a, b: the pattern, t[i] = a * i + b (int64).

        Returns:
            The tensor.
        """
        t = self.torch.arange(nbytes // 8, dtype=self.torch.int64, device="cuda")
        return t.mul_(a).add_(b)

    def read(self, t: Any) -> None:
        """Reads a tensor on the current stream into a fingerprint kept for the end.

        Args:
            t: the tensor; its fingerprint is sum(t[i] * (2i + 1)) in int64,
                wrapping, so exact whatever the order of the sum.
        """
        w = self.torch.arange(t.numel(), dtype=self.torch.int64, device="cuda")
        self.results.append(t.mul(w.mul_(2).add_(1)).sum())

    def run(self, program: Sequence[Sequence[Op]]) -> List[int]:
        """Runs every round; synchronises after each.

        Args:
            program: as make_program returns.

        Returns:
            The fingerprints, in program order.
        """
        torch = self.torch
        for ops in program:
            held: List[Any] = []
            for op in ops:
                self.step(op, held)
            held.clear()
            torch.cuda.synchronize()
        torch.cuda.synchronize()
        return [int(v) for v in torch.stack(self.results).cpu().tolist()]

    def step(self, op: Op, held: List[Any]) -> None:
        """Runs one op.

        Args:
            op: as make_program describes.
            held: the round's tensors kept to its end; "take" may add one.

        Raises:
            ValueError: an unknown op.
        """
        kind = op[0]
        if kind == "x":
            _, nbytes, a, b = op
            with self.on(0):
                x = self.fill(nbytes, a, b)
                self.sleep(LONG_SLEEP)
                self.read(x)
                del x  # freed on A while A's read is queued
        elif kind == "rs":
            _, nbytes, a, b, user = op
            with self.on(0):
                x = self.fill(nbytes, a, b)
            if self.streams is not None:
                self.streams[user].wait_stream(self.streams[0])
            with self.on(user):
                self.sleep(LONG_SLEEP)
                self.read(x)
            if self.streams is not None and self.record_streams:
                x.record_stream(self.streams[user])
                self.record_stream_calls += 1
            del x  # freed on A; U still reads it
        elif kind == "take":
            _, s, nbytes, a, b, hold = op
            with self.on(s):
                t = self.fill(nbytes, a, b)
                self.sleep(SHORT_SLEEP)
                self.read(t)
            if hold:
                held.append(t)
            del t
        elif kind == "beat":
            _, nbytes, a, b = op
            with self.on(0):
                self.read(self.fill(nbytes, a, b))
        elif kind == "chain":
            _, src, dst = op
            if self.streams is not None:
                self.streams[dst].wait_stream(self.streams[src])
        else:
            raise ValueError("unknown op %r" % (op,))


def child(stack: str, seed: int, rounds: int, stream_counts: List[int], max_bytes: int) -> int:
    """One allocator in this process: each stream count's program on side
    streams and eagerly; prints a RESULT line of JSON.

    Args:
        stack: a gmr spec, "native" for PyTorch's own allocator, or CONTROL.
        seed: the programs' seed (the stream count is added).
        rounds: rounds per program.
        stream_counts: e.g. [3, 4].
        max_bytes: the largest X.

    Returns:
        0 (mismatches are the parent's to judge).

    Raises:
        RuntimeError: gmr.torch.use refused (PyTorch had initialised CUDA).
    """
    gmr_stack = stack not in (NATIVE, CONTROL)
    if gmr_stack:
        import gmr.torch  # noqa: PLC0415 (before torch initialises CUDA)

        # "vmm" goes the default's way (no spec: gmr.FRAMEWORK_DEFAULT_SPEC).
        gmr.torch.use(None if stack == "vmm" else stack)
    import torch  # noqa: PLC0415

    out: Dict[str, Any] = {"stack": stack, "backend": torch.cuda.get_allocator_backend(),
                           "runs": {}}
    for n in stream_counts:
        program = make_program(seed + n, rounds, n, max_bytes)
        side = Runner(torch, [torch.cuda.Stream() for _ in range(n)],
                      record_streams=stack != CONTROL)
        streamed = side.run(program)
        eager = Runner(torch, None).run(program)
        out["runs"][str(n)] = {"streamed": streamed, "eager": eager,
                               "record_stream_calls": side.record_stream_calls}
    if gmr_stack:
        import gmr.torch  # noqa: PLC0415

        c = gmr.torch.counters()
        out["record_stream_count"] = c.get("record_stream_count")
        out["record_stream_fallback_count"] = c.get("record_stream_fallback_count")
    print(RESULT + json.dumps(out), flush=True)
    return 0


def run_child(stack: str, args: argparse.Namespace) -> Tuple[Optional[Dict[str, Any]], str]:
    """Runs child() for `stack` in a new process.

    Args:
        stack: a gmr spec or "native".
        args: the parsed command line.

    Returns:
        (the child's result, or None when it failed; what it printed to stderr).
    """
    cmd = [sys.executable, os.path.abspath(__file__), "--child", stack, "--seed", str(args.seed),
           "--rounds", str(args.rounds), "--streams", args.streams,
           "--max-mib", str(args.max_mib)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired as e:
        return None, "timed out after %d s: %s" % (args.timeout, str(e.stderr or "")[-2000:])
    for line in done.stdout.splitlines():
        if line.startswith(RESULT):
            return json.loads(line[len(RESULT):]), done.stderr
    return None, "exit %d: %s" % (done.returncode, done.stderr[-3000:])


def differ(a: Sequence[int], b: Sequence[int]) -> int:
    """Counts the positions where two fingerprint lists differ.

    Args:
        a, b: the lists.

    Returns:
        The count; each entry one list has beyond the other counts too.
    """
    return sum(1 for x, y in zip(a, b) if x != y) + abs(len(a) - len(b))


def main(argv: Optional[List[str]] = None) -> int:
    """Runs PyTorch's allocator and every gmr stack, one process each; prints
    one line per stack.

    Args:
        argv: the arguments (None: sys.argv[1:]).

    Returns:
        0 when every stack has zero mismatches and every process finished, else 1.
    """
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--stacks", default=";".join(DEFAULT_STACKS),
                   help="gmr specs separated by ';' (default: %(default)s)")
    p.add_argument("--rounds", type=int, default=40, help="rounds per program")
    p.add_argument("--streams", default="3,4", help="stream counts, comma-separated")
    p.add_argument("--seed", type=int, default=30)
    p.add_argument("--max-mib", type=int, default=32, help="the largest X, MiB")
    p.add_argument("--timeout", type=int, default=240, help="seconds per process")
    p.add_argument("--json", help="write every stack's counts here")
    p.add_argument("--no-control", action="store_true",
                   help="skip the positive control (%s)" % CONTROL)
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    counts = [int(s) for s in args.streams.split(",") if s.strip()]
    if args.child is not None:
        return child(args.child, args.seed, args.rounds, counts, args.max_mib * MIB)

    native, native_why = run_child(NATIVE, args)
    report: List[Dict[str, Any]] = []
    failed = 0
    stacks = [NATIVE] + [s.strip() for s in args.stacks.split(";") if s.strip()]
    for stack in stacks:
        got, why = (native, native_why) if stack == NATIVE else run_child(stack, args)
        if got is None:
            print("%s stack=%s FAILED to run: ...%s" % (MARK, stack, " ".join(why.split())[-400:]),
                  flush=True)
            failed += 1
            continue
        results = vs_eager = vs_native = calls = 0
        for n in counts:
            run = got["runs"][str(n)]
            results += len(run["streamed"])
            vs_eager += differ(run["streamed"], run["eager"])
            calls += run["record_stream_calls"]
            if native is not None and stack != NATIVE:
                vs_native += differ(run["streamed"], native["runs"][str(n)]["streamed"])
                # One stream must agree across allocators too, or the
                # program is not deterministic and the comparison means nothing.
                vs_native += differ(run["eager"], native["runs"][str(n)]["eager"])
        mismatches = vs_eager + vs_native
        ok = mismatches == 0 and (native is not None or stack == NATIVE)
        failed += 0 if ok else 1
        hooks = ("" if stack == NATIVE else " record_stream_hook=%s"
                 % got.get("record_stream_count"))
        print("%s stack=%s rounds=%d results=%d mismatches=%d (eager %d, native %s) "
              "record_stream=%d%s backend=%s %s"
              % (MARK, stack, args.rounds * len(counts), results, mismatches, vs_eager,
                 vs_native if native is not None and stack != NATIVE else "-", calls, hooks,
                 got["backend"],
                 "PASS" if ok else "FAIL"), flush=True)
        report.append({"stack": stack, "rounds": args.rounds * len(counts), "results": results,
                       "mismatches": mismatches, "vs_eager": vs_eager, "vs_native": vs_native,
                       "record_stream": calls, "ok": ok})
    if not args.no_control:
        got, why = run_child(CONTROL, args)
        caught = 0
        if got is not None:
            caught = sum(differ(got["runs"][str(n)]["streamed"], got["runs"][str(n)]["eager"])
                         for n in counts)
        ok = caught > 0
        failed += 0 if ok else 1
        if got is None:
            verdict = "FAILED to run: ...%s" % " ".join(why.split())[-400:]
        elif ok:
            verdict = "mismatches=%d: caught (PASS)" % caught
        else:
            verdict = "mismatches=0: NOT caught (FAIL): the canary did not see a reuse it should"
        print("%s control=%s %s" % (MARK, CONTROL, verdict), flush=True)
        report.append({"stack": CONTROL, "mismatches": caught, "ok": ok})
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    runs = len(stacks) + (0 if args.no_control else 1)
    print("%s %s (%d processes, %d failed)" % (MARK, "PASS" if failed == 0 else "FAIL", runs,
                                               failed))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
