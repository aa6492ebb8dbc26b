"""The details page as text (what ``ncu`` prints, or ``ncu --import X --page details``): kernel
blocks headed ``<kernel> (gx, gy, gz)x(bx, by, bz), Context N, Stream N, Device N, CC x.y``,
``Section:`` tables of ``Metric Name / Metric Unit / Metric Value`` between dash separator lines,
and ``OPT`` / ``INF`` / ``WRN`` rule paragraphs."""

from __future__ import annotations

import re
from pathlib import Path

from fibtui.core.errors import InputError
from fibtui.core.ncu.records import Launch, Metric, NcuReport, Rule
from fibtui.core.ncu.units import cell_int, dims, normalize, parse_number

_SPEEDUP = re.compile(
    r"^Est\.\s+(?:(Local|Global)\s+)?Speedup:\s*([-+\d.,eE]+)\s*%\s*", re.IGNORECASE
)

_KERNEL_HEADER = re.compile(
    r"^\s*(?P<name>\S.*?)\s*\((?P<g>\s*\d+\s*,\s*\d+\s*,\s*\d+\s*)\)x\((?P<b>\s*\d+\s*,\s*\d+\s*,\s*\d+\s*)\)"
    r",\s*Context\s+(?P<ctx>\d+),\s*Stream\s+(?P<stream>\d+)"
    r"(?:,\s*Device\s+(?P<dev>\d+))?(?:,\s*CC\s+(?P<cc>[\d.]+))?",
    re.ASCII,
)
_PROCESS = re.compile(r"^\s*\[(?P<pid>\d+)\]\s+(?P<name>.+?)@(?P<host>\S+)\s*$", re.ASCII)
_SECTION = re.compile(r"^\s*Section:(?P<name>.*)$")
_RULE = re.compile(r"^\s*(?P<type>OPT|INF|WRN|ERR|ERROR)\s{2,}(?P<text>\S.*)$")
_SEPARATOR = re.compile(r"^\s*-+(?: -+)*\s*$")


def _columns(separator: str) -> list[int]:
    return [m.start() for m in re.finditer(r"-+", separator)]


def _cuts_word(body: str, at: int) -> bool:
    return 0 < at < len(body) and body[at - 1] != " " and body[at] != " "


def _split_row(line: str, cols: list[int]) -> tuple[str, str, str] | None:
    body = line.rstrip()
    if any(_cuts_word(body, c) for c in cols[1:3]):
        return _split_loose(body)  # a cell overflowed its column: split on runs of spaces
    if len(cols) >= 3:
        return body[: cols[1]].strip(), body[cols[1] : cols[2]].strip(), body[cols[2] :].strip()
    if len(cols) == 2:
        return body[: cols[1]].strip(), "", body[cols[1] :].strip()
    return _split_loose(body)


def _split_loose(body: str) -> tuple[str, str, str] | None:
    parts = re.split(r"\s{2,}", body.strip())
    if len(parts) >= 3:
        return " ".join(parts[:-2]), parts[-2], parts[-1]
    if len(parts) == 2:
        tail = parts[1].split()
        if len(tail) == 2:
            return parts[0], tail[0], tail[1]
        return parts[0], "", parts[1]
    return None


def parse_details_text(text: str, path: str | Path | None = None) -> NcuReport:
    """The details page as text (what ``ncu`` prints, or ``ncu --import X --page details``)."""
    where = None if path is None else str(path)
    report = _TextPage(where, text.splitlines()).read()
    if not report.launches:
        raise InputError(
            where,
            "no Nsight Compute kernel block found (expected a line like "
            "'<kernel> (gx, gy, gz)x(bx, by, bz), Context N, Stream N, Device N, CC x.y')",
        )
    return report


