"""Admin operations on configs — a base class of
:class:`~kontrakt.clients.admin.AsyncAdminClient`: describe (DescribeConfigs), replace
(AlterConfigs) and change (IncrementalAlterConfigs) the configs of topics, brokers and
other resources, reset configs to their defaults (IncrementalAlterConfigs DELETE), and list
the resources that have configs (ListConfigResources).

Routing: a broker's own resources go to that broker (it alone knows its dynamic configs);
everything else to the least loaded broker.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kontrakt.clients.admin import _validate as v
from kontrakt.clients.admin._routing import Fatal, Router, error_for, finish
from kontrakt.clients.admin._types import (
    AlterConfigOp,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigResourceType,
    ConfigSource,
    ConfigSynonym,
    ConfigType,
)
from kontrakt.clients.client import AsyncKafkaClient
from kontrakt.errors import InvalidArgumentError, UnsupportedVersionError
from kontrakt.protocol.messages import (
    AlterConfigsRequest,
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
    ListConfigResourcesRequest,
)

__all__ = ["ConfigOperations", "config_source", "own_source"]


def _check_type(t: object) -> ConfigResourceType:
    try:
        if isinstance(t, str):
            return ConfigResourceType[t.upper()]
        if isinstance(t, int) and not isinstance(t, bool):
            return ConfigResourceType(t)
    except (KeyError, ValueError):
        pass
    raise InvalidArgumentError(f"unknown config resource type {t!r}")


def _resource_type(code: int) -> ConfigResourceType:
    try:
        return ConfigResourceType(code)
    except ValueError:
        return ConfigResourceType.UNKNOWN


class ConfigOperations:
    """Config operations (see the module doc)."""

    _client: AsyncKafkaClient
    _router: Router

    async def _by_config_node(self, resources: list[ConfigResource], send: Any) -> Any:
        """Broker resources go to that broker (it alone knows its dynamic configs);
        everything else to the least loaded broker."""
        groups: dict[int, list[ConfigResource]] = {}
        anywhere = self._client.least_loaded_node()
        for r in resources:
            per_broker = r.restype in (ConfigResourceType.BROKER,
                                       ConfigResourceType.BROKER_LOGGER) and r.name
            groups.setdefault(int(r.name) if per_broker else anywhere, []).append(r)
        return await self._router.fan_out(groups, send)

    async def list_config_resources(
            self, resource_types: Iterable[ConfigResourceType | str] | None = None, *,
            timeout: float | None = None) -> list[ConfigResource]:
        """The resources that have configs, as the least loaded broker lists them (Java's
        ``Admin.listConfigResources``, KIP-1142): e.g. client-metrics subscriptions and
        groups, which no other API enumerates.

        Args:
            resource_types: only these types (:class:`ConfigResourceType` or its name);
                None or empty: every type the broker lists. Brokers before Kafka 4.1 only
                speak ListConfigResources v0 (KIP-714's ListClientMetricsResources),
                which lists client-metrics resources alone.
            timeout: seconds for the whole call, retries included (default
                ``default.api.timeout.ms``).

        Returns:
            the resources, sorted by type and name; a type code this client does not
            know becomes ``ConfigResourceType.UNKNOWN``.

        Raises:
            InvalidArgumentError: an unknown type name (nothing is sent).
            UnsupportedVersionError: types other than CLIENT_METRICS asked of a broker
                with v0 only, or a broker without the API (before Kafka 3.7).
            ClusterAuthorizationFailedError: no DESCRIBE_CONFIGS on the cluster.
        """
        codes = sorted({int(_check_type(t)) for t in resource_types or ()})
        deadline = self._router.deadline(timeout)
        await self._client.start()
        req = ListConfigResourcesRequest

        def build(version: int) -> Any:
            if version == 0 and any(c != ConfigResourceType.CLIENT_METRICS for c in codes):
                raise UnsupportedVersionError(
                    "ListConfigResources v0 lists client-metrics resources only; the broker "
                    "has no v1 (Kafka 4.1+)")
            return req(resource_types=codes if version >= 1 else [])

        async def attempt() -> list[ConfigResource]:
            resp = await self._router.exchange(self._client.least_loaded_node(), req, build,
                                               deadline)
            if resp.error_code:
                raise error_for(resp.error_code, None, "list_config_resources")
            out = {ConfigResource(_resource_type(r.resource_type), r.resource_name)
                   for r in resp.config_resources}
            return sorted(out, key=lambda r: (int(r.restype), r.name))

        return await self._router.call(attempt, deadline)

    async def describe_configs(self, resources: Iterable[ConfigResource], *,
                               include_synonyms: bool = False,
                               include_documentation: bool = False,
                               timeout: float | None = None,
                               return_exceptions: bool = False
                               ) -> dict[ConfigResource, dict[str, ConfigEntry]]:
        """The configs of topics, brokers (by broker id as name) and other resources.

        Broker resources are asked of that broker; the rest of any broker.

        Returns:
            resource -> config name -> :class:`ConfigEntry`.

        Raises:
            InvalidArgumentError: a bad topic name or a non-numeric broker id.
            UnknownTopicOrPartitionError, TopicAuthorizationFailedError, ...: the one
                resource asked about was refused (at once: an error the broker answers for
                a resource is not retried, as in the Java client; a request that got no
                answer is, until ``timeout``).
            PartialFailureError: some of several resources failed.
        """
        items = v.unique((_check_resource(r) for r in resources), "resource")
        deadline = self._router.deadline(timeout)
        await self._client.start()
        req = DescribeConfigsRequest

        async def send(node: int, batch: list[ConfigResource]) -> dict[ConfigResource, Any]:
            resp = await self._router.exchange(node, req, lambda ver: req(
                include_synonyms=include_synonyms and ver >= 1,
                include_documentation=include_documentation and ver >= 3,
                resources=[req.DescribeConfigsResource(
                    resource_type=int(r.restype), resource_name=r.name,
                    configuration_keys=None) for r in batch]), deadline)
            out: dict[ConfigResource, Any] = {}
            for res in resp.results:
                key = ConfigResource(ConfigResourceType(res.resource_type), res.resource_name)
                if res.error_code:
                    # Final, as in the Java client: a resource's error is the broker's
                    # answer about it (UNKNOWN_TOPIC_OR_PARTITION, though retriable as a
                    # class, says the topic does not exist, not that metadata is stale).
                    out[key] = Fatal(error_for(res.error_code, res.error_message, repr(key)))
                    continue
                out[key] = {c.name: _config_entry(c) for c in res.configs}
            return out

        results = await self._router.per_entity(
            items, lambda batch: self._by_config_node(batch, send), deadline)
        return finish(results, "describe_configs", return_exceptions)

    async def alter_configs(self, configs: Mapping[ConfigResource, Mapping[str, str]], *,
                            validate_only: bool = False, timeout: float | None = None,
                            return_exceptions: bool = False) -> dict[ConfigResource, None]:
        """Replace resources' whole configuration (legacy AlterConfigs): keys left out revert
        to their defaults. Prefer :meth:`incremental_alter_configs`.

        Raises:
            InvalidArgumentError: bad resource, unknown topic config key or non-str value.
            PartialFailureError: some resources failed.
        """
        items = v.unique((_check_resource(r) for r in configs), "resource")
        for r in items:
            for key, value in configs[r].items():
                _check_config(r, key, value, allow_none=False)
        deadline = self._router.deadline(timeout)
        await self._client.start()
        req = AlterConfigsRequest

        async def send(node: int, batch: list[ConfigResource]) -> dict[ConfigResource, Any]:
            resp = await self._router.exchange(node, req, lambda ver: req(
                validate_only=validate_only,
                resources=[req.AlterConfigsResource(
                    resource_type=int(r.restype), resource_name=r.name,
                    configs=[req.AlterConfigsResource.AlterableConfig(name=k, value=val)
                             for k, val in configs[r].items()]) for r in batch]), deadline)
            return _alter_results(resp)

        results = await self._router.per_entity(
            items, lambda batch: self._by_config_node(batch, send), deadline)
        return finish(results, "alter_configs", return_exceptions)

    async def incremental_alter_configs(
            self, changes: Mapping[ConfigResource, Iterable[AlterConfigOp]], *,
            validate_only: bool = False, timeout: float | None = None,
            return_exceptions: bool = False) -> dict[ConfigResource, None]:
        """Change individual configs: SET, DELETE (revert to default), APPEND to or SUBTRACT
        from a list config.

        Raises:
            InvalidArgumentError: bad resource, unknown topic config key, a value missing
                for SET/APPEND/SUBTRACT, or the same key twice for one resource.
            PartialFailureError: some resources failed.
        """
        items = v.unique((_check_resource(r) for r in changes), "resource")
        ops: dict[ConfigResource, list[AlterConfigOp]] = {}
        for r in items:
            ops[r] = list(changes[r])
            v.unique((op.name for op in ops[r]), f"config key of {r!r}")
            for op in ops[r]:
                kind = AlterConfigOpType(op.op)
                if kind is not AlterConfigOpType.DELETE and op.value is None:
                    raise InvalidArgumentError(f"{kind.name} of {op.name!r} needs a value")
                _check_config(r, op.name, op.value, allow_none=True)
        deadline = self._router.deadline(timeout)
        await self._client.start()
        req = IncrementalAlterConfigsRequest
        cfg = req.AlterConfigsResource.AlterableConfig

        async def send(node: int, batch: list[ConfigResource]) -> dict[ConfigResource, Any]:
            resp = await self._router.exchange(node, req, lambda ver: req(
                validate_only=validate_only,
                resources=[req.AlterConfigsResource(
                    resource_type=int(r.restype), resource_name=r.name,
                    configs=[cfg(name=op.name, config_operation=int(op.op), value=op.value)
                             for op in ops[r]]) for r in batch]), deadline)
            return _alter_results(resp)

        results = await self._router.per_entity(
            items, lambda batch: self._by_config_node(batch, send), deadline)
        return finish(results, "incremental_alter_configs", return_exceptions)


    async def reset_configs(
            self, resources: Mapping[ConfigResource, Iterable[str] | None], *,
            validate_only: bool = False, timeout: float | None = None,
            return_exceptions: bool = False) -> dict[ConfigResource, tuple[str, ...]]:
        """Set configs back to their defaults: an IncrementalAlterConfigs DELETE of each
        key (kafka-python's ``reset_configs``). The value then comes from the next level
        down: a topic's from the brokers' settings, a broker's from the cluster-wide
        default, then the static config.

        Args:
            resources: resource -> the config keys to reset, or None for every config
                set at that resource itself (found with :meth:`describe_configs`: those
                whose source is the resource's own dynamic level, e.g.
                ``DYNAMIC_TOPIC_CONFIG`` for a topic, ``DYNAMIC_BROKER_CONFIG`` for
                broker ``"1"``, ``DYNAMIC_DEFAULT_BROKER_CONFIG`` for broker ``""``).
            validate_only: let the brokers check the change without making it.
            timeout: seconds for the whole call (default: the client's
                ``default.api.timeout.ms``); retriable errors are retried until then.

        Returns:
            resource -> the keys reset, sorted (empty when None found nothing to reset,
            and then nothing is sent for it).

        Raises:
            InvalidArgumentError: a bad resource or key (e.g. an unknown topic config),
                before anything is sent.
            PartialFailureError: some resources failed (describing or changing them), as
                resource -> keys or error; with one resource, its own error.
                ``return_exceptions=True`` returns the errors instead.
        """
        items = v.unique((_check_resource(r) for r in resources), "resource")
        keys: dict[ConfigResource, list[str] | None] = {}
        for r in items:
            given = resources[r]
            if given is None:
                keys[r] = None
                continue
            if isinstance(given, str):
                raise InvalidArgumentError(
                    f"config keys of {r!r} must be a collection of names, not a str")
            keys[r] = v.unique(given, f"config key of {r!r}")
            for key in keys[r] or ():
                _check_config(r, key, None, allow_none=True)
        deadline = self._router.deadline(timeout)
        results: dict[ConfigResource, Any] = {}

        every = [r for r in items if keys[r] is None]
        if every:
            described = await self.describe_configs(
                every, timeout=self._router.remaining(deadline), return_exceptions=True)
            for r in every:
                found = described[r]
                if isinstance(found, BaseException):
                    results[r] = found
                else:
                    own = own_source(r)
                    keys[r] = sorted(n for n, e in found.items() if e.source is own)

        todo = {r: ks for r in items if r not in results and (ks := keys[r])}
        if todo:
            outcome = await self.incremental_alter_configs(
                {r: [AlterConfigOp(k, None, AlterConfigOpType.DELETE) for k in ks]
                 for r, ks in todo.items()},
                validate_only=validate_only, timeout=self._router.remaining(deadline),
                return_exceptions=True)
            for r, ks in todo.items():
                results[r] = outcome[r] if isinstance(outcome[r], BaseException) \
                    else tuple(sorted(ks))
        return finish({r: results.get(r, ()) for r in items}, "reset_configs",
                      return_exceptions)


def own_source(r: ConfigResource) -> ConfigSource:
    """The source of a config set at ``r`` itself (what a DELETE there removes)."""
    if r.restype is ConfigResourceType.BROKER:
        return (ConfigSource.DYNAMIC_BROKER_CONFIG if r.name
                else ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    return {ConfigResourceType.TOPIC: ConfigSource.DYNAMIC_TOPIC_CONFIG,
            ConfigResourceType.BROKER_LOGGER: ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG,
            ConfigResourceType.CLIENT_METRICS: ConfigSource.CLIENT_METRICS_CONFIG,
            ConfigResourceType.GROUP: ConfigSource.GROUP_CONFIG}[r.restype]


def config_source(code: int) -> ConfigSource:
    """A config's source from its protocol code (UNKNOWN_CONFIG for a code this client
    does not know)."""
    try:
        return ConfigSource(code)
    except ValueError:
        return ConfigSource.UNKNOWN_CONFIG


def _config_entry(c: Any) -> ConfigEntry:
    source = config_source(c.config_source)
    # v0 has is_default; later versions say it through the source.
    is_default = bool(c.is_default) or source is ConfigSource.DEFAULT_CONFIG
    try:
        ctype = ConfigType(c.config_type)
    except ValueError:
        ctype = ConfigType.UNKNOWN
    return ConfigEntry(c.name, c.value, source, c.read_only, is_default, c.is_sensitive,
                       tuple(ConfigSynonym(s.name, s.value, config_source(s.source))
                             for s in c.synonyms), ctype, c.documentation)


def _alter_results(resp: Any) -> dict[ConfigResource, Any]:
    out: dict[ConfigResource, Any] = {}
    for r in resp.responses:
        key = ConfigResource(ConfigResourceType(r.resource_type), r.resource_name)
        out[key] = error_for(r.error_code, r.error_message, repr(key)) if r.error_code else None
    return out


def _check_resource(r: ConfigResource) -> ConfigResource:
    if not isinstance(r, ConfigResource):
        raise InvalidArgumentError(f"expected ConfigResource, got {r!r}")
    if r.restype is ConfigResourceType.TOPIC:
        v.check_topic_name(r.name)
    elif r.restype in (ConfigResourceType.BROKER, ConfigResourceType.BROKER_LOGGER):
        if r.name and not r.name.isdigit():
            raise InvalidArgumentError(
                f"a broker resource's name is its numeric id (or '' for the default), "
                f"got {r.name!r}")
    elif r.restype is ConfigResourceType.UNKNOWN:
        raise InvalidArgumentError(f"{r!r} has no resource type")
    return r


def _check_config(r: ConfigResource, key: object, value: object, *, allow_none: bool) -> None:
    if r.restype is ConfigResourceType.TOPIC:
        v.check_topic_config(r.name, key, value, allow_none=allow_none)
    elif not isinstance(key, str) or not key or key != key.strip():
        raise InvalidArgumentError(f"config key {key!r} of {r!r} is not a valid name")
    elif not (isinstance(value, str) or (value is None and allow_none)):
        raise InvalidArgumentError(f"config {key!r} of {r!r} must be a str, got {value!r}")
