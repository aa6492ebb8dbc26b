"""Where the time of a py-spy recording goes: ``py-spy record --subprocesses --idle --format raw``
writes collapsed stacks (``frame;frame;... count``); this sums them per process (runner, worker)
and, under a chosen frame, per child frame.

    python scripts/bench/pyspy_breakdown.py STACKS[.gz] [--rate 200] [--under FRAME] [--depth 1]
"""

from __future__ import annotations

import argparse
import collections
import gzip
import re


def read(path: str):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as fh:
        for line in fh:
            stack, _, n = line.rstrip("\n").rpartition(" ")
            if stack and n.isdigit():
                yield [re.sub(r":\d+\)", ")", f) for f in stack.split(";")], int(n)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("stacks")
    ap.add_argument("--rate", type=float, default=200.0, help="py-spy's --rate (samples a second)")
    ap.add_argument("--under", help="break down the time under the first frame starting so")
    ap.add_argument("--depth", type=int, default=1)
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    per_process: collections.Counter[str] = collections.Counter()
    below: collections.Counter[str] = collections.Counter()
    total_below = 0
    for frames, n in read(args.stacks):
        procs = [i for i, f in enumerate(frames) if f.startswith("process ")]
        last = procs[-1] if procs else -1
        proc = "worker" if last >= 0 and "fibtui.worker" in frames[last] else "runner"
        per_process[proc] += n
        if args.under:
            rest = frames[last + 1 :]
            hit = next((i for i, f in enumerate(rest) if f.startswith(args.under)), None)
            if hit is not None:
                total_below += n
                below[" > ".join(rest[hit + 1 : hit + 1 + args.depth]) or "(itself)"] += n
    for proc, n in per_process.most_common():
        print(f"{proc}: {n / args.rate:.2f} s of samples (threads summed, idle included)")
    if args.under:
        print(f"\n{total_below / args.rate:.2f} s under {args.under}")
        for key, n in below.most_common(args.top):
            print(f"{n / args.rate:8.2f} s  {key}")


if __name__ == "__main__":
    main()
