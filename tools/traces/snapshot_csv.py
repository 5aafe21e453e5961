"""Write a PyTorch memory snapshot's device trace as the bundled CSV format.

The format of tools/traces/*.csv.gz (see README.md): header
`action,addr,size,stream,time_us`, rows as Python's csv module writes them
(CRLF), every device_traces entry of one device in recorded order (frames
dropped), gzip at the highest level with the file's name inside. Capture
markers (`capture_begin` / `capture_end`, addr and size 0, the capturing
stream) go in at given positions of the entry list.

No PyTorch needed: record_multigraph.py and record_snapshot.py use it on a
GPU machine, and it can be run here on a saved snapshot:

    python3 tools/traces/snapshot_csv.py SNAPSHOT.pickle OUT.csv.gz [--device N]
"""
import argparse
import csv
import gzip
import io
import os
import pickle

COLUMNS = ("action", "addr", "size", "stream", "time_us")


def rows_with_markers(entries, markers):
    """The entries as CSV rows, with each marker (action, position, stream,
    time_us) placed before entries[position]. Markers at the same position
    keep their order."""
    by_position = {}
    for action, position, stream, time_us in markers:
        if not 0 <= position <= len(entries):
            raise ValueError(f"marker {action} at {position}, outside 0..{len(entries)}")
        by_position.setdefault(position, []).append((action, 0, 0, stream, time_us))
    rows = []
    for i, e in enumerate(entries):
        rows.extend(by_position.get(i, []))
        rows.append(tuple(e[c] for c in COLUMNS))
    rows.extend(by_position.get(len(entries), []))
    return rows


def write_csv(entries, markers, path):
    """Write `entries` (one device's device_traces list) and `markers` to
    `path` (gzip when it ends in .gz). Returns the number of rows."""
    rows = rows_with_markers(entries, markers)
    text = io.StringIO(newline="")
    writer = csv.writer(text)  # CRLF line ends, like the bundled traces
    writer.writerow(COLUMNS)
    writer.writerows(rows)
    data = text.getvalue().encode("ascii")
    if path.endswith(".gz"):
        name = os.path.basename(path)[:-3]
        with open(path, "wb") as f, gzip.GzipFile(filename=name, mode="wb", compresslevel=9,
                                                  fileobj=f) as g:
            g.write(data)
    else:
        with open(path, "wb") as f:
            f.write(data)
    return len(rows)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("snapshot", help="a pickled torch.cuda.memory._snapshot()")
    parser.add_argument("out", help="the CSV to write (.csv or .csv.gz)")
    parser.add_argument("--device", type=int, default=0, help="device_traces index (default 0)")
    args = parser.parse_args()
    opener = gzip.open if args.snapshot.endswith(".gz") else open
    with opener(args.snapshot, "rb") as f:
        snapshot = pickle.load(f)  # only for snapshots you made yourself: pickle runs code
    rows = write_csv(snapshot["device_traces"][args.device], [], args.out)
    print(f"{args.out}: {rows} rows")


if __name__ == "__main__":
    main()
