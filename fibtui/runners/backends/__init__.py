"""The backends ``fibtui run`` can use, one module each (listed in
:data:`fibtui.runners.registry.BACKEND_MODULES`); each registers its :class:`~fibtui.runners.registry.Backend`
when imported and imports its runner only when a run needs it."""
