#!/usr/bin/env python3
"""Record a PyTorch memory snapshot of a few training steps and pickle it.

A small GPT-style model (tiny_gpt.py) is built from a config with random
weights (nothing is downloaded), torch.cuda.memory._record_memory_history()
records every allocator event, a few AdamW training steps run (bf16 autocast
by default), and torch.cuda.memory._snapshot() is written with pickle.dump,
as torch.cuda.memory._dump_snapshot() does. tools/replay reads the result
directly (`replay SNAPSHOT.pickle`); with --csv-out the same device trace is
also written in the bundled CSV format, so the two readers can be compared.

    python3 tools/traces/record_snapshot.py --out tiny_gpt_train.pickle.gz \
        --csv-out tiny_gpt_train.csv.gz
    bazel-bin/tools/replay/replay tiny_gpt_train.pickle.gz   # on any machine

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
import torch.nn.functional as F  # noqa: E402

from snapshot_csv import write_csv  # noqa: E402
from tiny_gpt import TinyGPT, add_config_args, config_from_args  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="tiny_gpt_train.pickle.gz",
                        help="the snapshot pickle (gzip when it ends in .gz)")
    parser.add_argument("--csv-out", default=None, help="also write the trace as CSV(.gz)")
    parser.add_argument("--steps", type=int, default=3, help="training steps (default 3)")
    parser.add_argument("--batch", type=int, default=8, help="batch size (default 8)")
    parser.add_argument("--dtype", choices=("bf16", "fp32"), default="bf16",
                        help="autocast dtype (default bf16)")
    parser.add_argument("--stacks", choices=("python", "all"), default="python",
                        help="frames recorded with each event (default python)")
    parser.add_argument("--max-entries", type=int, default=1_000_000,
                        help="trace ring size; the run fails if it fills (default 1000000)")
    parser.add_argument("--seed", type=int, default=0)
    add_config_args(parser, n_layer=4, d_model=512, seq_len=256)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("record_snapshot: no CUDA device")
    torch.manual_seed(args.seed)
    device = torch.device("cuda", torch.cuda.current_device())
    config = config_from_args(args)

    torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks=args.stacks,
                                             max_entries=args.max_entries)
    model = TinyGPT(config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    autocast = args.dtype == "bf16"
    start = time.time()
    for step in range(args.steps):
        idx = torch.randint(config.vocab_size, (args.batch, config.seq_len), device=device)
        target = torch.randint(config.vocab_size, (args.batch, config.seq_len), device=device)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
            logits = model(idx)
            loss = F.cross_entropy(logits.float().view(-1, config.vocab_size), target.view(-1))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        print(f"step {step}: loss {loss.item():.4f}")
    torch.cuda.synchronize()
    snapshot = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)

    entries = snapshot["device_traces"][device.index]
    if len(entries) >= args.max_entries:
        sys.exit(f"record_snapshot: the trace filled its {args.max_entries} entries and lost the "
                 f"oldest; rerun with a larger --max-entries")
    opener = gzip.open if args.out.endswith(".gz") else open
    with opener(args.out, "wb") as f:
        pickle.dump(snapshot, f)
    actions = {}
    for e in entries:
        actions[e["action"]] = actions.get(e["action"], 0) + 1
    print(f"{args.out}: {len(entries)} trace entries on device {device.index} "
          f"({', '.join(f'{k} {v}' for k, v in sorted(actions.items()))}); "
          f"{args.steps} steps in {time.time() - start:.1f} s; "
          f"max reserved {torch.cuda.max_memory_reserved(device) / 2**20:.1f} MiB, "
          f"max allocated {torch.cuda.max_memory_allocated(device) / 2**20:.1f} MiB; "
          f"PyTorch {torch.__version__}, {torch.cuda.get_device_name(device)}")
    if args.csv_out:
        rows = write_csv(entries, [], args.csv_out)
        print(f"{args.csv_out}: {rows} rows")


if __name__ == "__main__":
    main()
