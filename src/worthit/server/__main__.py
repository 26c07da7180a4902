"""``python -m worthit.server``: `worthit engine serve` by its older name (the engine
benchmark starts it so), the engine alone behind the OpenAI-compatible API.

It runs the CLI's command instead of importing it: the server layer imports no CLI
(tests/test_docs.py), and one command keeps one set of options.
"""

from __future__ import annotations

import runpy
import sys


def main() -> None:
    sys.argv[1:1] = ["engine", "serve"]
    runpy.run_module("worthit", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
