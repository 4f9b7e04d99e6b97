"""Share consumer options (the network core's plus share group and fetching options)."""

from __future__ import annotations

from kontrakt._config import Option, options
from kontrakt.clients.client import CLIENT_OPTIONS

__all__ = ["SHARE_CONSUMER_OPTIONS"]

_SHARE = options(
    Option("group.id", "str", doc="the share group (required)"),
    Option("share.acknowledgement.mode", "str", "implicit", choices=("implicit", "explicit"),
           doc="implicit: every record a poll() returned is accepted at the next poll(), "
               "commit_sync(), commit_async() or close(); explicit: the application settles "
               "each record with acknowledge() (accept, release or reject), and close() "
               "releases the ones it did not settle"),
    Option("max.poll.records", "int", 500, minimum=1,
           doc="most records one poll() returns (and one ShareFetch asks a broker for)"),
    Option("fetch.min.bytes", "int", 1, minimum=1,
           doc="the broker waits (up to fetch.max.wait.ms) until this much data is ready"),
    Option("fetch.max.wait.ms", "int", 500, minimum=0,
           doc="longest time the broker holds a share fetch waiting for fetch.min.bytes"),
    Option("fetch.max.bytes", "int", 52_428_800, minimum=1,
           doc="most data one share fetch response may carry"),
    Option("check.crcs", "bool", True, doc="verify the CRC of every fetched batch"),
    Option("client.rack", "str", doc="rack id sent with heartbeats"),
)

SHARE_CONSUMER_OPTIONS: dict[str, Option] = {**CLIENT_OPTIONS, **_SHARE}
"""Every option :class:`~kontrakt.clients.share.AsyncShareConsumer` understands."""
