"""The client side of incremental fetch sessions (KIP-227), one per broker."""

from __future__ import annotations

from kontrakt._types import TopicPartition

__all__ = ["FetchSession"]

_INT32_MAX = 2**31 - 1


class FetchSession:
    """Client side of an incremental fetch session (KIP-227) with one broker.

    Full requests name every partition; once the broker has created a session, later
    requests name only partitions that were added or whose fetch parameters changed, and
    list the ones dropped as forgotten.
    """

    __slots__ = ("enabled", "epoch", "parts", "session_id")

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.session_id = 0
        self.epoch = 0
        self.parts: dict[TopicPartition, tuple[int, int, int]] = {}

    def reset(self) -> None:
        """Start over with a full fetch (after an error or a lost connection)."""
        self.session_id = 0
        self.epoch = 0
        self.parts = {}

    def build(self, wanted: dict[TopicPartition, tuple[int, int, int]]
              ) -> tuple[int, int, dict[TopicPartition, tuple[int, int, int]],
                         list[TopicPartition], bool]:
        """Plan the next request.

        Args:
            wanted: partition -> (fetch offset, current leader epoch, last fetched epoch).

        Returns:
            (session id, session epoch, partitions to list, partitions to forget, is_full).
        """
        if not self.enabled:
            return 0, -1, dict(wanted), [], True
        if self.session_id == 0:
            return 0, 0, dict(wanted), [], True
        send = {tp: v for tp, v in wanted.items() if self.parts.get(tp) != v}
        forget = [tp for tp in self.parts if tp not in wanted]
        return self.session_id, self.epoch, send, forget, False

    def on_response(self, full: bool, session_id: int,
                    wanted: dict[TopicPartition, tuple[int, int, int]]) -> None:
        """Record a successful response to the request planned from ``wanted``."""
        if not self.enabled:
            return
        if full:
            self.session_id = session_id
            self.epoch = 1 if session_id else 0
        else:
            self.epoch = 1 if self.epoch >= _INT32_MAX else self.epoch + 1
        self.parts = dict(wanted) if self.session_id else {}
