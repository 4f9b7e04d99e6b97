"""``kontrakt transactions`` and ``kontrakt topics log-dirs`` end to end against the
in-process 3-broker Cluster, which (unlike Tansu and librdkafka's mock cluster) answers
ListTransactions, DescribeTransactions, DescribeProducers and DescribeLogDirs, and bumps a
transactional id's epoch on InitProducerId. What only a crafted broker can show (the quorum,
abort markers, refusals) is in tests/integration/test_cli_admin_ops.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from kontrakt.clients.producer import Producer
from kontrakt.errors import KafkaError
from kontrakt.testing import Cluster


def _cli(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KONTRAKT_BOOTSTRAP": cluster.bootstrap_servers}
    return subprocess.run([sys.executable, "-m", "kontrakt.cli", *args], capture_output=True,
                          text=True, env=env, timeout=90, check=False)


def test_an_open_transaction_is_listed_described_and_fenced(cluster: Cluster,
                                                            topic: str) -> None:
    # Broken variants tried: transactions list dropping --state (the committed "cli-done"
    # listed too), and fence --execute sending nothing (the producer commits).
    cluster.create_topic(topic, partitions=1, replication_factor=3)
    with Producer(bootstrap_servers=cluster.bootstrap_servers, transactional_id="cli-done") as p:
        p.init_transactions()
        p.begin_transaction()
        p.send(topic, b"x", partition=0)
        p.commit_transaction()
    with Producer(bootstrap_servers=cluster.bootstrap_servers, transactional_id="cli-tx") as p:
        p.init_transactions()
        p.begin_transaction()
        p.send(topic, b"a", partition=0)
        p.flush(10)
        listed = _cli(cluster, "transactions", "list", "--state", "Ongoing", "--json")
        assert listed.returncode == 0, listed.stderr
        [row] = json.loads(listed.stdout)
        assert (row["transactional_id"], row["state"]) == ("cli-tx", "Ongoing")
        described = json.loads(_cli(cluster, "transactions", "describe", "cli-tx",
                                    "--json").stdout)
        assert (described["state"], described["partitions"]) == ("Ongoing", [f"{topic}-0"])
        assert described["producer_id"] == row["producer_id"]
        producers = json.loads(_cli(cluster, "transactions", "producers", topic,
                                    "--json").stdout)
        open_ = [r for r in producers if r["transaction_start_offset"] is not None]
        # offset 0: cli-done's record, 1: its commit marker, 2: cli-tx's first record
        assert [(r["producer_id"], r["transaction_start_offset"]) for r in open_] == [
            (row["producer_id"], 2)]
        plan = _cli(cluster, "transactions", "fence", "cli-tx")
        assert plan.returncode == 0 and "dry run" in plan.stdout
        fenced = _cli(cluster, "transactions", "fence", "cli-tx", "--execute", "--json")
        assert fenced.returncode == 0, fenced.stderr
        [after] = json.loads(fenced.stdout)["fenced"]
        assert after["producer_epoch"] > described["producer_epoch"]
        try:
            p.commit_transaction()
        except KafkaError:
            pass
        else:
            raise AssertionError("the fenced producer committed")
    assert json.loads(_cli(cluster, "transactions", "describe", "cli-tx", "--json").stdout)[
        "state"] in ("PrepareAbort", "CompleteAbort")


def test_log_dirs_of_every_replica(cluster: Cluster, topic: str) -> None:
    # Broken variant tried: only the first replica of each partition described.
    cluster.create_topic(topic, partitions=2, replication_factor=3)
    got = _cli(cluster, "topics", "log-dirs", topic, "--json")
    assert got.returncode == 0, got.stderr
    rows = json.loads(got.stdout)
    assert sorted((r["partition"], r["broker"]) for r in rows) == [
        (p, b) for p in (0, 1) for b in (1, 2, 3)]
    assert all(r["log_dir"] == f"/kontrakt-cluster/broker-{r['broker']}"
               and r["future_log_dir"] is None for r in rows)
