"""Topic administration: CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs,
AlterConfigs and IncrementalAlterConfigs (topics; broker configs are described read-only)."""

from __future__ import annotations

import uuid
from typing import Any

from kontrakt.protocol import errors as E
from kontrakt.protocol.messages import (
    AlterConfigsResponse,
    CreatePartitionsResponse,
    CreateTopicsResponse,
    DeleteTopicsResponse,
    DescribeConfigsResponse,
    IncrementalAlterConfigsResponse,
)
from kontrakt.protocol.spec import Response
from kontrakt.testing._cluster._state import (
    TOPIC_CONFIG_DEFAULTS,
    ClusterState,
    RequestContext,
    Topic,
    config_type,
    validate_topic_config,
)

__all__ = ["TopicHandlers"]

_TOPIC, _BROKER = 2, 4
# DescribeConfigs config_source values
_DYNAMIC_TOPIC, _STATIC_BROKER, _DEFAULT = 1, 4, 5
_SET, _DELETE, _APPEND, _SUBTRACT = 0, 1, 2, 3
_ZERO_UUID = uuid.UUID(int=0)


class TopicHandlers:
    """Request handlers for topic administration."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state

    def create_topics(self, ctx: RequestContext, version: int, req: Any) -> Response:
        st = self.state
        cr = CreateTopicsResponse
        names = [t.name for t in req.topics]
        results = []
        for t in req.topics:
            error, message = self._check_create(t, names)
            if error:
                results.append(cr.CreatableTopicResult(name=t.name, error_code=error,
                                                       error_message=message))
                continue
            configs = {c.name: c.value for c in t.configs if c.value is not None}
            assignments = [list(a.broker_ids) for a in sorted(
                t.assignments, key=lambda a: a.partition_index)] or None
            count = len(assignments) if assignments else (
                t.num_partitions if t.num_partitions > 0 else st.settings.num_partitions)
            rf = len(assignments[0]) if assignments else (
                t.replication_factor if t.replication_factor > 0
                else min(st.settings.default_replication_factor, len(st.brokers)))
            topic_id = _ZERO_UUID
            if not req.validate_only:
                topic = st.create_topic(t.name, count, rf, configs, assignments)
                topic_id = topic.topic_id
            described = None
            if version >= 5:
                described = [cr.CreatableTopicResult.CreatableTopicConfigs(
                    name=name, value=value, read_only=False, config_source=source,
                    is_sensitive=False)
                    for name, value, source in _topic_entries(configs, None)]
            results.append(cr.CreatableTopicResult(
                name=t.name, topic_id=topic_id, error_code=0, num_partitions=count,
                replication_factor=rf, configs=described))
        return cr(topics=results)

    def _check_create(self, t: Any, names: list[str]) -> tuple[int, str | None]:
        st = self.state
        if names.count(t.name) > 1:
            return E.InvalidRequestError.code, f"Create topics request has {t.name} twice"
        bad = st.check_topic_name(t.name)
        if bad:
            return E.InvalidTopicError.code, bad
        if t.name in st.topics:
            return E.TopicAlreadyExistsError.code, f"Topic '{t.name}' already exists."
        if t.assignments:
            if t.num_partitions != -1 or t.replication_factor != -1:
                return (E.InvalidRequestError.code, "Both numPartitions or replicationFactor "
                        "and replicasAssignments were set. Both cannot be used at the same time.")
            for a in t.assignments:
                if not a.broker_ids or any(b not in st.brokers for b in a.broker_ids) \
                        or len(set(a.broker_ids)) != len(a.broker_ids):
                    return E.InvalidReplicaAssignmentError.code, \
                        f"Invalid replica assignment {list(a.broker_ids)}"
        if t.num_partitions == 0 or t.num_partitions < -1:
            return E.InvalidPartitionsError.code, "Number of partitions must be larger than 0."
        if t.replication_factor == 0 or t.replication_factor < -1:
            return (E.InvalidReplicationFactorError.code,
                    "Replication factor must be larger than 0.")
        if t.replication_factor > len(st.live_brokers()):
            return (E.InvalidReplicationFactorError.code,
                    f"Replication factor: {t.replication_factor} larger than available "
                    f"brokers: {len(st.live_brokers())}.")
        for c in t.configs:
            why = validate_topic_config(c.name, c.value)
            if why:
                return E.InvalidConfigError.code, why
        return 0, None

    def delete_topics(self, ctx: RequestContext, version: int, req: Any) -> Response:
        st = self.state
        dr = DeleteTopicsResponse
        wanted: list[tuple[str | None, uuid.UUID]] = (
            [(t.name, t.topic_id) for t in req.topics] if version >= 6
            else [(n, _ZERO_UUID) for n in req.topic_names])
        results = []
        for name, topic_id in wanted:
            topic = st.topics.get(name) if name else st.topics_by_id.get(topic_id)
            if topic is None:
                code = E.UnknownTopicOrPartitionError.code if name else E.UnknownTopicIdError.code
                results.append(dr.DeletableTopicResult(name=name, topic_id=topic_id,
                                                       error_code=code))
                continue
            st.delete_topic(topic)
            st.groups.topic_deleted(topic.name)
            results.append(dr.DeletableTopicResult(
                name=topic.name, topic_id=topic.topic_id if version >= 6 else _ZERO_UUID,
                error_code=0))
        st.notify()
        return dr(responses=results)

    def create_partitions(self, ctx: RequestContext, version: int, req: Any) -> Response:
        st = self.state
        cr = CreatePartitionsResponse
        results = []
        for t in req.topics:
            topic = st.topics.get(t.name)
            error, message = 0, None
            if topic is None:
                error, message = (E.UnknownTopicOrPartitionError.code,
                                  f"The topic '{t.name}' does not exist.")
            elif t.count <= len(topic.partitions):
                error, message = (E.InvalidPartitionsError.code,
                                  f"Topic currently has {len(topic.partitions)} partitions, "
                                  f"which is higher than the requested {t.count}.")
            elif t.assignments is not None and (
                    len(t.assignments) != t.count - len(topic.partitions)
                    or any(not a.broker_ids or any(b not in st.brokers for b in a.broker_ids)
                           for a in t.assignments)):
                error, message = E.InvalidReplicaAssignmentError.code, "Invalid assignments"
            if not error and topic is not None and not req.validate_only:
                assignments = ([list(a.broker_ids) for a in t.assignments]
                               if t.assignments is not None else None)
                st.add_partitions(topic, t.count, len(topic.replicas[0]), assignments)
            results.append(cr.CreatePartitionsTopicResult(name=t.name, error_code=error,
                                                          error_message=message))
        return cr(results=results)

    # --- configs ----------------------------------------------------------------------------
    def describe_configs(self, ctx: RequestContext, version: int, req: Any) -> Response:
        st = self.state
        dr = DescribeConfigsResponse
        ecls = dr.DescribeConfigsResult.DescribeConfigsResourceResult
        results = []
        for r in req.resources:
            entries: list[tuple[str, str | None, int]] = []
            error, message = 0, None
            if r.resource_type == _TOPIC:
                topic = st.topics.get(r.resource_name)
                if topic is None:
                    error, message = (E.UnknownTopicOrPartitionError.code,
                                      f"Topic {r.resource_name} does not exist")
                else:
                    entries = _topic_entries(topic.configs, r.configuration_keys)
            elif r.resource_type == _BROKER:
                if r.resource_name and r.resource_name != str(ctx.node_id):
                    error, message = (E.InvalidRequestError.code,
                                      f"Unexpected broker id {r.resource_name}")
                else:
                    entries = [(k, v, _STATIC_BROKER)
                               for k, (v, _t) in st.settings.broker_configs().items()
                               if r.configuration_keys is None or k in r.configuration_keys]
            else:
                error, message = (E.InvalidRequestError.code,
                                  f"Unsupported resource type {r.resource_type}")
            configs = [ecls(
                name=name, value=value, read_only=r.resource_type == _BROKER,
                config_source=source if version >= 1 else -1,
                is_default=source == _DEFAULT and version == 0, is_sensitive=False,
                synonyms=[ecls.DescribeConfigsSynonym(name=name, value=value, source=source)]
                if version >= 1 and req.include_synonyms else [],
                config_type=_type_of(r.resource_type, name, st) if version >= 3 else 0)
                for name, value, source in entries]
            results.append(dr.DescribeConfigsResult(
                error_code=error, error_message=message, resource_type=r.resource_type,
                resource_name=r.resource_name, configs=configs))
        return dr(results=results)

    def alter_configs(self, ctx: RequestContext, version: int, req: Any) -> Response:
        ar = AlterConfigsResponse
        out = []
        for r in req.resources:
            error, message, topic = self._alterable(r)
            new: dict[str, str] = {}
            if not error:
                for c in r.configs:
                    why = validate_topic_config(c.name, c.value)
                    if why:
                        error, message = E.InvalidConfigError.code, why
                        break
                    if c.value is not None:
                        new[c.name] = c.value
            if not error and topic is not None and not req.validate_only:
                topic.configs = new
                self.state.topic_changed(topic)
            out.append(ar.AlterConfigsResourceResponse(
                error_code=error, error_message=message, resource_type=r.resource_type,
                resource_name=r.resource_name))
        return ar(responses=out)

    def incremental_alter_configs(self, ctx: RequestContext, version: int,
                                  req: Any) -> Response:
        ir = IncrementalAlterConfigsResponse
        out = []
        for r in req.resources:
            error, message, topic = self._alterable(r)
            new = dict(topic.configs) if topic is not None else {}
            if not error and topic is not None:
                for c in r.configs:
                    error, message = _apply(new, topic, c)
                    if error:
                        break
            if not error and topic is not None and not req.validate_only:
                topic.configs = new
                self.state.topic_changed(topic)
            out.append(ir.AlterConfigsResourceResponse(
                error_code=error, error_message=message, resource_type=r.resource_type,
                resource_name=r.resource_name))
        return ir(responses=out)

    def _alterable(self, r: Any) -> tuple[int, str | None, Topic | None]:
        if r.resource_type != _TOPIC:
            return (E.InvalidRequestError.code,
                    f"Altering resource type {r.resource_type} is not supported here", None)
        topic = self.state.topics.get(r.resource_name)
        if topic is None:
            return (E.UnknownTopicOrPartitionError.code,
                    f"Topic {r.resource_name} does not exist", None)
        return 0, None, topic


def _apply(new: dict[str, str], topic: Topic, c: Any) -> tuple[int, str | None]:
    """Apply one IncrementalAlterConfigs operation to ``new``."""
    why = validate_topic_config(c.name, c.value if c.config_operation == _SET else None)
    if why:
        return E.InvalidConfigError.code, why
    op = c.config_operation
    if op == _SET:
        if c.value is None:
            return E.InvalidRequestError.code, f"Null value not supported for {c.name}"
        new[c.name] = c.value
    elif op == _DELETE:
        new.pop(c.name, None)
    elif op in (_APPEND, _SUBTRACT):
        if config_type(c.name) != 7:
            return (E.InvalidConfigError.code,
                    f"Config value append/subtract is not allowed for config key {c.name}")
        current = [v for v in (new.get(c.name) or topic.config(c.name)).split(",") if v]
        items = [v for v in (c.value or "").split(",") if v]
        if op == _APPEND:
            current += [v for v in items if v not in current]
        else:
            current = [v for v in current if v not in items]
        value = ",".join(current)
        why = validate_topic_config(c.name, value) if value else None
        if why:
            return E.InvalidConfigError.code, why
        new[c.name] = value
    else:
        return E.InvalidRequestError.code, f"Unknown config operation {op}"
    return 0, None


def _topic_entries(configs: dict[str, str], keys: list[str] | None
                   ) -> list[tuple[str, str | None, int]]:
    """(name, value, source) of a topic's configs, explicit ones as DYNAMIC_TOPIC_CONFIG."""
    out: list[tuple[str, str | None, int]] = []
    for name, (default, _t) in sorted(TOPIC_CONFIG_DEFAULTS.items()):
        if keys is not None and name not in keys:
            continue
        if name in configs:
            out.append((name, configs[name], _DYNAMIC_TOPIC))
        else:
            out.append((name, default, _DEFAULT))
    return out


def _type_of(resource_type: int, name: str, st: ClusterState) -> int:
    if resource_type == _BROKER:
        return st.settings.broker_configs().get(name, ("", 2))[1]
    return config_type(name)
