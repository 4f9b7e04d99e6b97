"""Spark drivers of their own (tests/spark/stream_driver.py), killed and restarted: what a
streaming query promises across crashes, against Tansu.

Each driver runs in its own session (process group) and is stopped by killing that group
by its id, so the JVM and Python workers go with it, as when a machine dies. A JVM costs
seconds to start: this module starts five.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="needs the spark extra")

from kontrakt.clients.producer import Producer
from kontrakt.testing import TansuBroker
from tests.spark.eos_log import read_log

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
PARTITIONS = 2


@contextlib.contextmanager
def _driver(mode: str, args: dict[str, Any], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A driver process in a session of its own; its whole process group is killed (by
    its id) when the block ends, whether it finished or not."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
           "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.spark.stream_driver", mode, json.dumps(args)],
            cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield proc
    finally:
        # PySpark's worker daemons put themselves in process groups of their own: they are
        # found by walking the tree down from the driver before anything is killed.
        family = _descendants(proc.pid)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        for pid in family:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        proc.wait(30)


def _descendants(root: int) -> list[int]:
    """The pids of every process below ``root`` (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # gone meanwhile
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found: list[int] = []
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _await(condition: Callable[[], bool], proc: subprocess.Popen[bytes], what: str,
           log: Path, timeout: float = 180.0) -> None:
    """Poll ``condition`` (every 20 ms) until it holds; fail if the driver exits first or
    it takes longer than ``timeout``."""
    deadline = time.monotonic() + timeout
    while not condition():
        if proc.poll() is not None:
            raise AssertionError(f"the driver exited ({proc.returncode}) before {what}:\n"
                                 f"{log.read_text()[-3000:]}")
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} within {timeout} s:\n{log.read_text()[-3000:]}")
        time.sleep(0.02)


def _batch_ids(directory: Path) -> set[int]:
    """The micro-batch ids a checkpoint log (offsets/ or commits/) holds."""
    if not directory.is_dir():
        return set()
    return {int(p.name) for p in directory.iterdir() if p.name.isdigit()}


def _part_files(out: Path) -> set[str]:
    return {p.name for p in out.glob("part-*")} if out.is_dir() else set()


class _Feeder(threading.Thread):
    """Produces records round-robin to the topic's partitions, ~100 a second, until stopped
    or at ``limit`` records (which bounds the last run's work); ``counts`` is how many each
    partition got (all acknowledged)."""

    def __init__(self, bootstrap: str, topic: str, limit: int = 6000) -> None:
        super().__init__(daemon=True)
        self.limit = limit
        self.bootstrap = bootstrap
        self.topic = topic
        self.stop_event = threading.Event()
        self.counts = [0] * PARTITIONS
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5}) as p:
                seq = 0
                while seq < self.limit and not self.stop_event.wait(0.05):
                    futures = []
                    for _ in range(5):
                        part = seq % PARTITIONS
                        futures.append(p.send(self.topic, b"%d" % seq, partition=part))
                        self.counts[part] += 1
                        seq += 1
                    p.flush(10)
                    for f in futures:
                        f.result(0)
        except BaseException as exc:  # reported by the test
            self.error = exc

    def stop(self) -> list[int]:
        self.stop_event.set()
        self.join(30)
        assert not self.is_alive() and self.error is None, self.error
        return self.counts


def test_available_now_killed_three_times_writes_every_record_once(
        tansu_broker: TansuBroker, topic_name: str, tmp_path: Path) -> None:
    """A ``trigger(availableNow=True)`` query into parquet, with a checkpoint, killed mid-run
    three times (a micro-batch just planned; a parquet file written; a micro-batch just
    committed) while a producer keeps adding records, then run to the end: Spark's
    parquet table holds every record exactly once."""
    tansu_broker.create_topic(topic_name, PARTITIONS)
    cp, out, log = tmp_path / "cp", tmp_path / "out", tmp_path / "driver.log"
    args = {"bootstrap": tansu_broker.bootstrap_servers, "topic": topic_name,
            "checkpoint": str(cp), "out": str(out), "max_offsets": 100}
    feeder = _Feeder(tansu_broker.bootstrap_servers, topic_name)
    feeder.start()
    try:
        kill_points: list[tuple[str, Callable[[set[int], set[int], set[str]], bool]]] = [
            ("a new micro-batch planned",
             lambda offsets, commits, files: bool(_batch_ids(cp / "offsets") - offsets)),
            ("a new parquet file",
             lambda offsets, commits, files: bool(_part_files(out) - files)),
            ("a new micro-batch committed",
             lambda offsets, commits, files: bool(_batch_ids(cp / "commits") - commits)),
        ]
        for what, point in kill_points:
            seen = (_batch_ids(cp / "offsets"), _batch_ids(cp / "commits"), _part_files(out))
            with _driver("parquet", args, log) as proc:
                _await(lambda p=point, s=seen: p(*s), proc, what, log)
            assert proc.returncode == -signal.SIGKILL
    finally:
        counts = feeder.stop()
    assert _batch_ids(cp / "commits"), "no micro-batch was committed before the last run"
    result = tmp_path / "result.json"
    with _driver("parquet", {**args, "max_offsets": None, "result": str(result)}, log) as proc:
        _await(lambda: proc.poll() is not None, proc, "the end", log)
    assert proc.returncode == 0, log.read_text()[-3000:]
    rows = sorted(tuple(r) for r in json.loads(result.read_text()))
    assert len(rows) == sum(counts)
    assert rows == sorted((p, o) for p in range(PARTITIONS) for o in range(counts[p]))


def test_exactly_once_sink_with_a_task_that_crashes_once(
        tansu_broker: TansuBroker, topic_name: str, tmp_path: Path) -> None:
    """The exactly-once ``kontrakt`` sink on ``local[2,2]``: partition 0's first attempt
    writes its share and kills its own Python worker; Spark retries the task, whose
    transaction fences and aborts the first one. Nothing is duplicated for a read_committed
    consumer.

    Broker: Tansu (faithful for fencing, markers and offsets in transactions); Tansu does
    not report aborted transactions in Fetch responses, so the read_committed view is
    computed from the log's markers (eos_log.py), as a consumer does against Kafka."""
    source, target = topic_name, f"{topic_name}-out"
    tansu_broker.create_topic(source, PARTITIONS)
    tansu_broker.create_topic(target, 1)
    values = [b"p%d-%d" % (i % PARTITIONS, i) for i in range(200)]
    with Producer({"bootstrap.servers": tansu_broker.bootstrap_servers}) as p:
        for i, v in enumerate(values):
            p.send(source, v, partition=i % PARTITIONS)
        p.flush(10)
    log = tmp_path / "driver.log"
    args = {"bootstrap": tansu_broker.bootstrap_servers, "topic": source, "target": target,
            "checkpoint": str(tmp_path / "cp")}
    with _driver("eos", args, log) as proc:
        _await(lambda: proc.poll() is not None, proc, "the end", log)
    assert proc.returncode == 0, log.read_text()[-3000:]
    view = read_log(tansu_broker.bootstrap_servers, target)
    assert sorted(view.committed) == sorted(values)
    # The first attempt did write its share before it died: that is what was aborted.
    assert sorted(view.aborted) == sorted(v for v in values if v.startswith(b"p0-"))
    assert view.open == []
