"""fibtui: a terminal workbench for optimizing GPU kernels against FlashInfer-Bench definitions."""

__version__ = "0.1.0"
