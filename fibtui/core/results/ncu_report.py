"""``ncu``: an Nsight Compute report (a binary ``.ncu-rep`` or its details CSV page) is recognised
so that it is not misread as a result file, and refused with the verb that reads it."""

from __future__ import annotations

from fibtui.core.errors import InputError
from fibtui.core.results.base import Probe, ResultFormat
from fibtui.core.results.table import RunTable

NCU_DETAILS_HEADER = '"ID","Process ID","Process Name"'


def sniff(probe: Probe) -> bool:
    return probe.path.suffix == ".ncu-rep" or probe.stripped.startswith(NCU_DETAILS_HEADER)


def read(probe: Probe) -> RunTable:
    raise InputError(
        probe.path, "this is an Nsight Compute report; read it with: fibtui ncu import FILE"
    )


FORMAT = ResultFormat("ncu", sniff, read)
