"""``python -m zkserver``: run a standalone ZooKeeper in the foreground for local development.

State lives in a fixed directory (``./.run/zookeeper`` by default) so znodes survive
restarts; Ctrl-C or SIGTERM stops the server cleanly.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import signal
import socket
import sys
import threading
from pathlib import Path
from types import FrameType

from zkserver.errors import LocalServerError
from zkserver.ports import LOOPBACK, find_free_port
from zkserver.server import ZooKeeperServer

DEFAULT_PORT = 2181
DEFAULT_DATA_DIR = Path(".run") / "zookeeper"


def _port_is_free(port: int) -> bool:
    """True if nothing listens on the port (SO_REUSEADDR, as ZooKeeper uses, ignores TIME_WAIT)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((LOOPBACK, port))
        except OSError:
            return False
    return True


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m zkserver", description="Run a standalone ZooKeeper on 127.0.0.1 until interrupted."
    )
    parser.add_argument(
        "--port",
        type=int,
        default=None,
        help=f"client port (default {DEFAULT_PORT}, or a free port if {DEFAULT_PORT} is taken)",
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=DEFAULT_DATA_DIR,
        help=f"ZooKeeper data, config and log (default ./{DEFAULT_DATA_DIR})",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Start the server, report where it is, block until a signal, stop it."""
    args = _parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    port = args.port
    if port is None:
        port = DEFAULT_PORT
        if not _port_is_free(port):
            port = find_free_port()
            print(f"Port {DEFAULT_PORT} is taken; using free port {port} instead.", flush=True)

    stop_requested = threading.Event()

    def _on_signal(signum: int, _frame: FrameType | None) -> None:
        stop_requested.set()

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)

    try:
        server = ZooKeeperServer(port=port, data_dir=args.data_dir)
        server.start()
    except LocalServerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1

    with contextlib.ExitStack() as cleanup:
        cleanup.callback(server.stop)
        print(f"ZooKeeper is serving at {server.connect_string}", flush=True)
        print(f"  data dir: {server.data_dir}", flush=True)
        print(f"  log:      {server.log_path}", flush=True)
        print(
            "Only ZooKeeper is running for now; the controller and broker daemons come later.\n"
            "Press Ctrl-C to stop.",
            flush=True,
        )
        while not stop_requested.wait(1.0):
            if not server.running:
                print(f"error: ZooKeeper exited unexpectedly\n{server.process.log_tail()}", file=sys.stderr)
                return 1
        print("Stopping ZooKeeper...", flush=True)
    print("Stopped.", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
