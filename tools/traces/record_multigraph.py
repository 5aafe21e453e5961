#!/usr/bin/env python3
"""Record an LLM server's CUDA graph pattern: one graph per batch size,
largest first, all captured into one shared memory pool, then replayed.

This is how vLLM and SGLang capture their decode graphs (issue 11, section
2): `torch.cuda.graph(g, pool=shared)` for each batch size of a small
GPT-style transformer (tiny_gpt.py, random weights, nothing downloaded), in
fp16 inference, after a warm-up on a side stream; every graph keeps its
static input and output; then the graphs are replayed in capture order with
fresh inputs copied in. torch.cuda.memory._record_memory_history() records
every allocator event, and the device trace is written in the bundled CSV
format (tools/traces/README.md) with capture_begin / capture_end marker rows
on the capturing stream, placed by position in the trace (the trace's length
is read just before each capture starts and just after it ends).

    python3 tools/traces/record_multigraph.py --out llm_multigraph.csv.gz
    bazel-bin/tools/replay/replay --compare 'cuda_async;graph_pool' llm_multigraph.csv.gz

Prints PyTorch's own peak reserved bytes, to compare with replay's table.
Needs a CUDA GPU and PyTorch (tested against 2.11). Exit status 0 on success.
"""
import argparse
import gzip
import os
import pickle
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

from snapshot_csv import write_csv  # noqa: E402
from tiny_gpt import TinyGPT, add_config_args, config_from_args  # noqa: E402


def trace_length(device):
    """Entries recorded so far on `device` (a snapshot copies them: only call
    it outside captures)."""
    return len(torch.cuda.memory._snapshot()["device_traces"][device.index])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="llm_multigraph.csv.gz", help="the CSV(.gz) to write")
    parser.add_argument("--snapshot-out", default=None,
                        help="also pickle the snapshot (.pickle or .pickle.gz)")
    parser.add_argument("--batch-sizes", default="64,32,16,8,4,2,1",
                        help="one graph each, captured largest first (default 64,32,16,8,4,2,1)")
    parser.add_argument("--replays", type=int, default=5,
                        help="rounds of replaying every graph (default 5)")
    parser.add_argument("--warmup", type=int, default=3, help="warm-up runs per batch size")
    parser.add_argument("--max-entries", type=int, default=1_000_000,
                        help="trace ring size; the run fails if it fills (default 1000000)")
    parser.add_argument("--seed", type=int, default=0)
    add_config_args(parser, n_layer=6, d_model=768, n_head=12, seq_len=128)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("record_multigraph: no CUDA device")
    batch_sizes = sorted({int(b) for b in args.batch_sizes.split(",")}, reverse=True)
    torch.manual_seed(args.seed)
    device = torch.device("cuda", torch.cuda.current_device())
    config = config_from_args(args)

    torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks="python",
                                             max_entries=args.max_entries)
    model = TinyGPT(config).to(device=device, dtype=torch.float16).eval()
    inputs = {b: torch.randint(config.vocab_size, (b, config.seq_len), device=device)
              for b in batch_sizes}

    # Warm-up on a side stream before capturing, as PyTorch's CUDA graph
    # notes ask (lazy initialisation, autotuning); the side stream is the one
    # that will capture, so its per-stream cuBLAS workspace exists before the
    # first capture, as in a server that warms up on its capture stream.
    capture_stream = torch.cuda.Stream()
    capture_stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(capture_stream), torch.no_grad():
        for b in batch_sizes:
            for _ in range(args.warmup):
                model(inputs[b])
    torch.cuda.current_stream().wait_stream(capture_stream)
    torch.cuda.synchronize()

    pool = torch.cuda.graph_pool_handle()
    graphs, outputs, markers = {}, {}, []
    start = time.time()
    for b in batch_sizes:
        graph = torch.cuda.CUDAGraph()
        begin = trace_length(device)
        begin_us = time.time_ns() // 1000
        with torch.no_grad(), torch.cuda.graph(graph, pool=pool, stream=capture_stream):
            outputs[b] = model(inputs[b])
        end = trace_length(device)
        end_us = time.time_ns() // 1000
        markers.append(("capture_begin", begin, capture_stream.cuda_stream, begin_us))
        markers.append(("capture_end", end, capture_stream.cuda_stream, end_us))
        graphs[b] = graph
    for _ in range(args.replays):
        for b in batch_sizes:
            inputs[b].copy_(torch.randint(config.vocab_size, inputs[b].shape, device=device))
            graphs[b].replay()
    torch.cuda.synchronize()
    checksum = sum(float(outputs[b].float().abs().mean()) for b in batch_sizes)
    snapshot = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)

    entries = snapshot["device_traces"][device.index]
    if len(entries) >= args.max_entries:
        sys.exit(f"record_multigraph: the trace filled its {args.max_entries} entries and lost "
                 f"the oldest, so the capture positions are wrong; rerun with a larger "
                 f"--max-entries")
    rows = write_csv(entries, markers, args.out)
    if args.snapshot_out:
        opener = gzip.open if args.snapshot_out.endswith(".gz") else open
        with opener(args.snapshot_out, "wb") as f:
            pickle.dump(snapshot, f)
    inside = sum(1 for e in entries[markers[0][1]:markers[-1][1]]
                 if e["action"] == "alloc" and e["stream"] == capture_stream.cuda_stream)
    print(f"{args.out}: {rows} rows, {len(batch_sizes)} graphs (batch sizes "
          f"{','.join(map(str, batch_sizes))}) sharing one pool, {inside} allocations inside the "
          f"captures, {args.replays} replay rounds in {time.time() - start:.1f} s; checksum "
          f"{checksum:.4f}")
    print(f"PyTorch peak reserved {torch.cuda.max_memory_reserved(device) / 2**20:.1f} MiB, "
          f"peak allocated {torch.cuda.max_memory_allocated(device) / 2**20:.1f} MiB; "
          f"PyTorch {torch.__version__}, {torch.cuda.get_device_name(device)}")


if __name__ == "__main__":
    main()
