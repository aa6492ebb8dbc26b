"""Runners turn "these jobs" into events: local GPU, CPU interpreter, Modal, official parity."""
