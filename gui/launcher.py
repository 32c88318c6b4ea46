"""``clusterdeck``, the installed command: the desktop app for ``gui``, the command line for
everything else.

It is the top layer, so the runtime's command line never imports the desktop app, and a
headless command (``up``, ``submit``, a TaskManager) never imports Qt.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["gui"]:
        return _gui(arguments[1:])
    from clusterdeck.core.cli.main import main as cli_main
    return cli_main(arguments)


def _gui(arguments: list[str]) -> int:
    from clusterdeck.core.node import exitcodes
    from clusterdeck.gui.display import display_problem

    if "-h" not in arguments and "--help" not in arguments and (problem := display_problem()):
        print(f"clusterdeck gui: {problem}", file=sys.stderr)
        return exitcodes.NO_DISPLAY
    from clusterdeck.gui.app import main as gui_main
    return gui_main(arguments)
