"""The worker service: one process per user and installation that keeps ``fibtui.worker serve``
processes started (torch and triton imported, CUPTI warmed on a GPU) and hands them over to the
runs that need one, so a CLI gate does not pay the worker's start-up again.

- :mod:`.common`: where the socket lives (and its permission checks), the facts a service must
  share with its clients, the key of a worker, the wire format;
- :mod:`.server`: the service itself (``python -m fibtui.runners.service``);
- :mod:`.client`: what a run uses (:class:`~.client.ServiceWorkers`, a drop-in for
  :class:`fibtui.runners.local.WarmWorkers`) and what ``fibtui workers`` asks.

docs/architecture.md ("The worker service") describes the protocol and its security.
"""
