"""``clusterdeck gui``: the desktop app's entry point.

``main(argv)`` builds the QApplication and the window, optionally starts a local cluster
(``--start``), attaches to a running one (``--attach ID``) or opens a flight recording
offline (``clusterdeck gui FILE``), and runs the event loop.
Closing the window while a local cluster runs asks whether to stop it or to leave it
running headless: the supervisor lives in this process (its children die with it), so
"headless" means the process stays, without a window, until Ctrl-C or SIGTERM stops the
cluster.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from PySide6.QtCore import QCoreApplication, QTimer
from PySide6.QtWidgets import QApplication

from clusterdeck.core.config.settings import ConfigError, load, parse_override
from clusterdeck.gui.collector import MainThreadCollector
from clusterdeck.gui.controllers.mainwindow import MainWindow
from clusterdeck.gui.models.profiles import ProfileError
from clusterdeck.gui.session import attach_config, credentials_attach
from clusterdeck.gui.views.mainwindow import APPLICATION, HEADLESS, ORGANISATION


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="clusterdeck gui",
                                     description="The clusterdeck desktop app.")
    start = parser.add_mutually_exclusive_group()
    start.add_argument("--start", nargs="?", const="", metavar="PROFILE",
                       help="start a local cluster from PROFILE (default: the first one)")
    start.add_argument("--attach", metavar="CLUSTER_ID",
                       help="watch a running cluster (e.g. one started by clusterdeck up)")
    start.add_argument("--attach-credentials", metavar="FILE",
                       help="watch a cluster, of this or another machine, with a file of "
                       "`clusterdeck credentials export --role client` (or observer)")
    parser.add_argument("recording", nargs="?", type=Path, metavar="RECORDING",
                        help="open a flight recording (clusterdeck record export) offline")
    parser.add_argument("-D", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE", help="override one configuration key of --start")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the app; returns the process's exit code. ``argv`` excludes the program and
    the ``gui`` subcommand."""
    args = build_parser().parse_args(list(argv) if argv is not None else sys.argv[1:])
    QCoreApplication.setOrganizationName(ORGANISATION)
    QCoreApplication.setApplicationName(APPLICATION)
    app = QApplication.instance() or QApplication([sys.argv[0] if sys.argv else "clusterdeck"])
    assert isinstance(app, QApplication)
    app.setQuitOnLastWindowClosed(False)
    MainThreadCollector(app)  # no Qt object may be collected on an MQTT thread
    window = MainWindow()
    try:
        _begin(window, args)
    except (ConfigError, ProfileError, ValueError) as error:
        print(f"clusterdeck gui: {error}", file=sys.stderr)
        return 2
    _quit_on_signals(app, window)
    window.closed.connect(lambda choice: _after_close(app, window, choice))
    window.show()
    return app.exec()


def _begin(window: MainWindow, args: argparse.Namespace) -> None:
    if args.recording is not None and (args.attach or args.attach_credentials
                                       or args.start is not None):
        raise ValueError("a recording opens without a cluster: not with --start or --attach")
    if args.recording is not None:
        if not args.recording.is_file():
            raise ValueError(f"no recording at {args.recording}")
        window.open_recording(args.recording)
    elif args.attach:
        window.session.attach(attach_config(args.attach))
    elif args.attach_credentials:
        window.session.attach(*credentials_attach(args.attach_credentials))
    elif args.start is not None:
        store = window.cluster_panel.profiles.store
        profile = store.get(args.start) if args.start else store.profiles[0]
        if profile is None:
            raise ProfileError(f"no profile named {args.start!r} (known: "
                               f"{', '.join(store.names())})")
        overrides = {**profile.overrides(), **dict(map(parse_override, args.overrides))}
        window.session.start(load(None, overrides))


def _after_close(app: QApplication, window: MainWindow, choice: str) -> None:
    if choice != HEADLESS:
        app.quit()
        return
    state = window.session.state
    print(f"clusterdeck: cluster {state.cluster_id} keeps running headless in pid "
          f"{os.getpid()}; Ctrl-C or kill -TERM {os.getpid()} stops it; attach with "
          f"clusterdeck gui --attach {state.cluster_id}", file=sys.stderr)


def _quit_on_signals(app: QApplication, window: MainWindow) -> None:
    """Ctrl-C and SIGTERM stop the cluster and quit, with or without a window. Python
    runs signal handlers only between bytecodes, so a timer wakes the interpreter. The
    quit is posted: a signal before ``app.exec()`` runs its handler at once, and a quit
    called before the loop runs is ignored (the process stayed up for good)."""
    def stop(*_: object) -> None:
        window.session.shutdown()
        QTimer.singleShot(0, app.quit)

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, stop)
    waker = QTimer(app)
    waker.timeout.connect(lambda: None)
    waker.start(250)


if __name__ == "__main__":
    sys.exit(main())
