"""What every ``kontrakt`` command shares: connection options, client configuration from
flags, ``-X key=value`` and a config file, and the exit codes.

Exit codes (the same for every command):

* 0: success;
* 1: the command ran and its check failed (an incompatible schema; ``consume --count N``
  that exits at the end with fewer records);
* 2: usage or input errors (bad flags, bad JSON, a record the schema refuses, an unknown
  topic or group, a file that cannot be read);
* 3: the broker or the registry could not be reached or answered with an error;
* 130: interrupted (Ctrl-C).
"""

from __future__ import annotations

import functools
import importlib
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import click

from kontrakt.errors import (
    ConfigError,
    KafkaConnectionError,
    KafkaTimeoutError,
    KontraktError,
    NoBrokersAvailableError,
)

__all__ = [
    "EXIT_CHECK_FAILED",
    "EXIT_INPUT",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_UNREACHABLE",
    "EXTENSIONS",
    "CliError",
    "Connection",
    "connection_options",
    "parse_pairs",
]

#: schema file extensions and the schema types they hold
EXTENSIONS = {".avsc": "AVRO", ".json": "JSON", ".proto": "PROTOBUF"}

EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_INPUT = 2
EXIT_UNREACHABLE = 3
EXIT_INTERRUPTED = 130

F = TypeVar("F", bound=Callable[..., Any])


class CliError(click.ClickException):
    """A failure the command reports in one line, with its exit code."""

    def __init__(self, message: str, exit_code: int = EXIT_INPUT) -> None:
        super().__init__(message)
        self.exit_code = exit_code  # type: ignore[misc]  # click declares it per class

    def show(self, file: Any = None) -> None:
        click.echo(f"kontrakt: error: {self.format_message()}", err=True)


def parse_pairs(items: Iterable[str], what: str) -> dict[str, str]:
    """``["k=v", ...]`` -> ``{"k": "v"}``.

    Raises:
        CliError: an item without ``=`` (exit 2).
    """
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CliError(f"{what} needs KEY=VALUE, got {item!r}")
        out[key.strip()] = value
    return out


def _read_config_file(path: str) -> dict[str, str]:
    """A Java-style ``.properties`` file (``key=value`` lines, ``#`` comments) or a TOML
    file (``.toml``: top-level keys, or a ``[kafka]`` table)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise CliError(f"--config {path}: {exc.strerror or exc}") from None
    if path.endswith(".toml"):
        toml = _toml_module()
        try:
            data = toml.loads(text)
        except ValueError as exc:  # TOMLDecodeError is a ValueError
            raise CliError(f"--config {path}: not valid TOML: {exc}") from None
        table = data.get("kafka", data)
        if not isinstance(table, dict):
            raise CliError(f"--config {path}: [kafka] must be a table")
        return {str(k): str(v).lower() if isinstance(v, bool) else str(v)
                for k, v in table.items() if not isinstance(v, dict)}
    out: dict[str, str] = {}
    for n, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        key, sep, value = line.partition("=")
        if not sep:
            key, sep, value = line.partition(":")
        if not sep:
            raise CliError(f"--config {path}:{n}: expected key=value, got {line!r}")
        out[key.strip()] = value.strip()
    return out


def _toml_module() -> Any:
    """``tomllib`` (Python 3.11+), else ``tomli`` where installed."""
    for name in ("tomllib", "tomli"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    raise CliError("a .toml --config needs Python 3.11+ (or the tomli package); use a "
                   ".properties file")


class Connection:
    """Where to connect, and the client options the flags gave.

    Attributes:
        bootstrap: ``host:port[,...]`` of the brokers.
        registry: Schema Registry URL, or None.
        options: client options from ``--config`` then ``-X`` (later ones win).
    """

    def __init__(self, bootstrap: str, registry: str | None, options: dict[str, str]) -> None:
        self.bootstrap = bootstrap
        self.registry = registry
        self.options = options

    def client_config(self, **extra: Any) -> dict[str, Any]:
        """The options for a Kafka client: ``bootstrap.servers`` plus the user's (which may
        override ``extra``, the command's own defaults)."""
        return {"bootstrap.servers": self.bootstrap, **extra, **self.options}

    def need_registry(self, why: str) -> str:
        if not self.registry:
            raise CliError(f"{why} needs a Schema Registry: pass --registry URL or set "
                           "KONTRAKT_REGISTRY")
        return self.registry


def connection_options(func: F) -> F:
    """Add ``--bootstrap``, ``--registry``, ``-X`` and ``--config`` to a command, handed to
    it as one ``conn: Connection`` argument."""

    @click.option("-b", "--bootstrap", envvar="KONTRAKT_BOOTSTRAP", default="127.0.0.1:9092",
                  show_default=True, show_envvar=True, help="Kafka bootstrap servers.")
    @click.option("-r", "--registry", envvar="KONTRAKT_REGISTRY", default=None,
                  show_envvar=True, help="Schema Registry URL (registry formats).")
    @click.option("-X", "properties", multiple=True, metavar="KEY=VALUE",
                  help="A client option (Kafka/librdkafka names), repeatable.")
    @click.option("--config", "config_file", default=None, metavar="FILE",
                  help="Client options from a .properties or .toml file (-X wins).")
    @functools.wraps(func)
    def wrapper(*args: Any, bootstrap: str, registry: str | None,
                properties: tuple[str, ...], config_file: str | None, **kwargs: Any) -> Any:
        options = _read_config_file(config_file) if config_file else {}
        options.update(parse_pairs(properties, "-X"))
        bootstrap = options.pop("bootstrap.servers", bootstrap)
        return func(*args, conn=Connection(bootstrap, registry, options), **kwargs)

    return wrapper  # type: ignore[return-value]


def reported(func: F) -> F:
    """Turn Kontrakt's errors into one-line messages and exit codes (see the module)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except (NoBrokersAvailableError, KafkaConnectionError) as exc:
            raise CliError(str(exc), EXIT_UNREACHABLE) from None
        except KafkaTimeoutError as exc:
            raise CliError(str(exc), EXIT_UNREACHABLE) from None
        except ConfigError as exc:
            raise CliError(str(exc), EXIT_INPUT) from None
        except OSError as exc:
            if isinstance(exc, ConnectionError):
                raise CliError(str(exc), EXIT_UNREACHABLE) from None
            raise CliError(str(exc), EXIT_INPUT) from None
        except KontraktError as exc:
            raise CliError(str(exc), _code_for(exc)) from None

    return wrapper  # type: ignore[return-value]


def _code_for(exc: KontraktError) -> int:
    from kontrakt.registry import SchemaRegistryError

    if isinstance(exc, SchemaRegistryError):
        status = getattr(exc, "http_status_code", 0) or 0
        return EXIT_UNREACHABLE if status >= 500 or status <= 0 else EXIT_INPUT
    return EXIT_INPUT


def env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes")
