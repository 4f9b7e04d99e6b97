"""Every component's option table as plain rows, for the configuration reference page
(``docs/_gen_config.py``) and anyone listing options: :func:`option_tables`.

Kept apart from :mod:`kontrakt._config` (the mechanism every table is declared with) because
it is the one place that knows every component's table; it imports them when asked, so
importing the mechanism loads no client. ``kontrakt._config.option_tables`` is this function.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kontrakt._config import Option

__all__ = ["option_tables"]


def _shown_default(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    name = getattr(value, "__qualname__", None)
    if name is not None:
        return f"{getattr(value, '__module__', '')}.{name}".lstrip(".")
    return repr(value)


def _rows(table: Mapping[str, Option]) -> list[dict[str, Any]]:
    from kontrakt._aliases import ALIASES, Alias

    peer: dict[str, list[str]] = {}
    for alias, entry in ALIASES.items():
        if isinstance(entry, Alias):
            peer.setdefault(entry.name, []).append(alias)
    return [
        {
            "name": opt.name,
            "type": opt.kind,
            "default": None if opt.secret else _shown_default(opt.default),
            "doc": opt.doc,
            "secret": opt.secret,
            "choices": None if opt.choices is None else [_shown_default(c)
                                                         for c in opt.choices],
            "minimum": opt.minimum,
            "maximum": opt.maximum,
            "aliases": [*opt.aliases, *peer.get(opt.name, ())],
        }
        for opt in table.values()
    ]


def option_tables() -> dict[str, list[dict[str, Any]]]:
    """Every component's options, for generating the configuration reference.

    Returns:
        ``{component: [row, ...]}`` with components ``"client"`` (what every Kafka client
        shares: connection, bootstrap, security), ``"producer"``, ``"consumer"``,
        ``"admin"``, ``"share consumer"`` (each including the ``client`` rows),
        ``"schema registry client"``,
        ``"serializer"`` and ``"deserializer"`` (every registry-bound serde), then
        ``"<format> serializer"`` / ``"<format> deserializer"`` for the formats' own
        options (``avro``, ``json``, ``protobuf``; only those whose extra is installed),
        and ``"spark"`` (the data source's own options; ``kafka.*`` and
        ``schema.registry.*`` pass the client and registry options through). Rows are in
        declaration order, each a dict with exactly these keys:

        - ``name`` (str): the property name as users write it.
        - ``type`` (str): one of ``int``, ``number``, ``bool``, ``flag`` (a Python bool),
          ``str``, ``text`` (any value, as a string), ``servers``, ``duration``,
          ``callable``, ``mapping``, ``any``.
        - ``default``: None (unset), a bool, int, float or str; a callable default is
          given as its dotted name; a secret's default is always None.
        - ``doc`` (str): what it does (may be empty).
        - ``secret`` (bool): never shown in repr, logs or errors.
        - ``choices`` (list or None): the allowed values.
        - ``minimum``, ``maximum`` (number or None): bounds.
        - ``aliases`` (list of str): other names accepted (librdkafka's, the Java
          client's, kafka-python's), not counting the snake_case keyword form.

        The shape is stable: keys are only ever added.
    """
    from kontrakt.clients.admin._admin import ADMIN_OPTIONS
    from kontrakt.clients.client import CLIENT_OPTIONS
    from kontrakt.clients.consumer._config import CONSUMER_OPTIONS
    from kontrakt.clients.producer._config import PRODUCER_OPTIONS
    from kontrakt.clients.share._config import SHARE_CONSUMER_OPTIONS
    from kontrakt.registry._config import REGISTRY_TABLE
    from kontrakt.serde._conf import DESERIALIZER_TABLE, SERIALIZER_TABLE, format_tables
    from kontrakt.spark._options import SPARK_TABLE

    out = {
        "client": _rows(CLIENT_OPTIONS),
        "producer": _rows(PRODUCER_OPTIONS),
        "consumer": _rows(CONSUMER_OPTIONS),
        "admin": _rows(ADMIN_OPTIONS),
        "share consumer": _rows(SHARE_CONSUMER_OPTIONS),
    }
    for table in (REGISTRY_TABLE, SERIALIZER_TABLE, DESERIALIZER_TABLE, *format_tables(),
                  SPARK_TABLE):
        out[table.component] = _rows(table.options)
    return out
