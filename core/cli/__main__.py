"""``python -m clusterdeck.core.cli``: the command line, as the supervisor starts children."""

import sys

from clusterdeck.core.cli.main import main

sys.exit(main())
