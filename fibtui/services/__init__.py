"""The application layer: the services the CLI (:mod:`fibtui.verbs`) and the TUI
(:mod:`fibtui.ui`) share, above the runners and the core.

:mod:`~fibtui.services.runs` plans, starts, resumes and retries a run;
:mod:`~fibtui.services.decide` compares runs, gives a finished run its verdict and decides a
round (promote, reject, archive).
"""
