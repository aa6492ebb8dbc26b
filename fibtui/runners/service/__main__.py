"""``python -m fibtui.runners.service --socket PATH``: the worker service (see server.py)."""

from fibtui.runners.service.server import main

if __name__ == "__main__":
    raise SystemExit(main())
