"""Auto commit survives a crash: a consumer killed mid-stream loses nothing (Tansu).

A group consumer with ``enable.auto.commit`` runs in a child process
(``tests/integration/_crash_child.py``); it records every record it processed before it
polls again. The child is SIGKILLed mid-stream and restarted in the same group, five times,
then a last child reads to the end. After every kill, the group's committed offsets must
cover only records the child had recorded (nothing committed ahead of processing: nothing
lost), and the records it will redo (at or after the committed offsets) must be its last
batch or records processed within a short window before the kill (the timed commit's lag):
duplicates are bounded. At the end, every record was processed.

Tansu: session.timeout.ms 1000 (see TEST-BROKERS.md), so a restarted child joins in about
a second.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kontrakt._types import TopicPartition
from kontrakt.clients.consumer import Consumer
from kontrakt.testing import TansuBroker
from tests.integration.test_groups import _fill

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

PARTITIONS, PER_PARTITION = 4, 1000
CRASHES = 5
#: Beyond the child's auto.commit.interval.ms (20 ms): the commit's round trip and a loaded
#: machine's scheduling. Records processed earlier than this before a kill must have been
#: committed (unless they were the last batch).
COMMIT_LAG_SLACK = 0.75
REPO = Path(__file__).resolve().parents[2]


def _read(path: Path) -> list[tuple[int, int, float]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) == 3:  # a line cut by the kill is not complete: not recorded
            out.append((int(parts[0]), int(parts[1]), float(parts[2])))
    return out


def _spawn(bs: str, topic: str, group: str, mode: str, out: Path) -> subprocess.Popen[bytes]:
    path = os.environ.get("PYTHONPATH")
    env = {**os.environ, "PYTHONPATH": f"{path}{os.pathsep}{REPO}" if path else str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-m", "tests.integration._crash_child", bs, topic, group, mode,
         str(out)], cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _wait_lines(proc: subprocess.Popen[bytes], out: Path, count: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while len(_read(out)) < count:
        if proc.poll() is not None:
            err = proc.stderr.read().decode() if proc.stderr else ""
            raise AssertionError(f"child exited with {proc.returncode}: {err[-2000:]}")
        assert time.monotonic() < deadline, f"child stalled at {len(_read(out))} records"
        time.sleep(0.005)  # another process's file: nothing to wait on but its size


def _kill(proc: subprocess.Popen[bytes]) -> float:
    at = time.monotonic()
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    if proc.stderr:
        proc.stderr.close()
    return at


@pytest.mark.parametrize("mode", ["getmany", "poll"])
def test_sigkilled_consumer_loses_nothing(tansu_broker: TansuBroker, topic_name: str,
                                          tmp_path: Path, mode: str) -> None:
    tansu_broker.create_topic(topic_name, PARTITIONS)
    bs = tansu_broker.bootstrap_servers
    asyncio.run(_fill(bs, topic_name, PARTITIONS, PER_PARTITION))
    group = f"g-{topic_name}"
    out = tmp_path / "processed.txt"
    everything = {(p, o) for p in range(PARTITIONS) for o in range(PER_PARTITION)}
    tps = [TopicPartition(topic_name, p) for p in range(PARTITIONS)]
    rng = random.Random(f"{topic_name}-{mode}")
    redone_per_crash: list[int] = []
    proc: subprocess.Popen[bytes] | None = None
    with Consumer(bootstrap_servers=bs, group_id=group, enable_auto_commit=False) as checker:
        try:
            for _ in range(CRASHES):
                start = len(_read(out))
                proc = _spawn(bs, topic_name, group, mode, out)
                _wait_lines(proc, out, start + rng.randint(150, 450), timeout=30)
                killed_at = _kill(proc)
                lines = _read(out)
                processed = {(p, o) for p, o, _ in lines}
                committed = checker.committed(tps, timeout=10)
                last_batch = lines[-1][2]
                redone = 0
                for tp, om in committed.items():
                    end = om.offset if om is not None else 0
                    lost = [o for o in range(end) if (tp.partition, o) not in processed]
                    assert not lost, f"committed {tp} at {end} but never processed {lost[:10]}"
                    redone += sum(1 for p, o in processed if p == tp.partition and o >= end)
                    mine = [(o, t) for p, o, t in lines[start:] if p == tp.partition]
                    stale = [o for o, t in mine if o >= end and t != last_batch
                             and t < killed_at - COMMIT_LAG_SLACK]
                    assert not stale, (f"{tp}: processed {len(stale)} records long before the "
                                       f"kill and still not committed (at {end})")
                redone_per_crash.append(redone)
            proc = _spawn(bs, topic_name, group, mode, out)
            deadline = time.monotonic() + 60
            while {(p, o) for p, o, _ in _read(out)} != everything:
                assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
                assert time.monotonic() < deadline, "the last child did not read everything"
                time.sleep(0.01)
            _kill(proc)
        finally:
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(10)
    lines = _read(out)
    assert {(p, o) for p, o, _ in lines} == everything
    duplicates = len(lines) - len(everything)
    print(f"{mode}: {CRASHES} crashes, records redone per crash {redone_per_crash}, "
          f"{duplicates} duplicates in all")
    # Every duplicate is a record redone after a kill (one processed at or after the
    # committed offset then): no rebalance delivered one twice.
    assert duplicates <= sum(redone_per_crash)
