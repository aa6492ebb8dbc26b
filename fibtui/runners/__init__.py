"""Turn jobs into events: local GPU, CPU interpreter, Modal, official parity, Nsight Compute."""
