"""A sync producer's caller threads and its I/O thread: the waker and the hand-over.

The sync :class:`~kontrakt.Producer` appends records on its callers' threads; the sender
runs on the producer's event-loop thread. :class:`HandOver`, made and owned by the sync
Producer and given to its AsyncProducer core (``AsyncProducer.bind_caller_threads``), is all
that the two threads share beyond the accumulator's lock:

- the waker: callers wake the sender through an eventfd of its own (``wake``), read by the
  loop after the pass it runs for it;
- the hand-over: a caller whose records filled a batch wakes the sender and waits, briefly,
  for the pass to make its last request (``hand_over``), compressing some closed batches
  meanwhile (``RecordAccumulator.claim_closed`` / ``help``, gzip and zstd).

An AsyncProducer has none: its callers are on the loop thread.
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kontrakt.clients.producer._sender import Sender

__all__ = ["HAND_OVER_WAIT", "HandOver"]

#: the longest a sync producer's caller waits for the sender's pass (HandOver.hand_over)
HAND_OVER_WAIT = 0.002


class HandOver:
    """The threaded machinery of one sync producer (see the module docstring).

    Attached to the producer's sender once it starts (:meth:`attach`, on the loop thread);
    until then, and after it stops, wake-ups and hand-overs do nothing.
    """

    def __init__(self) -> None:
        self.sender: Sender | None = None
        #: an eventfd callers wake the sender for a pass with (see attach)
        self._efd: int | None = None
        #: set after each send pass run for hand_over()
        self._passed = threading.Event()
        #: a hand_over caller waits for this pass (see last_write)
        self._handing = False

    def attach(self, sender: Sender) -> None:
        """Serve ``sender`` (called on its loop's thread as it starts)."""
        self.sender = sender
        sender.handover = self
        if hasattr(os, "eventfd"):
            # Callers on other threads wake the sender by an eventfd of its own rather than
            # call_soon_threadsafe: no handle per wake-up, and after the pass the loop reads
            # one counter instead of draining its self-pipe (two reads, ~13 us of the I/O
            # thread's time after each write, competing with the broker for the CPUs).
            # Closed once the sender is gone: a thread that can still write to it holds it.
            efd = self._efd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
            weakref.finalize(sender, os.close, efd)
            sender.loop.add_reader(efd, self._woken, efd)

    def detach(self) -> None:
        """Stop serving the sender (called on the loop thread as it stops)."""
        sender = self.sender
        if sender is not None and self._efd is not None:
            sender.loop.remove_reader(self._efd)

    def wake(self) -> bool:
        """Wake the sender for a pass from a caller thread; False when there is no eventfd
        (the caller then schedules the pass on the loop)."""
        efd = self._efd
        if efd is None:
            return False
        os.eventfd_write(efd, 1)
        return True

    def _woken(self, efd: int) -> None:
        sender = self.sender
        assert sender is not None
        # The waker waits for this pass: it runs before the counter is read. A wake-up that
        # came in meanwhile shows in the count and gets a pass of its own.
        sender.kick()
        try:
            count = os.eventfd_read(efd)
        except BlockingIOError:
            return
        if count > 1:
            sender.kick()

    def hand_over(self, timeout: float = HAND_OVER_WAIT) -> None:
        """Wake the sender for a pass and wait, at most ``timeout`` seconds, until it made
        its last request (or ended): for the caller threads of a sync producer whose records
        filled a batch.

        A thread busy sending records keeps the GIL, and the loop thread would get it
        back only at the interpreter's switch interval (5 ms), one step of a pass at a time:
        requests would go out late, mostly during flush(), and the broker would idle
        meanwhile. Waiting here lets the pass run at once, while the broker works in
        parallel; the last request's socket write overlaps the caller's next records. With
        gzip or zstd the caller compresses some of the batches meanwhile, in parallel with
        the pass (RecordAccumulator.claim_closed). On the loop thread this is a wake-up.
        """
        sender = self.sender
        if sender is None:
            return
        if sender.on_loop_thread():
            sender.wake(True)
            return
        passed = self._passed
        passed.clear()
        self._handing = True
        try:
            sender.loop.call_soon_threadsafe(self._kick_and_tell)
        except RuntimeError:  # the loop is closed: nothing left to wake
            return
        # Claimed after the wake-up: a batch the pass took meanwhile is sealed, not claimed.
        acc = sender.acc
        claimed = acc.claim_closed()
        if claimed:
            acc.help(claimed)
        passed.wait(timeout)

    def _kick_and_tell(self) -> None:
        try:
            sender = self.sender
            if sender is not None:
                sender.kick()
        finally:
            self._handing = False
            self._passed.set()

    def last_write(self) -> None:
        """The sender made its pass's last request: a caller waiting in hand_over goes on
        now, its Python overlapping the socket write (a syscall without the GIL). Earlier
        would make the pass's remaining requests wait for the GIL."""
        if self._handing:
            self._handing = False
            self._passed.set()
