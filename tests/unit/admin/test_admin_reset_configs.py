"""reset_configs against a crafted broker.

Tansu deletes a topic config on IncrementalAlterConfigs DELETE
(tests/integration/test_admin_reset_configs.py) but reports every config it describes as
DEFAULT_CONFIG (measured), so resetting "every config set at the resource" finds nothing
there; librdkafka's mock cluster offers neither API. So choosing the keys by their source,
the request fields, per-resource errors, retries and bad input are checked against a
crafted peer (``tests/_crafted_broker.py``).
"""

from __future__ import annotations

from typing import Any

import pytest

from kontrakt.clients.admin import ConfigResource, ConfigSource
from kontrakt.errors import InvalidArgumentError, PartialFailureError
from kontrakt.protocol.errors import TopicAuthorizationFailedError
from kontrakt.protocol.messages import DescribeConfigsResponse, IncrementalAlterConfigsResponse
from tests._crafted_broker import CraftedBroker
from tests.unit.admin.test_admin_crafted import run

DESCRIBE, INCREMENTAL = 32, 44
D = DescribeConfigsResponse.DescribeConfigsResult
IA = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse
TOPIC = ConfigResource("topic", "t")
OTHER = ConfigResource("topic", "u")
BROKER = ConfigResource("broker", "1")
DEFAULTS = ConfigResource("broker", "")
S = ConfigSource
#: what the peer describes: name -> source, for any resource
DESCRIBED = {"retention.ms": S.DYNAMIC_TOPIC_CONFIG, "cleanup.policy": S.DYNAMIC_TOPIC_CONFIG,
             "segment.bytes": S.DEFAULT_CONFIG, "log.retention.ms": S.STATIC_BROKER_CONFIG,
             "log.cleaner.threads": S.DYNAMIC_BROKER_CONFIG,
             "num.io.threads": S.DYNAMIC_DEFAULT_BROKER_CONFIG}


class Peer:
    """Describes :data:`DESCRIBED` (or ``describe_errors[name]``); answers
    IncrementalAlterConfigs with ``alter_errors[name]`` codes in turn, else success."""

    def __init__(self, describe_errors: dict[str, int] | None = None,
                 alter_errors: dict[str, list[int]] | None = None) -> None:
        self.describe_errors = describe_errors or {}
        self.alter_errors = alter_errors or {}
        self.altered: list[Any] = []
        self.broker = CraftedBroker({DESCRIBE: self.describe, INCREMENTAL: self.alter})

    def describe(self, _v: int, req: Any) -> Any:
        return DescribeConfigsResponse(results=[D(
            error_code=self.describe_errors.get(r.resource_name, 0),
            resource_type=r.resource_type, resource_name=r.resource_name,
            configs=[] if self.describe_errors.get(r.resource_name) else [
                D.DescribeConfigsResourceResult(name=n, value="1", config_source=int(src))
                for n, src in DESCRIBED.items()]) for r in req.resources])

    def alter(self, _v: int, req: Any) -> Any:
        self.altered.append(req)
        out = []
        for r in req.resources:
            codes = self.alter_errors.get(r.resource_name, [])
            out.append(IA(error_code=codes.pop(0) if codes else 0,
                          resource_type=r.resource_type, resource_name=r.resource_name))
        return IncrementalAlterConfigsResponse(responses=out)

    def deleted(self) -> list[dict[str, list[tuple[str, int, str | None]]]]:
        return [{r.resource_name: [(c.name, c.config_operation, c.value) for c in r.configs]
                 for r in req.resources} for req in self.altered]


def test_named_keys_are_deleted_and_returned_sorted() -> None:
    # Broken variant tried: SET with an empty value instead of DELETE (op 0, value "").
    peer = Peer()
    out = run(peer.broker, lambda a: a.reset_configs(
        {TOPIC: ["retention.ms", "cleanup.policy"]}, validate_only=True))
    assert out == {TOPIC: ("cleanup.policy", "retention.ms")}
    assert peer.deleted() == [{"t": [("retention.ms", 1, None), ("cleanup.policy", 1, None)]}]
    assert peer.altered[0].validate_only is True


def test_none_resets_every_config_set_at_that_resource_itself() -> None:
    # Broken variant tried: every described key (incl. DEFAULT_CONFIG and static ones)
    # deleted; and a broker "" taken for broker 1's level (DYNAMIC_BROKER_CONFIG).
    peer = Peer()
    out = run(peer.broker, lambda a: a.reset_configs({TOPIC: None, BROKER: None,
                                                      DEFAULTS: None}))
    assert out == {TOPIC: ("cleanup.policy", "retention.ms"),
                   BROKER: ("log.cleaner.threads",), DEFAULTS: ("num.io.threads",)}
    merged: dict[str, list[Any]] = {}
    for d in peer.deleted():
        merged.update(d)
    assert merged == {"t": [("cleanup.policy", 1, None), ("retention.ms", 1, None)],
                      "1": [("log.cleaner.threads", 1, None)],
                      "": [("num.io.threads", 1, None)]}


def test_nothing_is_sent_for_a_resource_with_nothing_to_reset() -> None:
    peer = Peer()
    out = run(peer.broker, lambda a: a.reset_configs({TOPIC: []}))
    assert out == {TOPIC: ()}
    assert peer.altered == []


def test_each_resource_fails_alone_and_retriable_errors_are_retried() -> None:
    # Broken variant tried: reset_configs raising the alter step's first error
    # (return_exceptions=False there) loses u's outcome and the describe error's resource.
    peer = Peer(describe_errors={"d": 29}, alter_errors={"t": [7], "u": [29]})
    desc_failed = ConfigResource("topic", "d")
    out = run(peer.broker, lambda a: a.reset_configs(
        {TOPIC: ["retention.ms"], OTHER: ["retention.ms"], desc_failed: None},
        return_exceptions=True))
    assert out[TOPIC] == ("retention.ms",)  # REQUEST_TIMED_OUT (7) once, then done
    assert isinstance(out[OTHER], TopicAuthorizationFailedError)
    assert isinstance(out[desc_failed], TopicAuthorizationFailedError)
    assert all("d" not in d for d in peer.deleted())
    assert [sorted(d) for d in peer.deleted()] == [["t", "u"], ["t"]]

    with pytest.raises(PartialFailureError):
        run(Peer(alter_errors={"u": [29]}).broker, lambda a: a.reset_configs(
            {TOPIC: ["retention.ms"], OTHER: ["retention.ms"]}))
    with pytest.raises(TopicAuthorizationFailedError):
        run(Peer(alter_errors={"u": [29]}).broker, lambda a: a.reset_configs(
            {OTHER: ["retention.ms"]}))


@pytest.mark.parametrize("resources", [
    {TOPIC: ["retention.msx"]}, {TOPIC: "retention.ms"}, {TOPIC: ["retention.ms"] * 2},
    {ConfigResource("topic", "bad name"): None}, {BROKER: [""]}, {BROKER: "abc"}])
def test_bad_input_is_refused_before_sending(resources: Any) -> None:
    # Broken variant tried: a str taken as a collection of keys sends broker configs
    # "a", "b", "c".
    peer = Peer()
    with pytest.raises(InvalidArgumentError):
        run(peer.broker, lambda a: a.reset_configs(resources))
    assert [k for k, _v, _m in peer.broker.requests if k in (DESCRIBE, INCREMENTAL)] == []
