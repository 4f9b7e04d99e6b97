"""``kontrakt groups describe`` of a share group, ``cluster add-voter|remove-voter`` and
``configs list-resources|describe`` run as subprocesses against a crafted broker
(``tests/_crafted_broker.py``).

No test broker answers these APIs: librdkafka's mock cluster serves share groups but not
ShareGroupDescribe (API 77), neither it nor Tansu 0.6.0 runs a KRaft quorum
(AddRaftVoter/RemoveRaftVoter, APIs 80/81) or offers ListConfigResources (API 74), and
Tansu describes every config as a default. So the peer's answers are chosen here: the text
and ``--json`` output, what is sent (nothing on a dry run) and the exit codes for bad input
(2, nothing sent) and refusals (2, with the broker's error).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from kontrakt.protocol.errors import DuplicateVoterError, GroupIdNotFoundError
from kontrakt.protocol.messages import DescribeConfigsResponse, ListGroupsResponse
from tests._crafted_broker import CraftedBroker
from tests.integration.test_cli_admin_ops import _run, _sent
from tests.unit.admin.test_admin_config_resources import Lister
from tests.unit.admin.test_admin_raft_voters import Controller
from tests.unit.admin.test_admin_share_groups import _describe as share_describe

pytestmark = pytest.mark.integration

LIST_GROUPS, SHARE_GROUP_DESCRIBE, CONSUMER_GROUP_DESCRIBE = 16, 77, 69
ADD_RAFT_VOTER, REMOVE_RAFT_VOTER, LIST_CONFIG_RESOURCES, DESCRIBE_CONFIGS = 80, 81, 74, 32
DRY_RUN = "dry run: nothing changed (add --execute)"
DIRECTORY = "00000000-0000-0000-0000-000000001234"


# ------------------------------------------------------------- groups describe (share)
def _listed(_v: int, _req: Any) -> Any:
    g = ListGroupsResponse.ListedGroup
    return ListGroupsResponse(groups=[
        g(group_id=name, protocol_type="share", group_state="Stable", group_type="share")
        for name in ("work", "nope")])


def test_groups_describe_shows_a_share_groups_description() -> None:
    # Broken variants tried: no share branch (the consumer-group describe is sent: the
    # crafted broker has no ConsumerGroupDescribe and the command fails), and the group
    # epoch shown as the assignment epoch (text "share group epoch 3").
    broker = CraftedBroker({LIST_GROUPS: _listed, SHARE_GROUP_DESCRIBE: share_describe})
    text, as_json, missing = _run(broker, ["groups", "describe", "work"],
                                  ["groups", "describe", "work", "--json"],
                                  ["groups", "describe", "nope"])
    assert text.returncode == 0, text.stderr
    assert text.stdout.splitlines() == [
        "group work  share group epoch 4  assignment epoch 3  assignor simple  state Stable  "
        "members 1",
        "  member m1 (c@/h) epoch 4  subscribed t: t-0, t-2"]
    assert json.loads(as_json.stdout) == {
        "group": "work", "type": "Share", "state": "Stable", "group_epoch": 4,
        "target_assignment_epoch": 3, "assignor": "simple", "coordinator": 1,
        "members": [{"member_id": "m1", "client_id": "c", "host": "/h", "rack": "r1",
                     "member_epoch": 4, "subscription": ["t"], "partitions": ["t-0", "t-2"]}]}
    # the coordinator's refusal, with its message, and no consumer-group API asked
    assert missing.returncode == 2 and "nope is not a share group" in missing.stderr, \
        missing.stderr
    assert f"GROUP_ID_NOT_FOUND ({GroupIdNotFoundError.code})" in missing.stderr
    assert not missing.stdout
    assert [r.group_ids for r in _sent(broker, SHARE_GROUP_DESCRIBE)] == [
        ["work"], ["work"], ["nope"]]
    assert not _sent(broker, CONSUMER_GROUP_DESCRIBE)


def test_groups_describe_knows_a_share_group_by_its_protocol_type_before_list_groups_v5(
        ) -> None:
    # Broken variant tried: only ListGroups' group type looked at (UNKNOWN before v5: the
    # consumer-group describe is sent, which this broker does not answer).
    broker = CraftedBroker({LIST_GROUPS: _listed, SHARE_GROUP_DESCRIBE: share_describe},
                           max_versions={LIST_GROUPS: 4})
    [text] = _run(broker, ["groups", "describe", "work"])
    assert text.returncode == 0, text.stderr
    assert text.stdout.startswith("group work  share group epoch 4 ")
    assert not _sent(broker, CONSUMER_GROUP_DESCRIBE)


# ----------------------------------------------------------- cluster add/remove-voter
def test_add_and_remove_voter_are_dry_runs_until_execute() -> None:
    # Broken variants tried: the dry run sending (an AddRaftVoter seen before --execute),
    # and the endpoint's port parsed as part of the host (host "c3:9093").
    controller = Controller()
    broker = CraftedBroker({ADD_RAFT_VOTER: controller, REMOVE_RAFT_VOTER: controller})
    add = ["cluster", "add-voter", "3", "--directory-id", DIRECTORY, "--endpoint",
           "CONTROLLER://c3:9093", "--endpoint", "CTRL2://[::1]:9094"]
    remove = ["cluster", "remove-voter", "3", "--directory-id", DIRECTORY]
    plan, plan_json, done, rplan, removed = _run(
        broker, add, [*add, "--json"], [*add, "--cluster-id", "k1", "--execute"], remove,
        [*remove, "--execute", "--json"])
    assert plan.returncode == 0, plan.stderr
    assert plan.stdout.splitlines() == [
        f"would add voter 3 (directory {DIRECTORY}) at CONTROLLER://c3:9093, "
        "CTRL2://::1:9094", DRY_RUN]
    assert json.loads(plan_json.stdout) == {
        "voter": 3, "directory_id": DIRECTORY, "cluster_id": None, "executed": False,
        "endpoints": [{"name": "CONTROLLER", "host": "c3", "port": 9093},
                      {"name": "CTRL2", "host": "::1", "port": 9094}]}
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("added voter 3 ")
    assert rplan.stdout.splitlines() == [
        f"would remove voter 3 (directory {DIRECTORY})", DRY_RUN]
    assert json.loads(removed.stdout) == {"voter": 3, "directory_id": DIRECTORY,
                                          "cluster_id": None, "executed": True}
    [(_v, added), (_w, gone)] = controller.asked
    assert (added.voter_id, added.voter_directory_id, added.cluster_id) == (
        3, uuid.UUID(DIRECTORY), "k1")
    assert [(li.name, li.host, li.port) for li in added.listeners] == [
        ("CONTROLLER", "c3", 9093), ("CTRL2", "::1", 9094)]
    assert (gone.voter_id, gone.voter_directory_id, gone.cluster_id) == (
        3, uuid.UUID(DIRECTORY), None)


@pytest.mark.parametrize("args", [
    ["add-voter", "3", "--directory-id", "not-a-uuid", "--endpoint", "C://h:1"],
    ["add-voter", "3", "--directory-id", str(uuid.UUID(int=0)), "--endpoint", "C://h:1"],
    ["add-voter", "3", "--directory-id", DIRECTORY, "--endpoint", "h:9093"],
    ["add-voter", "3", "--directory-id", DIRECTORY, "--endpoint", "C://h:99999"],
    ["add-voter", "3", "--directory-id", DIRECTORY],
    ["remove-voter", "-1", "--directory-id", DIRECTORY],
    ["remove-voter", "3"],
])
def test_voter_bad_input_is_refused_before_anything_is_sent(args: list[str]) -> None:
    # Broken variant tried: no range check of the port in the command (the admin client
    # refuses C://h:99999 on --execute, but the dry run said "would add").
    controller = Controller()
    broker = CraftedBroker({ADD_RAFT_VOTER: controller, REMOVE_RAFT_VOTER: controller})
    for bad in _run(broker, ["cluster", *args], ["cluster", *args, "--execute"]):
        assert bad.returncode == 2, (bad.stdout, bad.stderr)
        assert not bad.stdout
    assert not controller.asked and not broker.requests


def test_a_refused_voter_change_exits_2_with_the_controllers_error() -> None:
    # Broken variant tried: the refusal swallowed (exit 0, "added voter 3").
    controller = Controller(DuplicateVoterError.code)
    broker = CraftedBroker({ADD_RAFT_VOTER: controller})
    [refused] = _run(broker, ["cluster", "add-voter", "3", "--directory-id", DIRECTORY,
                              "--endpoint", "C://h:1", "--execute"])
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr == "kontrakt: error: [DUPLICATE_VOTER (126)] add_raft_voter 3: " \
        "refused\n"
    assert not refused.stdout
    assert len(controller.asked) == 1  # an answer is final: not retried


# ------------------------------------------------------------ configs list-resources
def test_configs_list_resources_text_json_and_type_filter() -> None:
    # Broken variant tried: --type not passed on (every resource listed for --type group).
    lister = Lister()
    broker = CraftedBroker({LIST_CONFIG_RESOURCES: lister})
    text, as_json, groups, bad = _run(
        broker, ["configs", "list-resources"], ["configs", "list-resources", "--json"],
        ["configs", "list-resources", "--type", "group", "--type", "topic"],
        ["configs", "list-resources", "--type", "cluster"])
    assert text.returncode == 0, text.stderr
    assert text.stdout.splitlines() == ["unknown new", "topic orders", "client-metrics m0",
                                        "client-metrics m1", "group g1"]
    assert json.loads(as_json.stdout)[1] == {"type": "topic", "name": "orders"}
    assert groups.stdout.splitlines() == ["topic orders", "group g1"]
    assert [sorted(req.resource_types) for _v, req in lister.asked] == [[], [], [2, 32]]
    assert bad.returncode == 2 and len(lister.asked) == 3


# ------------------------------------------------------------------ configs describe
D = DescribeConfigsResponse.DescribeConfigsResult
R = D.DescribeConfigsResourceResult


def _configs(_v: int, req: Any) -> Any:
    return DescribeConfigsResponse(results=[D(
        # TOPIC_AUTHORIZATION_FAILED: final (UNKNOWN_TOPIC_OR_PARTITION is retried)
        error_code=0 if r.resource_name != "gone" else 29,
        error_message="not yours: gone" if r.resource_name == "gone" else None,
        resource_type=r.resource_type, resource_name=r.resource_name, configs=[
            R(name="retention.ms", value="1000", config_source=1),
            # a broker should send no value for a sensitive config: this one does
            R(name="sasl.jaas.config", value="hunter2", config_source=1, is_sensitive=True),
            R(name="segment.bytes", value="1073741824", config_source=5, read_only=True),
            R(name="log.retention.ms", value="5", config_source=4)])
        for r in req.resources])


def test_configs_describe_own_configs_all_and_masked_values() -> None:
    # Broken variants tried: --all ignored (defaults missing), the sensitive value echoed
    # ("hunter2" printed), every config shown without --all, and no Metadata check of the
    # topic first (DescribeConfigs asked about "zz": UNKNOWN_TOPIC_OR_PARTITION there is
    # retried for the whole 30 s timeout).
    broker = CraftedBroker({DESCRIBE_CONFIGS: _configs}, topics={"t": 1, "gone": 1})
    own, every, as_json, missing, bad, absent = _run(
        broker, ["configs", "describe", "topic", "t"],
        ["configs", "describe", "topic", "t", "--all"],
        ["configs", "describe", "topic", "t", "--all", "--json"],
        ["configs", "describe", "topic", "gone"],
        ["configs", "describe", "cluster", "t"], ["configs", "describe", "topic", "zz"])
    assert own.returncode == 0, own.stderr
    assert own.stdout.splitlines() == ["retention.ms=1000  DYNAMIC_TOPIC_CONFIG",
                                       "sasl.jaas.config=(sensitive)  DYNAMIC_TOPIC_CONFIG"]
    assert every.stdout.splitlines() == [
        "log.retention.ms=5  STATIC_BROKER_CONFIG",
        "retention.ms=1000  DYNAMIC_TOPIC_CONFIG",
        "sasl.jaas.config=(sensitive)  DYNAMIC_TOPIC_CONFIG",
        "segment.bytes=1073741824  DEFAULT_CONFIG  read-only"]
    data = json.loads(as_json.stdout)
    assert (data["type"], data["name"], len(data["configs"])) == ("topic", "t", 4)
    assert data["configs"][2] == {"key": "sasl.jaas.config", "value": None,
                                  "source": "DYNAMIC_TOPIC_CONFIG", "read_only": False,
                                  "sensitive": True}
    assert data["configs"][3]["read_only"] is True
    assert all("hunter2" not in d.stdout + d.stderr for d in (own, every, as_json))
    assert missing.returncode == 2 and "gone" in missing.stderr and not missing.stdout
    assert absent.returncode == 2, absent.stderr
    assert absent.stderr == \
        "kontrakt: error: [UNKNOWN_TOPIC_OR_PARTITION (3)] topic 'zz'\n"
    assert bad.returncode == 2 and len(_sent(broker, DESCRIBE_CONFIGS)) == 4


def test_configs_describe_a_resource_with_nothing_of_its_own() -> None:
    # Broken variant tried: own configs picked by "not a default" (the static broker
    # config shown for broker 1).
    broker = CraftedBroker({DESCRIBE_CONFIGS: lambda _v, req: DescribeConfigsResponse(
        results=[D(error_code=0, resource_type=r.resource_type,
                   resource_name=r.resource_name,
                   configs=[R(name="log.retention.ms", value="5", config_source=4)])
                 for r in req.resources])})
    text, as_json = _run(broker, ["configs", "describe", "broker", "1"],
                         ["configs", "describe", "broker", "1", "--json"])
    assert text.returncode == 0, text.stderr
    assert text.stdout.splitlines() == [
        "broker 1 has no configs of its own (--all shows every config)"]
    assert json.loads(as_json.stdout) == {"type": "broker", "name": "1", "configs": []}
