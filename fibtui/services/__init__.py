"""The application layer: the services the CLI (:mod:`fibtui.verbs`) and the TUI
(:mod:`fibtui.ui`) share, above the runners and the core.

:mod:`~fibtui.services.runs` plans, starts, resumes and retries a run;
:mod:`~fibtui.services.decide` compares runs, gives a finished run its verdict and decides a
round (promote, reject, archive); :mod:`~fibtui.services.archive` is what changes the archive
and the workspace (copying into the archive, best.json, the checked-in kernel, git).
"""
