"""``python -m broker``: run a cluster's broker without the clusterdeck CLI.

It exists so tests (and a user debugging a broker) can start the broker as a real
process with exactly the options ``clusterdeck broker`` takes.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from broker.process import serve
from core import config as configuration
from core import paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m broker",
                                     description="Run the MQTT broker of a clusterdeck cluster.")
    parser.add_argument("--config", type=Path, help="TOML configuration file")
    parser.add_argument("-D", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE", help="override one configuration key")
    parser.add_argument("--cluster-dir", type=Path,
                        help="the cluster's state dir (default: from cluster.id)")
    args = parser.parse_args(argv)
    try:
        overrides = dict(configuration.parse_override(item) for item in args.overrides)
        config = configuration.load(args.config, overrides)
    except configuration.ConfigError as error:
        print(f"clusterdeck broker: {error}", file=sys.stderr)
        return 2
    return serve(config, args.cluster_dir or paths.cluster_dir(config["cluster.id"]))


if __name__ == "__main__":
    sys.exit(main())
