"""The code that runs next to the GPU (or Triton's CPU interpreter): standard library + torch +
triton only, so it can be carried to a bare GPU host or a Modal container.

The local runner, the interpreter runner and the Modal function all run the same entry point,
:func:`fibtui.worker.engine.execute` / ``python -m fibtui.worker serve``.
"""
