"""``python -m clusterdeck.core.reproduce DIR [--pdb | --debugpy PORT]``: run a
reproduction folder (the same as ``clusterdeck reproduce --run DIR``)."""

import sys

from clusterdeck.core.reproduce.command import main

sys.exit(main())
