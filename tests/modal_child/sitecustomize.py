"""Test-only: Python imports this in the child worker of a Modal slice when a test puts this folder
on PYTHONPATH (tests/test_modal_faults.py). The CPU cannot lose a CUDA context, so with
``FIBTUI_TEST_POISON_N`` set, a kernel's planted "illegal memory access" makes the engine believe
it did, as it would on a GPU: the worker then answers the rest of its slice ``not_run`` and exits
with code 3, as after a real lost context."""

import os

if os.environ.get("FIBTUI_TEST_POISON_N"):
    from fibtui.worker.engine import Engine

    _real_failure = Engine._failure
    _real_lost = Engine._context_lost

    def _failure(self, exc, sol=None):
        if "illegal memory access" in str(exc):
            self._planted = True
        return _real_failure(self, exc, sol)

    def _context_lost(self):
        if getattr(self, "_planted", False):
            self.poisoned = True
            return True
        return _real_lost(self)

    Engine._failure = _failure
    Engine._context_lost = _context_lost

if os.environ.get("FIBTUI_TEST_LOAD_RAISES"):
    # the worker itself fails while loading (a device that does not initialise): execute() raises
    from fibtui.worker.engine import Engine

    def _load(self, *args, **kwargs):
        raise RuntimeError("CUDA error: initialization error (planted by the test)")

    Engine.load = _load
