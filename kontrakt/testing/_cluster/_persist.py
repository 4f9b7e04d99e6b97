"""Optional persistence of a :class:`Cluster` to a folder (``Cluster(storage=DIR)``).

Layout of ``DIR``::

    LOCK                       held (flock / msvcrt) while a cluster runs on the folder
    journal.jsonl              metadata and offsets, one JSON object a line
    logs/<topic id>-<p>/<base offset, 20 digits>.log
                               the partition's segments: its stored v2 batches, each as a
                               4-byte big-endian length then the batch, append-only; a new
                               segment starts when the active one would pass the topic's
                               ``segment.bytes``, and segments wholly below the log start
                               (DeleteRecords) are deleted, as in Kafka

What is recorded where, and why:

- Partition logs hold every stored batch (data and control) with its final offsets. The
  idempotent producer state (epochs, the last five sequence ranges), the open transactions
  and the aborted-transaction index are rebuilt from the batches on start, as Kafka's log
  recovery rebuilds its producer state from the segments; they need no file of their own.
- The journal records what the logs cannot tell: the cluster id, topics (id, configs,
  leaders, replicas), deletions, log start offsets (DeleteRecords), committed group offsets
  with their metadata, the transactional ids' producer id / epoch / timeout, and the next
  producer id. On start it is replayed, then rewritten as a snapshot (so it does not grow
  across restarts).
- A crash mid-write leaves a truncated (or CRC-failing) tail in a log or a partial last line
  in the journal: recovery drops that tail and truncates the file there.
- Transactions still open when the cluster stopped are aborted on start, with the epoch
  bumped and abort markers written into their partitions, as Kafka's coordinator does when
  such a transaction times out: the last stable offset moves on, read_committed consumers
  never see the records, and the old producer instance is fenced. Offsets a transaction had
  staged (TxnOffsetCommit) are dropped with it.

Writes happen on the cluster's event loop: one unbuffered ``write`` per stored batch or
journal record (the OS page cache absorbs it), plus an ``fsync`` with ``storage_fsync=True``
(then an acknowledged produce survives a power loss, at the cost of a disk flush per write).
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import sys
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final

from kontrakt.testing._cluster._log import PartitionLog
from kontrakt.testing._cluster._state import ClusterState, Topic
from kontrakt.testing._util import StorageLockedError

if TYPE_CHECKING:
    import uuid

    from kontrakt.testing._cluster._offsets import Committed

__all__ = ["Storage"]

_LEN: Final = struct.Struct(">I")
_BASE: Final = struct.Struct(">q")
_JOURNAL: Final = "journal.jsonl"


class _PartitionFile:
    """The sink of one partition: appends its batches to its active segment file."""

    def __init__(self, storage: Storage, topic: Topic, partition: int, folder: Path,
                 segments: list[int]) -> None:
        self._storage = storage
        self._topic = topic
        self._partition = partition
        self._folder = folder
        self._segments = segments  # base offsets of the segment files, oldest first
        self._file: IO[bytes] | None = None
        self._size = -1

    def append(self, data: bytes) -> None:
        f = self._file
        if f is None and self._segments:  # a restart: carry on in the last segment
            f = self._open(self._segments[-1])
        if f is None or (self._size > 0
                         and self._size + len(data) > self._segment_bytes() > 0):
            base = _BASE.unpack_from(data)[0]
            self._segments.append(base)
            f = self._open(base)
        # One write call per batch: a crash leaves at most this batch's tail torn.
        f.write(_LEN.pack(len(data)) + data)
        self._size += _LEN.size + len(data)
        if self._storage.fsync:
            os.fsync(f.fileno())

    def _segment_bytes(self) -> int:
        try:
            return int(self._topic.config("segment.bytes"))
        except ValueError:
            return 0

    def _open(self, base_offset: int) -> IO[bytes]:
        """Make the segment at ``base_offset`` the active one (created on the first batch
        it takes, so no segment is ever empty)."""
        if self._file is not None:
            self._file.close()
        self._folder.mkdir(parents=True, exist_ok=True)
        path = self._folder / _segment_name(base_offset)
        f = self._file = open(path, "ab", buffering=0)  # noqa: SIM115 (kept open)
        self._size = f.seek(0, os.SEEK_END)
        return f

    def log_start(self, offset: int) -> None:
        self._storage.write({"t": "start", "id": self._topic.topic_id.hex,
                             "p": self._partition, "offset": offset})
        # A segment is wholly below the log start when the next one starts at or below it.
        while len(self._segments) > 1 and self._segments[1] <= offset:
            (self._folder / _segment_name(self._segments.pop(0))).unlink(missing_ok=True)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


class Storage:
    """A cluster's folder: the lock, the journal and the partition files.

    Args:
        path: the folder (created when missing).
        fsync: fsync after every write.

    Raises:
        StorageLockedError: another running cluster holds the folder.
        OSError: the folder cannot be created or written.
    """

    def __init__(self, path: str | os.PathLike[str], *, fsync: bool = False) -> None:
        self.path = Path(path)
        self.fsync = fsync
        self.path.mkdir(parents=True, exist_ok=True)
        self._lock = open(self.path / "LOCK", "a+b")  # noqa: SIM115 (held while running)
        try:
            _lock(self._lock)
        except OSError:
            self._lock.close()
            raise StorageLockedError(
                f"the storage folder {str(self.path)!r} is in use by another running "
                "Cluster (its LOCK file is held); close that cluster first or use another "
                "folder", path=str(self.path)) from None
        self._journal: IO[bytes] | None = None
        self._files: dict[tuple[uuid.UUID, int], _PartitionFile] = {}
        self._segments: dict[tuple[uuid.UUID, int], list[int]] = {}  # found on recovery
        #: bytes dropped from torn tails during recovery, per file name (for tests and logs)
        self.dropped: dict[str, int] = {}

    # --- writing ----------------------------------------------------------------------------
    def write(self, record: dict[str, Any]) -> None:
        """Append one journal record."""
        if self._journal is None:
            return
        self._journal.write(json.dumps(record, separators=(",", ":")).encode() + b"\n")
        if self.fsync:
            os.fsync(self._journal.fileno())

    def topic(self, topic: Topic) -> None:
        """Record a topic (created, grown, reconfigured, leader moved); attach its sinks."""
        self.write(_topic_record(topic))
        self._attach(topic)

    def topic_deleted(self, topic: Topic) -> None:
        """Record a deletion and remove the topic's files."""
        self.write({"t": "deltopic", "id": topic.topic_id.hex})
        for p, log in enumerate(topic.partitions):
            log.sink = None
            f = self._files.pop((topic.topic_id, p), None)
            if f is not None:
                f.close()
            self._segments.pop((topic.topic_id, p), None)
            shutil.rmtree(self._partition_dir(topic.topic_id, p), ignore_errors=True)

    def offset(self, group_id: str, tp: tuple[str, int], committed: Committed | None) -> None:
        """Record a committed offset (None: deleted)."""
        rec: dict[str, Any] = {"t": "offset", "g": group_id, "topic": tp[0], "p": tp[1]}
        if committed is not None:
            rec.update(o=committed.offset, e=committed.leader_epoch, m=committed.metadata,
                       ts=committed.commit_time_ms)
        self.write(rec)

    def group_deleted(self, group_id: str) -> None:
        """Record a DeleteGroups."""
        self.write({"t": "delgroup", "g": group_id})

    def txn(self, tid: str, producer_id: int, epoch: int, timeout_ms: int) -> None:
        """Record a transactional id's producer id, epoch and timeout."""
        self.write({"t": "txn", "tid": tid, "pid": producer_id, "epoch": epoch,
                    "timeout": timeout_ms})

    def next_producer_id(self, last: int) -> None:
        """Record the last producer id handed out."""
        self.write({"t": "pid", "last": last})

    def close(self) -> None:
        """Close every file and release the lock (idempotent)."""
        for f in self._files.values():
            f.close()
        self._files.clear()
        if self._journal is not None:
            self._journal.close()
            self._journal = None
        if not self._lock.closed:
            _unlock(self._lock)
            self._lock.close()

    # --- recovery ---------------------------------------------------------------------------
    def recover(self, state: ClusterState, cluster_id: str, *, explicit_id: bool) -> None:
        """Rebuild ``state`` from the folder, then start recording into it.

        Args:
            state: a fresh state (no topics); its coordinators must exist.
            cluster_id: the id to use for a new folder.
            explicit_id: the caller chose ``cluster_id``; it must then match a stored one.

        Raises:
            InvalidArgumentError: ``cluster_id`` differs from the folder's, or the folder's
                topics have replicas on brokers this cluster lacks.
        """
        from kontrakt.errors import InvalidArgumentError
        from kontrakt.testing._cluster._offsets import Committed

        records = self._read_journal()
        stored_id = cluster_id
        topics: dict[str, dict[str, Any]] = {}
        starts: dict[tuple[str, int], int] = {}
        offsets: dict[str, dict[tuple[str, int], Committed]] = {}
        txns: dict[str, tuple[int, int, int]] = {}
        last_pid = 0
        for rec in records:
            kind = rec.get("t")
            if kind == "cluster":
                stored_id = rec["id"]
            elif kind == "topic":
                topics[rec["id"]] = rec
            elif kind == "deltopic":
                topics.pop(rec["id"], None)
            elif kind == "start":
                starts[(rec["id"], rec["p"])] = rec["offset"]
            elif kind == "offset":
                group = offsets.setdefault(rec["g"], {})
                tp = (rec["topic"], rec["p"])
                if "o" in rec:
                    group[tp] = Committed(rec["o"], rec["e"], rec["m"], rec["ts"])
                else:
                    group.pop(tp, None)
            elif kind == "delgroup":
                offsets.pop(rec["g"], None)
            elif kind == "txn":
                txns[rec["tid"]] = (rec["pid"], rec["epoch"], rec["timeout"])
            elif kind == "pid":
                last_pid = max(last_pid, rec["last"])
        if records and explicit_id and stored_id != cluster_id:
            raise InvalidArgumentError(
                f"cluster_id {cluster_id!r} differs from {stored_id!r} stored in {self.path}")
        state.cluster_id = stored_id

        for rec in topics.values():
            topic = _topic_from(rec)
            missing = {b for r in topic.replicas for b in r} - set(state.brokers)
            if missing:
                raise InvalidArgumentError(
                    f"topic {topic.name!r} in {self.path} has replicas on broker(s) "
                    f"{sorted(missing)}, which a cluster of {len(state.brokers)} broker(s) "
                    f"lacks; open it with num_brokers={max(missing)} or more")
            for p, log in enumerate(topic.partitions):
                last_pid = max(last_pid, self._load(topic.topic_id, p, log))
                start = starts.get((rec["id"], p))
                if start is not None:
                    log.delete_records(start)
            state.topics[topic.name] = topic
            state.topics_by_id[topic.topic_id] = topic
        for gid, committed in offsets.items():
            group = state.groups.groups.get(gid) or state.groups._new_group(gid)
            group.offsets.update(committed)
        for tid, (pid, epoch, timeout) in txns.items():
            state.txns.restore(tid, pid, epoch, timeout)
            last_pid = max(last_pid, pid)
        state.restore_producer_id(last_pid)

        self._compact(state)
        state.persist = self
        for topic in state.topics.values():
            self._attach(topic)
        # Transactions cut by the stop: abort them now (see the module docstring).
        state.txns.abort_recovered()

    def _read_journal(self) -> list[dict[str, Any]]:
        path = self.path / _JOURNAL
        if not path.exists():
            return []
        raw = path.read_bytes()
        out: list[dict[str, Any]] = []
        pos = 0
        while pos < len(raw):
            end = raw.find(b"\n", pos)
            if end < 0:
                break
            try:
                out.append(json.loads(raw[pos:end]))
            except ValueError:
                break
            pos = end + 1
        if pos < len(raw):
            self.dropped[_JOURNAL] = len(raw) - pos
        return out

    def _load(self, topic_id: uuid.UUID, partition: int, log: PartitionLog) -> int:
        """Read a partition's segments into ``log``, truncating a torn tail (and deleting
        any segment after it, as Kafka's recovery does).

        Returns:
            The largest producer id seen in the log (-1 for none).
        """
        folder = self._partition_dir(topic_id, partition)
        paths = sorted(folder.glob("*.log")) if folder.is_dir() else []
        segments: list[int] = []
        top = -1
        for i, path in enumerate(paths):
            raw = path.read_bytes()
            pos = 0
            while pos + _LEN.size <= len(raw):
                (n,) = _LEN.unpack_from(raw, pos)
                end = pos + _LEN.size + n
                if end > len(raw):
                    break
                try:
                    log.restore(raw[pos + _LEN.size:end])
                except ValueError:
                    break
                top = max(top, log.batches[-1].producer_id)
                pos = end
            if pos == 0:
                path.unlink()  # nothing readable: the segment never took a whole batch
            else:
                segments.append(int(path.stem))
            if pos < len(raw):
                self.dropped[str(path.relative_to(self.path))] = len(raw) - pos
                if pos:
                    with open(path, "r+b") as f:
                        f.truncate(pos)
                for later in paths[i + 1:]:
                    self.dropped[str(later.relative_to(self.path))] = later.stat().st_size
                    later.unlink()
                break
        self._segments[(topic_id, partition)] = segments
        return top

    def _compact(self, state: ClusterState) -> None:
        """Replace the journal with a snapshot of ``state`` and open it for appending."""
        path = self.path / _JOURNAL
        tmp = path.with_suffix(".tmp")
        lines = [{"t": "cluster", "id": state.cluster_id},
                 {"t": "pid", "last": state.last_producer_id()}]
        for topic in state.topics.values():
            lines.append(_topic_record(topic))
            for p, log in enumerate(topic.partitions):
                if log.log_start_offset:
                    lines.append({"t": "start", "id": topic.topic_id.hex, "p": p,
                                  "offset": log.log_start_offset})
        for tid, (pid, epoch, timeout) in state.txns.snapshot().items():
            lines.append({"t": "txn", "tid": tid, "pid": pid, "epoch": epoch,
                          "timeout": timeout})
        for gid, group in state.groups.groups.items():
            for (name, p), c in group.offsets.items():
                lines.append({"t": "offset", "g": gid, "topic": name, "p": p, "o": c.offset,
                              "e": c.leader_epoch, "m": c.metadata, "ts": c.commit_time_ms})
        with open(tmp, "wb") as f:
            f.write(b"".join(json.dumps(rec, separators=(",", ":")).encode() + b"\n"
                             for rec in lines))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        self._journal = open(path, "ab", buffering=0)  # noqa: SIM115 (kept open)

    def _partition_dir(self, topic_id: uuid.UUID, partition: int) -> Path:
        return self.path / "logs" / f"{topic_id.hex}-{partition}"

    def _attach(self, topic: Topic) -> None:
        for p, log in enumerate(topic.partitions):
            if log.sink is None:
                f = _PartitionFile(self, topic, p, self._partition_dir(topic.topic_id, p),
                                   self._segments.pop((topic.topic_id, p), []))
                self._files[(topic.topic_id, p)] = f
                log.sink = f


