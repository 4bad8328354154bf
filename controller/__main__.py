"""``python -m controller --config FILE``: run one controller candidate until SIGTERM."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from controller import config as controller_config
from daemon.config import ConfigError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m controller", description=__doc__)
    parser.add_argument("--config", help="Java properties file (KAFKA_* environment variables override it)")
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s [%(name)s] %(message)s",
    )
    try:
        config = controller_config.load(args.config)
    except ConfigError as exc:
        print(f"invalid configuration: {exc}", file=sys.stderr)
        return 2
    logging.getLogger("controller").info(
        "configuration:\n%s", config.loaded.describe() if config.loaded else ""
    )
    try:
        import uvloop
    except ImportError:
        runner = asyncio.run
    else:
        runner = uvloop.run
    from controller.daemon import run

    runner(run(config))
    return 0


if __name__ == "__main__":
    sys.exit(main())
