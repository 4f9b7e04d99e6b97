"""Clients nobody closes (issue 20, item 6), against Tansu.

A sync client the application drops without ``close()`` must not leave its I/O thread,
sockets and group membership behind; records a producer still buffers when the interpreter
exits must be delivered, or reported as lost on stderr, never dropped without a word.
Interpreter exit is checked in child processes (each bounded by a timeout and killed by pid
on expiry); what they produced is read back raw through ``request()``.
"""

from __future__ import annotations

import asyncio
import gc
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable

import pytest

from kontrakt.clients import AsyncKafkaClient
from kontrakt.clients.admin import AdminClient
from kontrakt.clients.consumer import Consumer
from kontrakt.clients.producer import Producer
from kontrakt.testing import TansuBroker
from tests.integration.raw_ops import fetch

pytestmark = [pytest.mark.integration, pytest.mark.also_on_cluster]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def _wait_for(cond: Callable[[], bool], timeout: float) -> bool:
    """Poll ``cond`` (collecting garbage each time) until true or ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        gc.collect()
        if cond():
            return True
        time.sleep(0.02)
    return cond()


def _count(bootstrap: str, topic: str) -> int:
    """Records in partition 0 of ``topic`` (read back raw, bounded)."""

    async def main() -> int:
        n = 0
        async with AsyncKafkaClient(bootstrap_servers=bootstrap) as client:
            for _ in range(50):
                part, records = await fetch(client, topic, 0, n)
                assert part.error_code == 0, part
                n += len(records)
                if not records or n >= part.high_watermark:
                    break
        return n

    return asyncio.run(main())


def _run_child(code: str, timeout: float, stdin: str | None = None
               ) -> tuple[subprocess.CompletedProcess[str], float]:
    env = {**os.environ, "PYTHONPATH": ROOT}
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], env=env, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        out, err = proc.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"child still running after {timeout}s; stderr: {err[-2000:]}")
    return (subprocess.CompletedProcess(proc.args, proc.returncode, out, err),
            time.monotonic() - start)


def test_dropped_producer_stops_its_thread_and_closes_its_sockets(
        tansu_broker: TansuBroker, topic_name: str) -> None:
    tansu_broker.create_topic(topic_name, 1)
    gc.collect()
    threads_before = set(threading.enumerate())
    fds_before = _fds()
    p = Producer(bootstrap_servers=tansu_broker.bootstrap_servers, linger_ms=0)
    p.send_and_wait(topic_name, b"v", key=b"k")
    p.produce(topic_name, b"w", key=b"k", on_delivery=lambda err, md: None)
    p.flush(5)
    assert set(threading.enumerate()) - threads_before, "the producer has an I/O thread"
    assert _fds() - fds_before, "the producer holds sockets"
    del p
    assert _wait_for(lambda: not (set(threading.enumerate()) - threads_before), 10), \
        "the dropped producer's I/O thread is still running"
    assert _wait_for(lambda: not (_fds() - fds_before), 5), \
        f"the dropped producer left fds open: {_fds() - fds_before}"


def test_dropped_admin_client_stops_its_thread(tansu_broker: TansuBroker) -> None:
    gc.collect()
    threads_before = set(threading.enumerate())
    fds_before = _fds()
    admin = AdminClient(bootstrap_servers=tansu_broker.bootstrap_servers)
    admin.list_topics()
    del admin
    assert _wait_for(lambda: not (set(threading.enumerate()) - threads_before), 10)
    assert _wait_for(lambda: not (_fds() - fds_before), 5), _fds() - fds_before


def test_producer_left_open_at_exit_delivers_what_it_buffered(
        tansu_broker: TansuBroker, topic_name: str) -> None:
    tansu_broker.create_topic(topic_name, 1)
    # linger.ms holds the records in the buffer far beyond the child's life: only the exit
    # path can send them.
    done, took = _run_child(f"""
        from kontrakt.clients.producer import Producer
        p = Producer(bootstrap_servers={tansu_broker.bootstrap_servers!r}, linger_ms=60000)
        for i in range(200):
            p.send({topic_name!r}, b"value-%d" % i, partition=0)
        print(len(p))
        """, timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "200", "the records were buffered when the child exited"
    assert _count(tansu_broker.bootstrap_servers, topic_name) == 200
    assert took < 15, took


def test_producer_left_open_at_exit_with_broker_gone_warns_how_many_were_lost(
        tansu_broker_factory: Callable[..., TansuBroker], topic_name: str) -> None:
    broker = tansu_broker_factory()
    broker.create_topic(topic_name, 1)
    # The child starts (metadata known), waits while the parent stops the broker, then
    # buffers 200 records that cannot go anywhere, and exits without close or flush.
    code = f"""
        import sys
        from kontrakt.clients.producer import Producer
        p = Producer(bootstrap_servers={broker.bootstrap_servers!r}, linger_ms=60000,
                     reconnect_backoff_ms=20, reconnect_backoff_max_ms=100)
        p.partitions_for({topic_name!r})
        print("ready", flush=True)
        sys.stdin.readline()
        for i in range(200):
            p.send({topic_name!r}, b"value-%d" % i, partition=0)
        """
    env = {**os.environ, "PYTHONPATH": ROOT}
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], env=env, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdin is not None
        assert proc.stdout.readline().strip() == "ready"
        broker.stop()
        start = time.monotonic()
        proc.stdin.write("go\n")
        proc.stdin.flush()
        _, err = proc.communicate(timeout=30)
        took = time.monotonic() - start
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert "200 record(s)" in err and "not delivered" in err, err[-3000:]
    assert took < 12, took  # UNCLOSED_CLOSE_TIMEOUT (5 s) and the child's start-up


def test_dropped_group_consumer_leaves_the_group(tansu_broker: TansuBroker,
                                                 topic_name: str) -> None:
    tansu_broker.create_topic(topic_name, 2)
    group = f"g-{topic_name}"
    # A session timeout far longer than the wait below: only a LeaveGroup explains a quick
    # departure (Tansu holds the JoinGroup for about half of it, so joining takes ~3 s).
    c = Consumer(bootstrap_servers=tansu_broker.bootstrap_servers, group_id=group,
                 session_timeout_ms=6000, heartbeat_interval_ms=200,
                 max_poll_interval_ms=300_000)
    c.subscribe([topic_name])
    deadline = time.monotonic() + 20
    while not c.assignment() and time.monotonic() < deadline:
        c.poll(0.1)
    assert len(c.assignment()) == 2
    with AdminClient(bootstrap_servers=tansu_broker.bootstrap_servers) as admin:
        assert admin.describe_consumer_groups([group])[group].members
        del c
        start = time.monotonic()
        assert _wait_for(
            lambda: not admin.describe_consumer_groups([group])[group].members, 3.0), \
            "the dropped consumer is still a member of its group"
        assert time.monotonic() - start < 3.0
