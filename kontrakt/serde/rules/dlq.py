"""The ``DLQ`` rule action: a record a rule refuses is sent to a dead letter queue topic.

Name it in a rule's ``onFailure`` (``"DLQ"``, or ``"DLQ,ERROR"`` for a ``WRITEREAD`` rule that
should only divert on write). The record still fails for the caller; the DLQ holds a copy:
on read, the record's bytes as they arrived; on write, the value the rule saw, as JSON. The
copy carries Confluent's headers ``__rule.name``, ``__rule.mode``, ``__rule.subject``,
``__rule.topic`` and ``__rule.exception``; a record read back with ``__rule.name`` skips that
rule (see :meth:`~kontrakt.serde.rules.RulePlan.apply`), so a fixed record can be replayed.

The topic comes from ``dlq.topic`` (the action's config or the serde's ``rule_conf``, else
the rule's ``params`` or the schema's metadata properties). The producer is one given as
``producer`` (a :class:`kontrakt.Producer`), else one built from the other config keys
(``bootstrap.servers`` ...) on first use and closed by :meth:`DlqAction.close`.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import threading
import uuid
from collections.abc import Mapping
from typing import Any

from kontrakt.errors import RuleError
from kontrakt.serde.rules import DLQ_RULE_NAME_HEADER, READ, RuleAction, RuleContext

__all__ = ["DlqAction"]


def _plain(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode()
    if isinstance(value, (datetime.date, datetime.datetime, datetime.time)):
        return value.isoformat()
    if isinstance(value, (decimal.Decimal, uuid.UUID)):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


class DlqAction(RuleAction):
    """Sends a record a rule refused to a dead letter queue topic, then refuses it.

    Args:
        conf: ``dlq.topic``, ``dlq.auto.flush`` (flush after each record; False),
            ``producer`` (a ready :class:`kontrakt.Producer`), and otherwise producer config
            for one built on first use. ``dlq.*`` keys and ``producer`` may also come from a
            serde's ``rule_conf`` (see :meth:`configure`).

    A failure to send is reported in the raised error; the record is refused either way.
    """

    TYPE = "DLQ"

    def __init__(self, conf: Mapping[str, Any] | None = None) -> None:
        self._conf: dict[str, Any] = dict(conf or {})
        self._producer: Any = self._conf.get("producer")
        self._owned = False
        self._lock = threading.Lock()

    def type(self) -> str:
        return self.TYPE

    def configure(self, client_conf: Mapping[str, Any], rule_conf: Mapping[str, Any]) -> None:
        """Take ``dlq.*`` keys and ``producer`` from a serde's ``rule_conf``."""
        with self._lock:
            for key, value in rule_conf.items():
                if key == "producer" or key.startswith("dlq."):
                    self._conf[key] = value
            if self._conf.get("producer") is not None and not self._owned:
                self._producer = self._conf["producer"]

    def _get_producer(self) -> Any:
        with self._lock:
            if self._producer is None:
                from kontrakt.clients.producer import Producer

                config = {k: v for k, v in self._conf.items()
                          if k != "producer" and not k.startswith("dlq.")}
                self._producer = Producer(config)
                self._owned = True
            return self._producer

    def run(self, ctx: RuleContext, message: Any, ex: BaseException | None) -> None:
        """Send the record to the DLQ topic and refuse it.

        Raises:
            RuleError: always (naming the topic), also when no topic is configured or the
                send failed.
        """
        topic = self._conf.get("dlq.topic") or ctx.get_parameter("dlq.topic")
        what = f"{ctx.rule.describe()} failed"
        if not topic:
            raise RuleError(f"{what}, and its DLQ action has no dlq.topic") from ex
        if ctx.rule_mode == READ and ctx.original is not None:
            value = bytes(ctx.original)
        else:
            value = json.dumps(message, default=_plain, separators=(",", ":")).encode()
        ser_ctx = ctx.ser_ctx
        headers = [
            (DLQ_RULE_NAME_HEADER, ctx.rule.name.encode()),
            ("__rule.mode", ctx.rule_mode.encode()),
            ("__rule.subject", (ctx.subject or "").encode()),
            ("__rule.topic", (getattr(ser_ctx, "topic", None) or "").encode()),
            ("__rule.exception", (str(ex) if ex is not None else "").encode()),
        ]
        try:
            producer = self._get_producer()
            producer.send(str(topic), value=value, headers=headers)
            if str(self._conf.get("dlq.auto.flush", "false")).lower() == "true":
                producer.flush()
        except Exception as e:
            raise RuleError(f"{what}, and sending it to DLQ topic {topic!r} failed: {e!r}") \
                from ex
        raise RuleError(f"{what}; the record was sent to DLQ topic {topic!r}") from ex

    def close(self) -> None:
        """Close the producer this action built (a given one stays the caller's)."""
        with self._lock:
            if not self._owned:
                return
            producer, self._producer, self._owned = self._producer, None, False
        producer.close()
