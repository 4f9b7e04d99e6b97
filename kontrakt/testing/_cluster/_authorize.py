"""The authorization checks Kafka's brokers make before serving a request, as wrappers
around the cluster's request handlers (so the handlers themselves know nothing of ACLs).

A request whose resource is denied as a whole is answered by the injected-error response
builder (``_faults.error_response``) with the authorization error code; a request over
several topics or groups is split: the allowed part goes to the handler, the denied part
gets the error per entry, as Kafka answers it. Checked: Produce and Fetch
(TOPIC_AUTHORIZATION_FAILED per partition), Metadata (denied topics omitted from an
all-topics listing, reported with the error when named), the group APIs
(GROUP_AUTHORIZATION_FAILED), CreateTopics / DeleteTopics, transactional ids
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and idempotent producers
(CLUSTER_AUTHORIZATION_FAILED), and the ACL APIs themselves (in ``_acls``).
ListOffsets (DESCRIBE), OffsetCommit / TxnOffsetCommit (READ), DeleteRecords (DELETE) and
CreatePartitions (ALTER) are checked per topic, DescribeConfigs (DESCRIBE_CONFIGS) and
AlterConfigs / IncrementalAlterConfigs (ALTER_CONFIGS) per resource (topic, group, or the
cluster for brokers), OffsetFetch per group and topic. Not checked yet:
OffsetForLeaderEpoch and the describe-only admin APIs (served to every authenticated
principal).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kontrakt.protocol import errors as E
from kontrakt.protocol.messages import (
    AlterConfigsResponse,
    ConsumerGroupDescribeResponse,
    CreatePartitionsResponse,
    DeleteRecordsResponse,
    DescribeConfigsResponse,
    IncrementalAlterConfigsResponse,
)
from kontrakt.testing._cluster._acls import CLUSTER_NAME, AclStore, Op, Res
from kontrakt.testing._cluster._faults import error_response
from kontrakt.testing._cluster._quotas import ClientQuotas
from kontrakt.testing._cluster._state import ClusterState, RequestContext
from kontrakt.testing._cluster._telemetry import Telemetry
from kontrakt.testing._cluster._tokens import DelegationTokens

__all__ = ["SecurityApis", "enforce", "report_operations"]

Handler = Callable[[RequestContext, int, Any], Any]

_TOPIC_DENIED = E.TopicAuthorizationFailedError.code
_GROUP_DENIED = E.GroupAuthorizationFailedError.code
_TXN_DENIED = E.TransactionalIdAuthorizationFailedError.code
_CLUSTER_DENIED = E.ClusterAuthorizationFailedError.code
_CONFIG_TOPIC, _CONFIG_GROUP = 2, 32  # DescribeConfigs resource types (4: broker, ...)


async def _call(handler: Handler, ctx: RequestContext, version: int, req: Any) -> Any:
    result = handler(ctx, version, req)
    return await result if inspect.isawaitable(result) else result


class _Checks:
    def __init__(self, state: ClusterState, acls: AclStore,
                 handlers: dict[int, Handler]) -> None:
        self.state, self.acls, self.inner = state, acls, dict(handlers)

    def _topic_name(self, name: str | None, topic_id: Any) -> str:
        if name:
            return name
        topic = self.state.topics_by_id.get(topic_id)
        return topic.name if topic is not None else ""

    async def _split(self, api: int, ctx: RequestContext, version: int, req: Any,
                     field: str, out_field: str, allowed: Callable[[Any], bool],
                     code: int = _TOPIC_DENIED,
                     build: Callable[[list[Any], int], list[Any]] | None = None) -> Any:
        """Serve the entries of ``req.<field>`` that pass ``allowed``; answer the others
        with ``code`` in ``resp.<out_field>`` (entries made by ``build(denied, code)``, by
        default the injected-error response's)."""
        entries = getattr(req, field)
        ok = [e for e in entries if allowed(e)]
        if len(ok) == len(entries):
            return await _call(self.inner[api], ctx, version, req)
        refused = [e for e in entries if not allowed(e)]
        if build is not None:
            denied = build(refused, code)
        else:
            setattr(req, field, refused)
            denied = getattr(error_response(api, version, req, code), out_field)
        setattr(req, field, ok)
        resp = await _call(self.inner[api], ctx, version, req)
        if resp is not None:
            setattr(resp, out_field, getattr(resp, out_field) + denied)
        return resp

    def _whole(self, api: int, check: Callable[[RequestContext, Any], int]) -> Handler:
        """A handler answering with ``check``'s error code when it is not 0."""
        async def handler(ctx: RequestContext, version: int, req: Any) -> Any:
            code = check(ctx, req)
            if code:
                return error_response(api, version, req, code)
            return await _call(self.inner[api], ctx, version, req)
        return handler

    def _ok(self, ctx: RequestContext, rt: int, name: str, op: int) -> bool:
        return self.acls.authorized(ctx, rt, name, op)

    def _group(self, op: int) -> Callable[[RequestContext, Any], int]:
        return lambda ctx, req: 0 if self._ok(ctx, Res.GROUP, req.group_id, op) \
            else _GROUP_DENIED

    def _txn(self, ctx: RequestContext, txn_id: str | None) -> int:
        return 0 if not txn_id or self._ok(ctx, Res.TRANSACTIONAL_ID, txn_id, Op.WRITE) \
            else _TXN_DENIED

    # --- per API ----------------------------------------------------------------------------
    async def produce(self, ctx: RequestContext, version: int, req: Any) -> Any:
        code = self._txn(ctx, req.transactional_id)
        if code:
            resp = error_response(0, version, req, code)
            return None if req.acks == 0 else resp
        return await self._split(0, ctx, version, req, "topic_data", "responses", lambda t: (
            self._ok(ctx, Res.TOPIC, self._topic_name(t.name, t.topic_id), Op.WRITE)))

    async def fetch(self, ctx: RequestContext, version: int, req: Any) -> Any:
        def allowed(t: Any) -> bool:
            return self._ok(ctx, Res.TOPIC, self._topic_name(t.topic, t.topic_id), Op.READ)
        if not all(allowed(t) for t in req.topics):
            req.max_wait_ms = 0  # an error in the answer makes Kafka answer at once
        return await self._split(1, ctx, version, req, "topics", "responses", allowed)

    async def metadata(self, ctx: RequestContext, version: int, req: Any) -> Any:
        def allowed(t: Any) -> bool:
            return self._ok(ctx, Res.TOPIC, self._topic_name(t.name, t.topic_id), Op.DESCRIBE)
        if req.topics is None:
            resp = await _call(self.inner[3], ctx, version, req)
            resp.topics = [t for t in resp.topics if allowed(t)]
            return resp
        if getattr(req, "allow_auto_topic_creation", False) and not self._ok(
                ctx, Res.CLUSTER, CLUSTER_NAME, Op.CREATE):
            # Kafka creates a missing topic only for a principal allowed to CREATE it.
            req.allow_auto_topic_creation = any(
                self._ok(ctx, Res.TOPIC, t.name or "", Op.CREATE) for t in req.topics)
        return await self._split(3, ctx, version, req, "topics", "topics", allowed)

    async def create_topics(self, ctx: RequestContext, version: int, req: Any) -> Any:
        cluster = self._ok(ctx, Res.CLUSTER, CLUSTER_NAME, Op.CREATE)
        return await self._split(19, ctx, version, req, "topics", "topics", lambda t: (
            cluster or self._ok(ctx, Res.TOPIC, t.name, Op.CREATE)))

    async def delete_topics(self, ctx: RequestContext, version: int, req: Any) -> Any:
        if version >= 6:
            return await self._split(20, ctx, version, req, "topics", "responses", lambda t: (
                self._ok(ctx, Res.TOPIC, self._topic_name(t.name, t.topic_id), Op.DELETE)))
        return await self._split(20, ctx, version, req, "topic_names", "responses", lambda n: (
            self._ok(ctx, Res.TOPIC, n, Op.DELETE)))

    async def offset_fetch(self, ctx: RequestContext, version: int, req: Any) -> Any:
        """DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED), then on each topic: named
        topics' partitions get TOPIC_AUTHORIZATION_FAILED, a whole-group fetch leaves the
        denied topics out (Kafka's handleOffsetFetchRequest)."""
        def topics_seen(asked: list[Any] | None, answered: list[Any]) -> list[Any]:
            kept = []
            for t in answered:
                if self._ok(ctx, Res.TOPIC, t.name, Op.DESCRIBE):
                    kept.append(t)
                elif asked is not None:
                    for p in t.partitions:
                        p.committed_offset, p.committed_leader_epoch = -1, -1
                        p.metadata, p.error_code = "", _TOPIC_DENIED
                    kept.append(t)
            return kept

        if version < 8:
            if not self._ok(ctx, Res.GROUP, req.group_id, Op.DESCRIBE):
                return error_response(9, version, req, _GROUP_DENIED)
            asked = req.topics
            resp: Any = await _call(self.inner[9], ctx, version, req)
            resp.topics = topics_seen(asked, resp.topics)
            return resp
        groups = req.groups
        denied = [g for g in groups if not self._ok(ctx, Res.GROUP, g.group_id, Op.DESCRIBE)]
        req.groups = denied
        denied_resp: Any = error_response(9, version, req, _GROUP_DENIED)
        req.groups = [g for g in groups if g not in denied]
        asked_by_group = {g.group_id: g.topics for g in req.groups}
        resp = await _call(self.inner[9], ctx, version, req) if req.groups else \
            error_response(9, version, req, 0)
        for g in resp.groups:
            g.topics = topics_seen(asked_by_group.get(g.group_id), g.topics)
        resp.groups = resp.groups + denied_resp.groups
        return resp

    def _groups_listed(self, api: int, field: str, out: str, op: int) -> Handler:
        """DescribeGroups / DeleteGroups / ConsumerGroupDescribe: an error per denied group."""
        def consumer_groups(denied: list[Any], code: int) -> list[Any]:
            cls = ConsumerGroupDescribeResponse.DescribedGroup
            return [cls(group_id=g, error_code=code) for g in denied]

        async def handler(ctx: RequestContext, version: int, req: Any) -> Any:
            return await self._split(api, ctx, version, req, field, out, lambda g: (
                self._ok(ctx, Res.GROUP, g, op)), _GROUP_DENIED,
                consumer_groups if api == 69 else None)
        return handler

    async def list_groups(self, ctx: RequestContext, version: int, req: Any) -> Any:
        resp = await _call(self.inner[16], ctx, version, req)
        if not self._ok(ctx, Res.CLUSTER, CLUSTER_NAME, Op.DESCRIBE):
            resp.groups = [g for g in resp.groups
                           if self._ok(ctx, Res.GROUP, g.group_id, Op.DESCRIBE)]
        return resp

    def _topics(self, api: int, op: int, out: str = "topics",
                build: Callable[[list[Any], int], list[Any]] | None = None) -> Handler:
        """An API over ``req.topics`` (by name): TOPIC_AUTHORIZATION_FAILED per denied one."""
        async def handler(ctx: RequestContext, version: int, req: Any) -> Any:
            return await self._split(api, ctx, version, req, "topics", out, lambda t: (
                self._ok(ctx, Res.TOPIC, t.name, op)), build=build)
        return handler

    def _group_then_topics(self, api: int, group_check: Callable[[RequestContext, Any], int]
                           ) -> Handler:
        """OffsetCommit / TxnOffsetCommit: the group (and transactional id) as a whole,
        then READ per topic."""
        async def handler(ctx: RequestContext, version: int, req: Any) -> Any:
            code = group_check(ctx, req)
            if code:
                return error_response(api, version, req, code)
            return await self._split(api, ctx, version, req, "topics", "topics", lambda t: (
                self._ok(ctx, Res.TOPIC, t.name, Op.READ)))
        return handler

    def _configs(self, api: int, op: int, out: str) -> Handler:
        """DescribeConfigs (DESCRIBE_CONFIGS) and (Incremental)AlterConfigs (ALTER_CONFIGS) on
        topics, groups or the cluster (brokers, loggers, client metrics), per resource."""
        cls: Any = {32: DescribeConfigsResponse.DescribeConfigsResult,
                    33: AlterConfigsResponse.AlterConfigsResourceResponse,
                    44: IncrementalAlterConfigsResponse.AlterConfigsResourceResponse}[api]

        async def handler(ctx: RequestContext, version: int, req: Any) -> Any:
            def denial(r: Any) -> int:
                if r.resource_type == _CONFIG_TOPIC:
                    return 0 if self._ok(ctx, Res.TOPIC, r.resource_name, op) \
                        else _TOPIC_DENIED
                if r.resource_type == _CONFIG_GROUP:
                    return 0 if self._ok(ctx, Res.GROUP, r.resource_name, op) \
                        else _GROUP_DENIED
                return 0 if self._ok(ctx, Res.CLUSTER, CLUSTER_NAME, op) else _CLUSTER_DENIED

            def build(denied: list[Any], _code: int) -> list[Any]:
                return [cls(error_code=denial(r), error_message="Authorization failed.",
                            resource_type=r.resource_type, resource_name=r.resource_name)
                        for r in denied]

            return await self._split(api, ctx, version, req, "resources", out,
                                     lambda r: not denial(r), build=build)
        return handler

    def find_coordinator(self, ctx: RequestContext, req: Any) -> int:
        keys = req.coordinator_keys if req.coordinator_keys else [req.key]
        if req.key_type == 1:
            return 0 if all(self._ok(ctx, Res.TRANSACTIONAL_ID, k, Op.DESCRIBE)
                            for k in keys) else _TXN_DENIED
        return 0 if all(self._ok(ctx, Res.GROUP, k, Op.DESCRIBE) for k in keys) \
            else _GROUP_DENIED

    def init_producer_id(self, ctx: RequestContext, req: Any) -> int:
        if req.transactional_id:
            return self._txn(ctx, req.transactional_id)
        return 0 if self._ok(ctx, Res.CLUSTER, CLUSTER_NAME, Op.IDEMPOTENT_WRITE) or \
            self.acls.authorized_any(ctx, Res.TOPIC, Op.WRITE) else _CLUSTER_DENIED

    def add_partitions(self, ctx: RequestContext, req: Any) -> int:
        if req.transactions:  # v4+: a broker-to-broker batch, or a client's own
            return max((self._txn(ctx, t.transactional_id) for t in req.transactions),
                       default=0)
        return self._txn(ctx, req.v3_and_below_transactional_id)

    def txn_and_group(self, ctx: RequestContext, req: Any) -> int:
        return self._txn(ctx, req.transactional_id) or (
            0 if self._ok(ctx, Res.GROUP, req.group_id, Op.READ) else _GROUP_DENIED)



def enforce(state: ClusterState, acls: AclStore, handlers: dict[int, Handler]) -> None:
    """Replace (in place) the handlers of the APIs Kafka authorizes with checking ones."""
    c = _Checks(state, acls, handlers)
    wrapped: dict[int, Handler] = {
        0: c.produce, 1: c.fetch, 3: c.metadata, 19: c.create_topics, 20: c.delete_topics,
        9: c.offset_fetch, 16: c.list_groups,
        8: c._group_then_topics(8, c._group(Op.READ)), 11: c._whole(11, c._group(Op.READ)),
        12: c._whole(12, c._group(Op.READ)), 13: c._whole(13, c._group(Op.READ)),
        14: c._whole(14, c._group(Op.READ)), 47: c._whole(47, c._group(Op.DELETE)),
        68: c._whole(68, c._group(Op.READ)),
        15: c._groups_listed(15, "groups", "groups", Op.DESCRIBE),
        42: c._groups_listed(42, "groups_names", "results", Op.DELETE),
        69: c._groups_listed(69, "group_ids", "groups", Op.DESCRIBE),
        10: c._whole(10, c.find_coordinator), 22: c._whole(22, c.init_producer_id),
        24: c._whole(24, c.add_partitions), 25: c._whole(25, c.txn_and_group),
        26: c._whole(26, lambda ctx, req: c._txn(ctx, req.transactional_id)),
        28: c._group_then_topics(28, c.txn_and_group),
        2: c._topics(2, Op.DESCRIBE),
        21: c._topics(21, Op.DELETE, build=_delete_records_denied),
        37: c._topics(37, Op.ALTER, "results", _create_partitions_denied),
        32: c._configs(32, Op.DESCRIBE_CONFIGS, "results"),
        33: c._configs(33, Op.ALTER_CONFIGS, "responses"),
        44: c._configs(44, Op.ALTER_CONFIGS, "responses"),
    }
    for api, handler in wrapped.items():
        if api in handlers:
            handlers[api] = handler


def _delete_records_denied(topics: list[Any], code: int) -> list[Any]:
    tr = DeleteRecordsResponse.DeleteRecordsTopicResult
    return [tr(name=t.name, partitions=[tr.DeleteRecordsPartitionResult(
        partition_index=p.partition_index, low_watermark=-1, error_code=code)
        for p in t.partitions]) for t in topics]


def _create_partitions_denied(topics: list[Any], code: int) -> list[Any]:
    cls = CreatePartitionsResponse.CreatePartitionsTopicResult
    return [cls(name=t.name, error_code=code, error_message="Topic authorization failed.")
            for t in topics]


#: Kafka's AclEntry.supportedOperations per resource type, as bit numbers.
_SUPPORTED_OPS: dict[int, tuple[int, ...]] = {
    Res.TOPIC: (Op.READ, Op.WRITE, Op.CREATE, Op.DELETE, Op.ALTER, Op.DESCRIBE,
                Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS),
    Res.GROUP: (Op.READ, Op.DESCRIBE, Op.DELETE),
    Res.CLUSTER: (Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS,
                  Op.IDEMPOTENT_WRITE, Op.ALTER, Op.DESCRIBE),
}

Decide = Callable[[RequestContext, int, str, int], bool]


def report_operations(handlers: dict[int, Handler], decide: Decide) -> None:
    """Fill the ``authorized_operations`` bit fields clients ask for (Metadata topics and
    cluster, DescribeCluster, DescribeGroups, ConsumerGroupDescribe) with the operations
    ``decide`` allows, as Kafka's AuthHelper.authorizedOperations (every supported
    operation when no authorizer is configured)."""
    def bits(ctx: RequestContext, rt: int, name: str) -> int:
        return sum(1 << op for op in _SUPPORTED_OPS[rt] if decide(ctx, rt, name, op))

    inner = dict(handlers)

    async def metadata(ctx: RequestContext, version: int, req: Any) -> Any:
        resp = await _call(inner[3], ctx, version, req)
        if version >= 8 and req.include_topic_authorized_operations:
            for t in resp.topics:
                if not t.error_code:
                    t.topic_authorized_operations = bits(ctx, Res.TOPIC, t.name)
        if 8 <= version <= 10 and req.include_cluster_authorized_operations:
            resp.cluster_authorized_operations = bits(ctx, Res.CLUSTER, CLUSTER_NAME)
        return resp

    async def describe_cluster(ctx: RequestContext, version: int, req: Any) -> Any:
        resp = await _call(inner[60], ctx, version, req)
        if req.include_cluster_authorized_operations:
            resp.cluster_authorized_operations = bits(ctx, Res.CLUSTER, CLUSTER_NAME)
        return resp

    def groups(api: int) -> Handler:
        async def handler(ctx: RequestContext, version: int, req: Any) -> Any:
            resp = await _call(inner[api], ctx, version, req)
            if getattr(req, "include_authorized_operations", False):
                for g in resp.groups:
                    if not g.error_code:
                        g.authorized_operations = bits(ctx, Res.GROUP, g.group_id)
            return resp
        return handler

    wrapped: dict[int, Handler] = {3: metadata, 60: describe_cluster, 15: groups(15),
                                   69: groups(69)}
    handlers.update({k: h for k, h in wrapped.items() if k in handlers})


@dataclass(frozen=True, slots=True)
class SecurityApis:
    """The ACL, quota, delegation-token and telemetry APIs of a cluster."""

    acls: AclStore
    quotas: ClientQuotas
    tokens: DelegationTokens
    telemetry: Telemetry

    @classmethod
    def install(cls, state: ClusterState, handlers: dict[int, Handler]) -> SecurityApis:
        """Add the APIs to ``handlers`` and, with ``authorizer=True``, wrap the others with
        Kafka's authorization checks (call it once the other handlers are in)."""
        settings = state.settings
        acls = AclStore(settings.super_users, settings.allow_everyone_if_no_acl_found)
        checking = acls if settings.authorizer else None
        if checking is not None:
            handlers.update({29: acls.describe_acls, 30: acls.create_acls,
                             31: acls.delete_acls})
            enforce(state, acls, handlers)
        report_operations(handlers, acls.authorized if checking is not None
                          else lambda *_args: True)
        quotas = ClientQuotas(checking)
        tokens = DelegationTokens(
            settings.delegation_token_secret_key, settings.delegation_token_max_lifetime_ms,
            settings.delegation_token_expiry_time_ms, checking, state.now_ms)
        telemetry = Telemetry()
        handlers.update({48: quotas.describe, 49: quotas.alter,
                         38: tokens.create, 39: tokens.renew, 40: tokens.expire,
                         41: tokens.describe,
                         71: telemetry.get_subscriptions, 72: telemetry.push})
        return cls(acls, quotas, tokens, telemetry)
