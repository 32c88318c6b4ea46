"""``python -m clusterdeck.gui``: the desktop app, as ``clusterdeck gui``."""

import sys

from clusterdeck.gui.launcher import main

sys.exit(main(["gui", *sys.argv[1:]]))
