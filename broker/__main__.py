"""``python -m broker --config FILE``: run one broker until SIGTERM (then shut down in a controlled way)."""

from __future__ import annotations

import sys

from broker import config as broker_config
from daemon import runtime


def main(argv: list[str] | None = None) -> int:
    from broker.server import BrokerServer

    return runtime.main(
        argv, prog="python -m broker", description=__doc__, load=broker_config.load, daemon=BrokerServer
    )


if __name__ == "__main__":
    sys.exit(main())