class _TextPage:
    """Reading a details text page line by line. A metric table opens at a dash separator line
    (``state`` none -> open), may carry a ``Metric Name ... Metric Value`` header between two
    separators (header -> body), and closes at the next separator; a rule paragraph runs from its
    ``OPT`` / ``INF`` / ``WRN`` line to a blank line, a separator or the next section."""

    def __init__(self, where: str | None, lines: list[str]) -> None:
        self.report = NcuReport(where, "details-text")
        self.lines = lines
        self.launch: Launch | None = None
        self.section = ""
        self.process: tuple[int | None, str | None] = (None, None)
        self.state = "none"  # none | open (after a separator) | header | body
        self.cols: list[int] = []
        self.rule: Rule | None = None
        self.rule_lines: list[str] = []

    def read(self) -> NcuReport:
        for i, line in enumerate(self.lines):
            self._line(i, line)
        self._close_rule()
        return self.report

    def _line(self, i: int, line: str) -> None:
        stripped = line.strip()
        if stripped.startswith("=="):
            if stripped.startswith(("==ERROR==", "==WARNING==")):
                self.report.notes.append(stripped)
            return
        if self._process_or_kernel(line, stripped) or self.launch is None:
            return
        m = _SECTION.match(line)
        if m:
            self._close_rule()
            self.section, self.state = m.group("name").strip(), "none"
        elif _SEPARATOR.match(line):
            self._separator(i, line)
        elif m := _RULE.match(line):
            self._close_rule()
            self.state = "none"
            self.rule = Rule(
                self.section, "", "ERR" if m.group("type") == "ERROR" else m.group("type"), ""
            )
            self.rule_lines.append(m.group("text").strip())
        elif not stripped:
            if self.state == "none":
                self._close_rule()
        elif self.state in ("open", "header") and "Metric Name" in line and "Metric Value" in line:
            self.state = "header"
        elif self.state in ("open", "body", "header"):
            self.state = "body"
            self._metric_row(line)
        elif self.rule is not None:
            self.rule_lines.append(stripped)

    def _process_or_kernel(self, line: str, stripped: str) -> bool:
        """A process line (``[pid] name@host``) or a kernel header starts a new block."""
        m = _PROCESS.match(line) if stripped.startswith("[") else None
        if m:
            self._close_rule()
            self.process = (cell_int(m.group("pid")), m.group("name"))
            self.state = "none"
            return True
        m = _KERNEL_HEADER.match(line) if ")x(" in line and "Context" in line else None
        if m:
            self._close_rule()
            self.launch = Launch(
                kernel=m.group("name").strip(),
                id=len(self.report.launches),
                grid=dims(f"({m.group('g')})"),
                block=dims(f"({m.group('b')})"),
                context=cell_int(m.group("ctx")),
                stream=cell_int(m.group("stream")),
                device=cell_int(m.group("dev")),
                cc=m.group("cc"),
                process_id=self.process[0],
                process_name=self.process[1],
            )
            self.report.launches.append(self.launch)
            self.section, self.state = "", "none"
            return True
        return False

    def _separator(self, i: int, line: str) -> None:
        self._close_rule()
        if self.state == "header":
            self.state, self.cols = "body", _columns(line)
        elif self.state != "none":
            self.state = "none"
        elif not self._between_rules(i, line):
            self.state, self.cols = "open", _columns(line)

    def _between_rules(self, i: int, line: str) -> bool:
        """A separator followed by a rule paragraph (or one of a single column) opens no table."""
        j = i + 1
        while j < len(self.lines) and not self.lines[j].strip():
            j += 1
        nxt = self.lines[j] if j < len(self.lines) else ""
        return bool(_RULE.match(nxt)) or len(_columns(line)) < 2

    def _metric_row(self, line: str) -> None:
        parts = _split_row(line, self.cols)
        if parts is None or not parts[0] or self.launch is None:
            return
        name, raw_unit, raw_value = parts
        value, unit = normalize(raw_value, raw_unit)
        self.launch.metrics.append(Metric(self.section, name, value, unit, raw_value, raw_unit))

    def _close_rule(self) -> None:
        if self.rule is not None and self.launch is not None:
            body = " ".join(self.rule_lines).strip()
            m = _SPEEDUP.match(body)
            if m:
                self.rule.speedup_type = (m.group(1) or "global").lower()
                self.rule.speedup_pct = parse_number(m.group(2))
                body = body[m.end() :].strip()
            self.rule.text = body
            self.launch.rules.append(self.rule)
        self.rule = None
        self.rule_lines.clear()
