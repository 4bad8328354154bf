"""``python -m broker --config FILE``: run one broker until SIGTERM (then shut down in a controlled way)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from broker import config as broker_config
from daemon.config import ConfigError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m broker", description=__doc__)
    parser.add_argument("--config", help="Java properties file (KAFKA_* environment variables override it)")
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s [%(name)s] %(message)s"
    )
    try:
        config = broker_config.load(args.config)
    except ConfigError as exc:
        print(f"invalid configuration: {exc}", file=sys.stderr)
        return 2
    logging.getLogger("broker").info("configuration:\n%s", config.loaded.describe() if config.loaded else "")
    from broker.server import run

    try:
        import uvloop
    except ImportError:
        asyncio.run(run(config))
    else:
        uvloop.run(run(config))
    return 0


if __name__ == "__main__":
    sys.exit(main())
