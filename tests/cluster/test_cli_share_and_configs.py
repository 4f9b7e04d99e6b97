"""``kontrakt configs describe`` end to end against the in-process 3-broker Cluster, which
(unlike Tansu, which reports every config as a default) tells a topic's own configs
(DYNAMIC_TOPIC_CONFIG) from the broker-level and default ones, and describes a broker's
static configs as read-only. What only a crafted broker can show (sensitive values, the
share groups, the voters, list-resources) is in
tests/integration/test_cli_share_and_configs.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from kontrakt.testing import Cluster


def _cli(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KONTRAKT_BOOTSTRAP": cluster.bootstrap_servers}
    return subprocess.run([sys.executable, "-m", "kontrakt.cli", *args], capture_output=True,
                          text=True, env=env, timeout=90, check=False)


def test_configs_describe_a_topics_own_configs_then_all_and_a_brokers(cluster: Cluster,
                                                                       topic: str) -> None:
    # Broken variants tried: own configs picked by "not a default" (the broker-level
    # ones listed without --all), and --all ignored.
    cluster.create_topic(topic, partitions=1, replication_factor=3,
                         config={"retention.ms": "60000", "cleanup.policy": "compact"})
    own = _cli(cluster, "configs", "describe", "topic", topic)
    assert own.returncode == 0, own.stderr
    assert own.stdout.splitlines() == ["cleanup.policy=compact  DYNAMIC_TOPIC_CONFIG",
                                       "retention.ms=60000  DYNAMIC_TOPIC_CONFIG"]
    every = json.loads(_cli(cluster, "configs", "describe", "topic", topic, "--all",
                            "--json").stdout)
    rows = {r["key"]: r for r in every["configs"]}
    assert len(rows) > 2 and rows["retention.ms"]["value"] == "60000"
    assert {r["source"] for r in rows.values()} - {"DYNAMIC_TOPIC_CONFIG"}
    assert not any(r["read_only"] or r["sensitive"] for r in rows.values())
    # a broker's static configs: none set at the broker itself, all read-only with --all
    broker = _cli(cluster, "configs", "describe", "broker", "1")
    assert broker.returncode == 0, broker.stderr
    assert broker.stdout.splitlines() == [
        "broker 1 has no configs of its own (--all shows every config)"]
    static = json.loads(_cli(cluster, "configs", "describe", "broker", "1", "--all",
                             "--json").stdout)["configs"]
    assert static and all(r["read_only"] and r["source"] == "STATIC_BROKER_CONFIG"
                          for r in static)
    missing = _cli(cluster, "configs", "describe", "topic", topic + "-nope")
    assert missing.returncode == 2 and "UNKNOWN_TOPIC_OR_PARTITION" in missing.stderr, \
        missing.stderr
