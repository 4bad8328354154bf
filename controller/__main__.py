"""``python -m controller --config FILE``: run one controller candidate until SIGTERM."""

from __future__ import annotations

import sys

from controller import config as controller_config
from daemon import runtime


def main(argv: list[str] | None = None) -> int:
    from controller.daemon import ControllerDaemon

    return runtime.main(
        argv,
        prog="python -m controller",
        description=__doc__,
        load=controller_config.load,
        daemon=ControllerDaemon,
    )


if __name__ == "__main__":
    sys.exit(main())
