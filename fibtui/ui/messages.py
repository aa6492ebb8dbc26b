"""App-wide messages (a widget's own messages are nested in its class)."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from fibtui.core.dataset import Definition, WorkloadSet


@dataclass
class DefinitionLoaded(Message):
    """The active definition and its workloads were read (in a worker)."""

    definition: Definition
    workloads: WorkloadSet


@dataclass
class DefinitionFailed(Message):
    """Reading the active definition failed with a one-line reason."""

    reason: str
