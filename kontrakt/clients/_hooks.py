"""confluent-kafka's client callbacks: ``error_cb``, ``logger`` and ``stats_cb`` (every
``statistics.interval.ms``), for the consumers and producers.

Kontrakt reports through the :mod:`logging` module from module loggers shared by every
client. To tell one client's records from another's, a client binds itself
(:meth:`ClientHooks.bound`) while it starts its background tasks: the tasks inherit the
binding (a :class:`contextvars.ContextVar`, copied into each task at its creation), and a
handler on the ``kontrakt`` logger passes on only the records logged under its own client.
Records logged in the application's own calls (outside those tasks) are not attributed.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from kontrakt._config import Option, options
from kontrakt.errors import ConfigError, KafkaError

__all__ = ["HOOK_OPTIONS", "ClientHooks", "report_error"]

HOOK_OPTIONS = options(
    Option("error_cb", "any",
           doc="error_cb(error): called with a KafkaError for each error the client's "
               "background work meets (a broker unreachable, a failed fetch or produce "
               "request, each retried) and each warning it logs (failed metadata refreshes "
               "or auto commits); on the client's I/O thread"),
    Option("logger", "any",
           doc="a logging.Logger that also receives the log records of this client's "
               "background work (records below the 'kontrakt' logger's level are not made)"),
    Option("stats_cb", "any",
           doc="stats_cb(json_str): statistics every statistics.interval.ms, as JSON in "
               "librdkafka's shape for the fields Kontrakt has; on the client's I/O thread"),
    Option("statistics.interval.ms", "int", 0, minimum=0,
           doc="how often stats_cb is called (0: never)"),
)

_BOUND: contextvars.ContextVar[ClientHooks | None] = contextvars.ContextVar(
    "kontrakt_client_hooks", default=None)
_ROOT = "kontrakt"


def report_error(exc: BaseException) -> None:
    """Hand an error met by background work (a failed fetch or produce request, which are
    retried and logged only at DEBUG) to the ``error_cb`` of the client whose task met it.
    Cheap when no callback is set: one context variable read, on failure paths only."""
    hooks = _BOUND.get()
    if hooks is None or hooks.error_cb is None:
        return
    try:
        hooks.error_cb(exc if isinstance(exc, KafkaError) else KafkaError(str(exc)))
    except Exception:
        logging.getLogger(__name__).exception("error_cb failed")


class _Forward(logging.Handler):
    """Passes the records of one client's tasks to its ``logger`` and ``error_cb``."""

    def __init__(self, hooks: ClientHooks) -> None:
        super().__init__(logging.NOTSET)
        self._hooks = hooks
        self._inside = threading.local()

    def emit(self, record: logging.LogRecord) -> None:
        hooks = self._hooks
        if _BOUND.get() is not hooks or getattr(self._inside, "on", False):
            return
        # A user logger under "kontrakt" would hand the record back here.
        self._inside.on = True
        try:
            logger = hooks.logger
            if logger is not None and logger.isEnabledFor(record.levelno):
                logger.handle(record)
            if hooks.error_cb is not None and record.levelno >= logging.WARNING:
                exc = record.exc_info[1] if record.exc_info else None
                if not isinstance(exc, KafkaError):
                    err = KafkaError(record.getMessage())
                    if exc is not None:
                        err.__cause__ = exc
                    exc = err
                hooks.error_cb(exc)
        except Exception:
            self.handleError(record)
        finally:
            self._inside.on = False


class ClientHooks:
    """One client's ``error_cb``, ``logger`` and ``stats_cb``.

    Args:
        config: the client's validated options (with :data:`HOOK_OPTIONS`).
        kind: ``consumer`` or ``producer`` (librdkafka's ``type``).
        stats: returns the client-specific part of the statistics (called on the loop).

    Raises:
        ConfigError: a callback that is not callable, a logger that is not a
            logging.Logger, or stats_cb without statistics.interval.ms (or the reverse).
    """

    def __init__(self, config: Any, kind: str, stats: Callable[[], dict[str, Any]]) -> None:
        self.error_cb: Callable[[KafkaError], Any] | None = config["error_cb"]
        self.logger: logging.Logger | None = config["logger"]
        self.stats_cb: Callable[[str], Any] | None = config["stats_cb"]
        self.interval = config["statistics.interval.ms"] / 1000
        for name in ("error_cb", "stats_cb"):
            if config[name] is not None and not callable(config[name]):
                raise ConfigError(f"{name} must be callable, got {config[name]!r}")
        if self.logger is not None and not isinstance(self.logger, logging.Logger):
            raise ConfigError(f"logger must be a logging.Logger, got {self.logger!r}")
        if (self.stats_cb is None) != (self.interval == 0):
            raise ConfigError("stats_cb and statistics.interval.ms go together: set both "
                              "(statistics.interval.ms > 0) or neither")
        self._kind = kind
        self._client_id = config["client.id"]
        self._stats = stats
        self._created = time.monotonic()
        self._handler: _Forward | None = None
        self._task: asyncio.Task[None] | None = None
        self.stats_error: BaseException | None = None

    @property
    def active(self) -> bool:
        """True when any callback is configured."""
        return (self.error_cb is not None or self.logger is not None
                or self.stats_cb is not None)

    @contextlib.contextmanager
    def bound(self) -> Iterator[None]:
        """Attribute to this client the records of the tasks created inside the block, and
        start the handler and the statistics task (once)."""
        if not self.active:
            yield
            return
        if self._handler is None and (self.error_cb is not None or self.logger is not None):
            self._handler = _Forward(self)
            logging.getLogger(_ROOT).addHandler(self._handler)
        token = _BOUND.set(self)
        try:
            if self.stats_cb is not None and self._task is None:
                self._task = asyncio.get_running_loop().create_task(self._report())
            yield
        finally:
            _BOUND.reset(token)

    def statistics(self) -> str:
        """The statistics JSON (librdkafka's top-level fields plus the client's)."""
        now = time.time()
        doc: dict[str, Any] = {
            "name": f"{self._client_id}#{self._kind}-{id(self):x}",
            "client_id": self._client_id,
            "type": self._kind,
            "ts": int(time.monotonic() * 1e6),
            "time": int(now),
            "age": int((time.monotonic() - self._created) * 1e6),
        }
        doc.update(self._stats())
        return json.dumps(doc)

    async def _report(self) -> None:
        assert self.stats_cb is not None
        while True:
            await asyncio.sleep(self.interval)
            try:
                self.stats_cb(self.statistics())
            except Exception as exc:  # the callback's bug must not stop the reports
                self.stats_error = exc
                logging.getLogger(__name__).exception("stats_cb failed")

    async def close(self) -> None:
        """Stop the statistics task and the log forwarding."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._handler is not None:
            logging.getLogger(_ROOT).removeHandler(self._handler)
            self._handler = None
