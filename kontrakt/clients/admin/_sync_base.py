"""What every room of :class:`~kontrakt.clients.admin.AdminClient` builds on: the private
loop thread its :class:`~kontrakt.clients.admin.AsyncAdminClient` runs on, and the one way
a blocking call runs an async one there.
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, TypeVar

from kontrakt.clients._sync import LoopThread, ensure_started
from kontrakt.clients.admin._admin import AsyncAdminClient

__all__ = ["SyncAdminBase"]

T = TypeVar("T")


class SyncAdminBase:
    """The loop thread and the async client every blocking admin call runs on."""

    _thread: LoopThread
    _async: AsyncAdminClient

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self._thread.run(ensure_started(self._async.client, coro))
