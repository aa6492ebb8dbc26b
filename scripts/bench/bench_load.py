#!/usr/bin/env python3
"""The TUI under load: a long interpreter sweep streaming into the app, measured in a real terminal.

    .venv/bin/python scripts/bench/bench_load.py [--jobs 2000] [--kernel-sleep-ms 0] [--out FILE]

A tiny workspace with ``--jobs`` workloads (a python kernel, Triton's CPU interpreter backend) is
opened with ``python -m fibtui`` in a pseudo-terminal (120x40). The full sweep is started with the
keys a user presses (3, s, y, y). While results stream in, pane keys are pressed one at a time;
key-to-repaint is the time from writing the key to the pty until the terminal receives the new
pane's text. RSS of the app process (and of its worker) is sampled every 0.25 s against the number
of finished jobs in the journal. The report is printed (and written to ``--out``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from fibtui.core.numbers import p95  # noqa: E402 - the project's one definition of p95

#: pane key -> text that appears only once that pane is painted (tiny workspace)
MARKERS = {
    b"1": b"never stash",
    b"2": b"varying",
    b"4": b"no NCU reports yet",
    b"6": b"round summary",
    b"3": b"CPU-interpreter timings",
}


def rss_kib(pid: int, field: str = "VmRSS") -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(entry.name))
            except (OSError, ValueError, IndexError):
                continue
    return out


class Terminal:
    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        import fcntl
        import pty
        import struct
        import termios

        self.buf = bytearray()
        self.lock = threading.Lock()
        pid, fd = pty.fork()
        if pid == 0:
            fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
            os.execve(sys.executable, argv, env)
        self.pid, self.fd = pid, fd
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:
                return
            if not chunk:
                return
            with self.lock:
                self.buf += chunk

    def mark(self) -> int:
        with self.lock:
            return len(self.buf)

    def wait_for(self, text: bytes, since: int = 0, timeout: float = 60.0) -> float | None:
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            with self.lock:
                if self.buf.find(text, since) >= 0:
                    return time.monotonic() - t0
            time.sleep(0.001)
        return None

    def press(self, key: bytes) -> None:
        os.write(self.fd, key)


def journal_count(runs_dir: Path) -> tuple[int, bool]:
    found = sorted(runs_dir.glob("*/journal.jsonl")) if runs_dir.is_dir() else []
    if not found:
        return 0, False
    data = found[-1].read_bytes()
    return data.count(b'"kind":"result"'), b'"kind": "end"' in data or b'"kind":"end"' in data


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument(
        "--kernel-sleep-ms",
        type=float,
        default=0.0,
        help="slow each kernel call down (0: as fast as it goes)",
    )
    parser.add_argument("--out", help="also write the report here")
    args = parser.parse_args()

    from tests.runner_helpers import PY_TEMPLATE, make_tiny_workspace

    tmp = Path(tempfile.mkdtemp(prefix="fibtui-load-"))
    root = make_tiny_workspace(
        tmp / "ws", batch_sizes=tuple(range(1, args.jobs + 1)), kernel="good_py"
    )
    if args.kernel_sleep_ms:
        (root / "solution" / "triton" / "kernel.py").write_text(
            PY_TEMPLATE.format(
                body=f"    time.sleep({args.kernel_sleep_ms / 1000})\n    y.copy_(x * alpha)"
            )
        )
    env = dict(
        os.environ,
        TERM="xterm-256color",
        COLUMNS="120",
        LINES="40",
        PYTHONPATH=str(REPO),
        FIBTUI_CONFIG_DIR=str(tmp / "config"),
        FIBTUI_CACHE_DIR=str(tmp / "cache"),
    )
    env.pop("FIB_DATASET_PATH", None)
    term = Terminal([sys.executable, "-m", "fibtui", "--workspace", str(root)], env)
    t_start = time.monotonic()
    assert term.wait_for(b"Regimes") is not None, "the app never painted"
    first_paint = time.monotonic() - t_start
    time.sleep(1.0)
    idle: list[float] = []  # the same keys before the sweep, for comparison
    for key in [b"2", b"3", b"1", b"3", b"4", b"3", b"6", b"3"] * 2:
        since = term.mark()
        term.press(key)
        got = term.wait_for(b"g starts" if key == b"3" else MARKERS[key], since, timeout=10)
        if got is not None:
            idle.append(got * 1000)
        time.sleep(0.35)
    term.press(b"3")
    assert term.wait_for(b"g starts") is not None
    since = term.mark()
    term.press(b"s")
    assert term.wait_for(b"No recon note", since) is not None
    since = term.mark()
    term.press(b"y")
    assert term.wait_for(b"Start it?", since) is not None
    term.press(b"y")
    runs_dir = root / "optimize_ops" / "runs"

    samples: list[tuple[float, int, int | None, int | None]] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            done, _ = journal_count(runs_dir)
            kids = children(term.pid)
            worker = max((rss_kib(k) or 0 for k in kids), default=None)
            samples.append((time.monotonic() - t_start, done, rss_kib(term.pid), worker))
            time.sleep(0.25)

    threading.Thread(target=sample, daemon=True).start()
    while journal_count(runs_dir)[0] == 0:
        time.sleep(0.01)
    t_first = time.monotonic()
    latencies: dict[bytes, list[float]] = {k: [] for k in MARKERS}
    misses = 0
    order = [b"2", b"3", b"1", b"3", b"4", b"3", b"6", b"3"]
    i = 0
    while True:
        done, ended = journal_count(runs_dir)
        if ended or done >= args.jobs:
            break
        key = order[i % len(order)]
        i += 1
        time.sleep(0.05)
        since = term.mark()
        term.press(key)
        got = term.wait_for(MARKERS[key], since, timeout=10)
        if got is None:
            misses += 1
        else:
            latencies[key].append(got * 1000)
        time.sleep(0.3)  # the tab underline animation
    t_done = time.monotonic()
    while not journal_count(runs_dir)[1] and time.monotonic() - t_done < 60:
        time.sleep(0.05)
    time.sleep(1.0)
    peak = rss_kib(term.pid, "VmHWM")
    stop.set()
    term.press(b"q")
    try:
        os.waitpid(term.pid, 0)
    except ChildProcessError:
        pass
    record = json.loads((sorted(runs_dir.glob("*/run.json"))[-1]).read_text())

    every = [v for vs in latencies.values() for v in vs]
    lines = [
        f"command: .venv/bin/python scripts/bench/bench_load.py --jobs {args.jobs}"
        + (f" --kernel-sleep-ms {args.kernel_sleep_ms:g}" if args.kernel_sleep_ms else "")
        + (f" --out {args.out}" if args.out else ""),
        f"machine: {platform.node()} · {os.cpu_count()} CPUs · Python {platform.python_version()} · "
        f"textual {__import__('textual').__version__} · {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC",
        f"sweep: {record['summary']['total']} jobs, {record['summary']['passed']} PASSED, state {record['state']}; "
        f"first paint {first_paint:.2f} s; jobs streamed for {t_done - t_first:.1f} s "
        f"({record['summary']['total'] / max(t_done - t_first, 1e-9):.0f} jobs/s into the Runs pane)",
        "",
        "key-to-repaint while results stream (key written to the pty -> the new pane's text received), ms:",
        f"  all keys      n={len(every):3d}  median {statistics.median(every):7.1f}  p95 {p95(every):7.1f}  "
        f"max {max(every):7.1f}  (missed within 10 s: {misses})",
    ]
    lines.append(
        f"  (idle, before the sweep: n={len(idle)} median {statistics.median(idle):.1f}  p95 {p95(idle):.1f}  "
        f"max {max(idle):.1f})"
    )
    for key, vs in latencies.items():
        if vs:
            lines.append(
                f"  key {key.decode()} ({MARKERS[key].decode()[:22]:<22}) n={len(vs):3d}  median "
                f"{statistics.median(vs):7.1f}  p95 {p95(vs):7.1f}  max {max(vs):7.1f}"
            )
    lines += [
        "",
        "memory over the sweep (app = the fibtui process, worker = its interpreter worker), MiB:",
        "  jobs done    t (s)    app RSS   worker RSS",
    ]
    shown = set()
    for frac in (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0):
        want = int(frac * args.jobs)
        s = next((s for s in samples if s[1] >= want), samples[-1])
        if s in shown:
            continue
        shown.add(s)
        lines.append(
            f"  {s[1]:9d}  {s[0]:7.1f}   {(s[2] or 0) / 1024:8.1f}   {(s[3] or 0) / 1024:10.1f}"
        )
    during = [s for s in samples if 0 < s[1] < args.jobs and s[2]]
    if during:
        early = (
            next(s for s in during if s[1] >= args.jobs * 0.1)
            if any(s[1] >= args.jobs * 0.1 for s in during)
            else during[0]
        )
        late = during[-1]
        lines.append(
            f"  app RSS from 10% to the end of the stream: {early[2] / 1024:.1f} -> {late[2] / 1024:.1f} MiB "
            f"({(late[2] - early[2]) / 1024:+.1f} MiB, {(late[2] - early[2]) / max(late[1] - early[1], 1):.2f} KiB per job)"
        )
    lines.append(f"  app peak RSS (VmHWM): {(peak or 0) / 1024:.1f} MiB")
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