def _segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}.log"


def _topic_record(topic: Topic) -> dict[str, Any]:
    return {"t": "topic", "name": topic.name, "id": topic.topic_id.hex,
            "leaders": topic.leaders, "replicas": topic.replicas, "configs": topic.configs}


def _topic_from(rec: dict[str, Any]) -> Topic:
    import uuid

    leaders = [int(x) for x in rec["leaders"]]
    return Topic(rec["name"], uuid.UUID(hex=rec["id"]), [PartitionLog() for _ in leaders],
                 leaders, [list(r) for r in rec["replicas"]], dict(rec["configs"]))


if sys.platform == "win32":  # pragma: no cover (exercised on Windows only)
    import msvcrt

    def _lock(f: IO[bytes]) -> None:
        f.seek(0)
        msvcrt.locking(f.fileno(), msvcrt.LK_NBLCK, 1)

    def _unlock(f: IO[bytes]) -> None:
        f.seek(0)
        msvcrt.locking(f.fileno(), msvcrt.LK_UNLCK, 1)
else:
    import fcntl

    # flock locks belong to the open file, so a second Cluster in the same process is
    # refused too (POSIX record locks would not see it).
    def _lock(f: IO[bytes]) -> None:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)

    def _unlock(f: IO[bytes]) -> None:
        fcntl.flock(f.fileno(), fcntl.LOCK_UN)
