"""The bundle's entry point (the script of packaging/clusterdeck.spec).

One executable is the CLI, the GUI (``clusterdeck gui``), every child process the
supervisor starts (``clusterdeck broker|jobmanager|taskmanager``) and the Python that
Spark runs its workers with (``clusterdeck -m pyspark.daemon``): see core/node/frozen.py.
"""

from __future__ import annotations

import multiprocessing
import sys

from clusterdeck.core.node import frozen


def main() -> int:
    multiprocessing.freeze_support()
    frozen.prepare_environment()
    status = frozen.run_as_python()
    if status is not None:
        return status
    from clusterdeck.gui.launcher import main as launcher_main
    return launcher_main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
