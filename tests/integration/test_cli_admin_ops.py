"""``kontrakt cluster quorum|unregister-broker``, ``transactions ...``, ``groups list
--type``, ``configs reset``, ``topics log-dirs|move-replica`` and ``topics describe --elr``
run as subprocesses against a crafted broker (``tests/_crafted_broker.py``).

Tansu 0.6.0 answers none of DescribeQuorum, WriteTxnMarkers, DescribeProducers,
UnregisterBroker or AlterReplicaLogDirs, ignores ListGroups' filters and describes every
config as a default (see the admin tests' docstrings); and only a crafted peer can show a
non-empty ELR or a refusal on demand. So these commands are checked against a peer whose
answers the test chooses: the text and ``--json`` output, what is sent (nothing on a dry
run), and the exit codes for bad input (2, nothing sent) and for refused operations (2,
with the broker's error). The in-process Cluster runs transactions and log-dirs end to end
in tests/cluster/test_cli_admin_ops.py.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from dataclasses import dataclass
from typing import Any

import pytest

from kontrakt.cli._admin import _GROUP_STATES, _GROUP_TYPES
from kontrakt.clients.admin import ConsumerGroupState, ConsumerGroupType
from kontrakt.protocol.messages import ListGroupsResponse
from tests._crafted_broker import CraftedBroker, ServedOffsets
from tests.unit.admin.test_admin_abort_transaction import Markers
from tests.unit.admin.test_admin_describe_topic_partitions import Paging
from tests.unit.admin.test_admin_fence_producers import Coordinator
from tests.unit.admin.test_admin_hanging_transactions import Cluster
from tests.unit.admin.test_admin_quorum import Quorum
from tests.unit.admin.test_admin_replica_log_dirs import Dirs, LogDirs
from tests.unit.admin.test_admin_reset_configs import Peer
from tests.unit.admin.test_admin_unregister_broker import Controller

pytestmark = pytest.mark.integration

DESCRIBE_QUORUM, WRITE_TXN_MARKERS, INIT_PRODUCER_ID, LIST_GROUPS = 55, 27, 22, 16
CLUSTER_AUTHORIZATION_FAILED, INVALID_PRODUCER_EPOCH = 31, 47
TRANSACTIONAL_ID_AUTHORIZATION_FAILED, POLICY_VIOLATION = 53, 44
UNREGISTER_BROKER, BROKER_ID_NOT_REGISTERED = 64, 102
DESCRIBE_LOG_DIRS, ALTER_REPLICA_LOG_DIRS, LOG_DIR_NOT_FOUND = 35, 34, 57
DESCRIBE_TOPIC_PARTITIONS, LIST_OFFSETS, DESCRIBE_CONFIGS = 75, 2, 32


@dataclass
class Done:
    returncode: int
    stdout: str
    stderr: str


def _run(broker: CraftedBroker, *commands: list[str]) -> list[Done]:
    """Each command run in turn as ``python -m kontrakt.cli`` against ``broker``."""
    async def main() -> list[Done]:
        out = []
        async with broker:
            env = {**os.environ, "KONTRAKT_BOOTSTRAP": broker.bootstrap}
            for args in commands:
                proc = await asyncio.create_subprocess_exec(
                    sys.executable, "-m", "kontrakt.cli", *args, "-X", "retry.backoff.ms=10",
                    "-X", "default.api.timeout.ms=5000", env=env,
                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
                stdout, stderr = await asyncio.wait_for(proc.communicate(), 60)
                assert proc.returncode is not None
                out.append(Done(proc.returncode, stdout.decode(), stderr.decode()))
        return out
    return asyncio.run(main())


def _sent(broker: CraftedBroker, key: int) -> list[Any]:
    return [req for k, _v, req in broker.seen if k == key]


# ------------------------------------------------------------------------ cluster quorum
def test_quorum_status_replication_and_json() -> None:
    # Broken variants tried: lag as the replica's offset minus the leader's (-10), and the
    # slowest voter picked by the highest log end offset (lag 0): both fail here.
    broker = CraftedBroker({DESCRIBE_QUORUM: Quorum({})})
    status, repl, as_json = _run(broker, ["cluster", "quorum"],
                                 ["cluster", "quorum", "--replication"],
                                 ["cluster", "quorum", "--json"])
    assert status.returncode == 0, status.stderr
    assert status.stdout.splitlines() == [
        "leader 3000  epoch 7  high watermark 1234",
        "max follower lag 10  max follower lag time 9 ms",
        "voters [3000, 3001]  observers [1]"]
    rows = repl.stdout.splitlines()[3:]
    assert rows == [
        "  leader    3000  log end 1240  lag 0  last fetch -  last caught up 99",
        "  follower  3001  log end 1230  lag 10  last fetch 95  last caught up 90",
        "  observer     1  log end -1  lag -  last fetch -  last caught up -"]
    data = json.loads(as_json.stdout)
    assert (data["leader_id"], data["max_follower_lag"], data["max_follower_lag_time_ms"]) \
        == (3000, 10, 9)
    assert [(r["id"], r["status"], r["lag"]) for r in data["voters"] + data["observers"]] \
        == [(3000, "leader", 0), (3001, "follower", 10), (1, "observer", None)]
    assert data["voters"][1]["directory_id"] == "00000000-0000-0000-0000-00000000000b"
    assert data["nodes"] == {"3000": [{"name": "CONTROLLER", "host": "c0", "port": 9093}]}


def test_quorum_refused_unsupported_and_misplaced_options() -> None:
    # Broken variant tried: no check of the options given before "quorum" (they were
    # silently dropped and quorum ran without them): the message below is missing.
    refused = CraftedBroker({DESCRIBE_QUORUM: Quorum({"error": CLUSTER_AUTHORIZATION_FAILED})})
    [denied] = _run(refused, ["cluster", "quorum"])
    assert denied.returncode == 2 and "CLUSTER_AUTHORIZATION_FAILED" in denied.stderr, \
        denied.stderr
    assert not denied.stdout
    unsupported = CraftedBroker({})  # no DescribeQuorum advertised: a ZooKeeper cluster
    [old] = _run(unsupported, ["cluster", "quorum"])
    assert old.returncode == 2 and "DescribeQuorum" in old.stderr, old.stderr
    [misplaced] = _run(CraftedBroker({}), ["cluster", "--json", "-b", "x:1", "quorum"])
    assert misplaced.returncode == 2, misplaced.stderr
    assert "give --bootstrap, --json after the subcommand" in misplaced.stderr


# -------------------------------------------------------------------------- transactions
def test_transactions_list_describe_producers_and_find_hanging() -> None:
    # Broken variants tried: find-hanging ignoring --topic (reports t-2 and u-0 for
    # --topic t -p 0), producers printing the -1 start offset of a closed transaction.
    c = Cluster()
    broker = CraftedBroker(c.handlers(), topics={"t": 3, "u": 1})
    listed, described, missing, producers, hanging, one, both = _run(
        broker, ["transactions", "list", "--json"], ["transactions", "describe", "tx2"],
        ["transactions", "describe", "tx6"], ["transactions", "producers", "u", "--json"],
        ["transactions", "find-hanging"],
        ["transactions", "find-hanging", "-t", "t", "-p", "0", "--json"],
        ["transactions", "find-hanging", "--broker", "1", "-t", "t"])
    assert [(t["transactional_id"], t["producer_id"]) for t in json.loads(listed.stdout)] \
        == [("tx2", 2), ("tx3", 3), ("tx6", 6), ("tx99", 99)]
    assert described.returncode == 0, described.stderr
    assert "state Ongoing" in described.stdout and "partitions t-1" in described.stdout
    assert missing.returncode == 2 and "tx6" in missing.stderr
    rows = json.loads(producers.stdout)
    assert [(r["producer_id"], r["transaction_start_offset"]) for r in rows] == [
        (4, 5), (5, None), (6, 8)]
    assert hanging.returncode == 0, hanging.stderr
    assert [line.split("  ")[:2] for line in hanging.stdout.splitlines()] == [
        ["t-0", "producer 1"], ["t-2", "producer 3"], ["u-0", "producer 6"]]
    assert [(r["topic"], r["partition"], r["start_offset"]) for r in json.loads(one.stdout)] \
        == [("t", 0, 40)]
    assert both.returncode == 2 and "not both" in both.stderr


def test_abort_by_start_offset_is_a_dry_run_until_execute() -> None:
    # Broken variants tried: the dry run sending the marker (a WriteTxnMarkers seen), and
    # the producer looked up by the first open transaction instead of the start offset
    # (producer 4, not 6).
    c = Cluster()
    markers = Markers()
    broker = CraftedBroker({**c.handlers(), WRITE_TXN_MARKERS: markers}, topics={"u": 1})
    plan, done, as_json = _run(
        broker, ["transactions", "abort", "-t", "u", "-p", "0", "--start-offset", "8"],
        ["transactions", "abort", "-t", "u", "-p", "0", "--start-offset", "8", "--execute"],
        ["transactions", "abort", "-t", "u", "-p", "0", "--producer-id", "6",
         "--producer-epoch", "2", "--coordinator-epoch", "9", "--json"])
    assert plan.returncode == 0, plan.stderr
    assert plan.stdout.splitlines() == [
        "would abort the transaction of producer 6 (epoch 2, coordinator epoch 9) on u-0",
        "dry run: nothing changed (add --execute)"]
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("aborted the transaction of producer 6 ")
    [sent] = _sent(broker, WRITE_TXN_MARKERS)
    [m] = sent.markers
    assert (m.producer_id, m.producer_epoch, m.coordinator_epoch, m.transaction_result) == (
        6, 2, 9, False)
    assert [(t.name, list(t.partition_indexes)) for t in m.topics] == [("u", [0])]
    assert json.loads(as_json.stdout)["executed"] is False
    assert len(_sent(broker, WRITE_TXN_MARKERS)) == 1


def test_abort_bad_input_and_refusal() -> None:
    # Broken variant tried: a refused marker reported as success (exit 0).
    c = Cluster()
    broker = CraftedBroker({**c.handlers(), WRITE_TXN_MARKERS: Markers(INVALID_PRODUCER_EPOCH)},
                           topics={"u": 1})
    neither, half, nowhere, refused = _run(
        broker, ["transactions", "abort", "-t", "u", "-p", "0"],
        ["transactions", "abort", "-t", "u", "-p", "0", "--producer-id", "6"],
        ["transactions", "abort", "-t", "u", "-p", "0", "--start-offset", "77"],
        ["transactions", "abort", "-t", "u", "-p", "0", "--start-offset", "8", "--execute"])
    assert neither.returncode == 2 and "--start-offset" in neither.stderr
    assert half.returncode == 2 and "--producer-epoch" in half.stderr
    assert nowhere.returncode == 2 and "no open transactions start at offset 77 on u-0" \
        in nowhere.stderr
    assert refused.returncode == 2 and "producer 6 on u-0" in refused.stderr, refused.stderr
    assert not refused.stdout
    assert len(_sent(broker, WRITE_TXN_MARKERS)) == 1  # only the refused one


def test_fence_and_force_terminate() -> None:
    # Broken variant tried: the dry run fencing (an InitProducerId seen before --execute).
    coordinator = Coordinator(["a", "b", "denied"],
                              errors={"denied": TRANSACTIONAL_ID_AUTHORIZATION_FAILED})
    broker = CraftedBroker({INIT_PRODUCER_ID: coordinator})
    plan, fenced, terminated, denied = _run(
        broker, ["transactions", "fence", "a", "b"],
        ["transactions", "fence", "a", "b", "--execute", "--json"],
        ["transactions", "force-terminate", "a", "--execute"],
        ["transactions", "force-terminate", "denied", "--execute"])
    assert plan.returncode == 0 and plan.stdout.splitlines()[-1] == \
        "dry run: nothing changed (add --execute)"
    assert "would fence a:" in plan.stdout
    assert fenced.returncode == 0, fenced.stderr
    assert json.loads(fenced.stdout)["fenced"] == [
        {"transactional_id": "a", "producer_id": 100, "producer_epoch": 0},
        {"transactional_id": "b", "producer_id": 101, "producer_epoch": 0}]
    assert terminated.stdout.strip() == "force-terminated a: producer 100 now at epoch 1"
    assert denied.returncode == 2 and "denied" in denied.stderr, denied.stderr
    assert [r.transactional_id for _v, r in coordinator.asked] == ["a", "b", "a", "denied"]


# --------------------------------------------------------------------- groups list --type
def test_groups_list_filters_by_type_and_state() -> None:
    # Broken variant tried: --type not passed on (types_filter empty).
    g = ListGroupsResponse.ListedGroup
    asked: list[Any] = []

    def groups(_v: int, req: Any) -> Any:
        asked.append(req)
        return ListGroupsResponse(groups=[
            g(group_id="s", protocol_type="share", group_state="Stable", group_type="share"),
            g(group_id="c", protocol_type="consumer", group_state="Empty",
              group_type="consumer")])

    broker = CraftedBroker({LIST_GROUPS: groups})
    text, as_json, bad = _run(broker, ["groups", "list", "--type", "SHARE", "--type",
                                       "consumer", "--state", "stable"],
                              ["groups", "list", "--json"], ["groups", "list", "--type", "x"])
    assert text.returncode == 0, text.stderr
    assert text.stdout.splitlines() == ["c  Empty  consumer", "s  Stable  share"]
    assert (list(asked[0].types_filter), list(asked[0].states_filter)) == (
        ["share", "consumer"], ["Stable"])
    assert json.loads(as_json.stdout)[1] == {"group": "s", "state": "Stable", "type": "Share",
                                             "protocol_type": "share"}
    assert bad.returncode == 2 and len(asked) == 2
    # the names --state and --type accept are the client's (a new state is not refused)
    assert set(_GROUP_STATES) == {s.value for s in ConsumerGroupState} - {"Unknown"}
    assert set(_GROUP_TYPES) == {t.value.lower() for t in ConsumerGroupType} - {"unknown"}


# ------------------------------------------------------------------------- configs reset
def test_configs_reset_dry_run_execute_and_refusal() -> None:
    # Broken variants tried: the dry run deleting (an IncrementalAlterConfigs seen), and
    # every described key reset instead of the topic's own (segment.bytes listed).
    peer = Peer()
    plan, done, named, bad = _run(
        peer.broker, ["configs", "reset", "topic", "t"],
        ["configs", "reset", "topic", "t", "--execute", "--json"],
        ["configs", "reset", "topic", "t", "-k", "retention.ms", "--execute"],
        ["configs", "reset", "cluster", "t"])
    assert plan.returncode == 0, plan.stderr
    assert plan.stdout.splitlines() == ["would reset cleanup.policy (now 1)",
                                        "would reset retention.ms (now 1)",
                                        "dry run: nothing changed (add --execute)"]
    assert done.returncode == 0, done.stderr
    assert [c["key"] for c in json.loads(done.stdout)["configs"]] == [
        "cleanup.policy", "retention.ms"]
    assert named.stdout.strip() == "reset retention.ms (now 1)"
    assert peer.deleted() == [{"t": [("cleanup.policy", 1, None), ("retention.ms", 1, None)]},
                              {"t": [("retention.ms", 1, None)]}]
    assert bad.returncode == 2 and "cluster" in bad.stderr
    refusing = Peer(alter_errors={"t": [POLICY_VIOLATION]})
    [refused] = _run(refusing.broker, ["configs", "reset", "topic", "t", "--execute"])
    assert refused.returncode == 2 and refused.stderr.startswith("kontrakt: error:"), \
        refused.stderr
    assert not refused.stdout


# ---------------------------------------------------------------- cluster unregister-broker
def test_unregister_broker_is_a_dry_run_until_execute() -> None:
    # Broken variant tried: the dry run unregistering (broker 7 asked twice).
    controller = Controller()
    broker = CraftedBroker({UNREGISTER_BROKER: controller})
    plan, done, bad, as_json = _run(broker, ["cluster", "unregister-broker", "7"],
                                    ["cluster", "unregister-broker", "7", "--execute"],
                                    ["cluster", "unregister-broker", "-1", "--execute"],
                                    ["cluster", "unregister-broker", "7", "--json"])
    assert plan.returncode == 0 and plan.stdout.splitlines() == [
        "would unregister broker 7", "dry run: nothing changed (add --execute)"]
    assert done.returncode == 0 and done.stdout.strip() == "unregistered broker 7"
    assert bad.returncode == 2
    assert json.loads(as_json.stdout) == {"broker": 7, "executed": False}
    assert controller.asked == [7]
    refusing = Controller(BROKER_ID_NOT_REGISTERED)
    [refused] = _run(CraftedBroker({UNREGISTER_BROKER: refusing}),
                     ["cluster", "unregister-broker", "8", "--execute"])
    assert refused.returncode == 2 and "no such broker" in refused.stderr, refused.stderr


# --------------------------------------------------------- topics log-dirs / move-replica
def test_topics_log_dirs_shows_each_replica_and_its_move() -> None:
    # Broken variant tried: the future directory shown as the current one (t-1 in /b).
    dirs = LogDirs({"/a": [("t", 0, 0, False), ("t", 1, 3, False)],
                    "/b": [("t", 1, 42, True)]})
    broker = CraftedBroker({DESCRIBE_LOG_DIRS: dirs}, topics={"t": 2})
    text, as_json, missing = _run(broker, ["topics", "log-dirs", "t"],
                                  ["topics", "log-dirs", "t", "-p", "1", "--json"],
                                  ["topics", "log-dirs", "t", "-p", "5"])
    assert text.returncode == 0, text.stderr
    assert text.stdout.splitlines() == [
        "t-0  broker 1  dir /a  lag 0",
        "t-1  broker 1  dir /a  lag 3  moving to /b (lag 42)"]
    assert json.loads(as_json.stdout) == [
        {"topic": "t", "partition": 1, "broker": 1, "log_dir": "/a", "offset_lag": 3,
         "future_log_dir": "/b", "future_offset_lag": 42}]
    assert missing.returncode == 2 and "no partition 5" in missing.stderr
    assert len(dirs.asked) == 2  # the bad partition was refused before asking


def test_topics_move_replica_is_a_dry_run_until_execute() -> None:
    # Broken variants tried: the dry run moving (an AlterReplicaLogDirs seen), and a
    # refused move reported as done (exit 0).
    moves = Dirs(errors={("t", 1): LOG_DIR_NOT_FOUND})
    broker = CraftedBroker({DESCRIBE_LOG_DIRS: LogDirs({"/a": [("t", 0, 0, False),
                                                                ("t", 1, 0, False)]}),
                            ALTER_REPLICA_LOG_DIRS: moves}, topics={"t": 3})
    base = ["topics", "move-replica", "t", "--broker", "1", "--to-dir", "/b"]
    plan, done, refused, absent, as_json = _run(broker, [*base, "-p", "0"],
                                                [*base, "-p", "0", "--execute"],
                                                [*base, "-p", "1", "--execute"],
                                                [*base, "-p", "2", "--execute"],
                                                [*base, "-p", "0", "--json"])
    assert plan.returncode == 0 and plan.stdout.splitlines() == [
        "would move t-0 on broker 1 from /a to /b", "dry run: nothing changed (add --execute)"]
    assert done.returncode == 0 and done.stdout.startswith("moving t-0 on broker 1 from /a")
    assert refused.returncode == 2 and "t-1" in refused.stderr, refused.stderr
    assert absent.returncode == 2 and "holds no replica of t-2" in absent.stderr
    assert json.loads(as_json.stdout) == {"topic": "t", "partition": 0, "broker": 1,
                                          "log_dir": "/a", "to_dir": "/b", "executed": False}
    assert moves.sent() == [{"/b": {"t": [0]}}, {"/b": {"t": [1]}}]


# ------------------------------------------------------------------- topics describe --elr
def test_topics_describe_elr_from_describe_topic_partitions_or_none() -> None:
    # Broken variants tried: --elr ignored (no "elr" key), and the ELR and last known ELR
    # swapped.
    offsets = ServedOffsets()
    offsets.committed = {}
    pages = Paging()
    broker = CraftedBroker({DESCRIBE_TOPIC_PARTITIONS: pages, LIST_OFFSETS: offsets.list_offsets,
                            DESCRIBE_CONFIGS: Peer().describe}, topics={"b": 2})
    text, as_json, plain = _run(broker, ["topics", "describe", "b", "--elr"],
                                ["topics", "describe", "b", "--elr", "--json"],
                                ["topics", "describe", "b", "--json"])
    assert text.returncode == 0, text.stderr
    assert "  partition   1  leader 2  replicas [2, 9]  isr [2]  end 0  elr [9]  last known " \
        "elr [8]" in text.stdout.splitlines()
    [topic] = json.loads(as_json.stdout)
    assert [(p["elr"], p["last_known_elr"]) for p in topic["partitions"]] == [([9], [8])] * 2
    assert all("elr" not in p for p in json.loads(plain.stdout)[0]["partitions"])
    # an older broker (Metadata only) has no ELR to show
    old = CraftedBroker({LIST_OFFSETS: offsets.list_offsets, DESCRIBE_CONFIGS: Peer().describe},
                        topics={"b": 1})
    old_text, old_json = _run(old, ["topics", "describe", "b", "--elr"],
                              ["topics", "describe", "b", "--elr", "--json"])
    assert old_text.stdout.splitlines()[1].endswith("  elr -  last known elr -")
    assert json.loads(old_json.stdout)[0]["partitions"][0]["elr"] is None
