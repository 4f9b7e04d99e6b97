"""Client quotas (KIP-546) — a base class of :class:`~kontrakt.clients.admin.AsyncAdminClient`,
with the Java admin client's names (``describeClientQuotas``, ``alterClientQuotas``,
``ClientQuotaEntity``, ``ClientQuotaFilter``, ``ClientQuotaAlteration``).

A quota entity is a combination of entity types (``user``, ``client-id``, ``ip``) and names,
a None name being the type's default entity (``<default>`` in kafka-configs). Quota keys are
Kafka's: ``producer_byte_rate``, ``consumer_byte_rate``, ``request_percentage``,
``controller_mutation_rate``, ``connection_creation_rate``. Both requests go to any broker
(the least loaded), which forwards alterations to the controller.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from kontrakt.clients.admin._routing import Router, error_for, finish
from kontrakt.clients.client import AsyncKafkaClient
from kontrakt.errors import InvalidArgumentError, ProtocolError
from kontrakt.protocol.messages import AlterClientQuotasRequest, DescribeClientQuotasRequest

__all__ = [
    "ClientQuotaAlteration",
    "ClientQuotaEntity",
    "ClientQuotaFilter",
    "ClientQuotaFilterComponent",
    "ClientQuotaMatchType",
    "ClientQuotaOperations",
]


class ClientQuotaEntity(Mapping[str, "str | None"]):
    """A quota entity: entity type -> name (None: the default entity of that type). Hashable
    and read-only, so that results can be keyed by it.

    Example: ``ClientQuotaEntity({"user": "alice", "client-id": None})``.

    Raises:
        InvalidArgumentError: no entries, or a type or name that is not a string.
    """

    USER = "user"
    CLIENT_ID = "client-id"
    IP = "ip"

    __slots__ = ("_entries",)

    def __init__(self, entries: Mapping[str, str | None]) -> None:
        items = dict(entries)
        if not items or any(not isinstance(k, str) or not k for k in items) or any(
                v is not None and not isinstance(v, str) for v in items.values()):
            raise InvalidArgumentError(f"a quota entity maps entity types (user, client-id, "
                                       f"ip) to names or None, got {entries!r}")
        self._entries = tuple(sorted(items.items()))

    def __getitem__(self, key: str) -> str | None:
        return dict(self._entries)[key]

    def __iter__(self) -> Iterator[str]:
        return (k for k, _ in self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __hash__(self) -> int:
        return hash(self._entries)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ClientQuotaEntity):
            return self._entries == other._entries
        return super().__eq__(other)

    def __repr__(self) -> str:
        return f"ClientQuotaEntity({dict(self._entries)!r})"


class ClientQuotaMatchType(enum.IntEnum):
    """How a filter component matches names (the protocol's numbers)."""

    EXACT = 0
    DEFAULT = 1
    ANY = 2


@dataclass(frozen=True, slots=True)
class ClientQuotaFilterComponent:
    """One entity type's condition in a :class:`ClientQuotaFilter`; build it with
    :meth:`of_entity`, :meth:`of_default_entity` or :meth:`of_entity_type`."""

    entity_type: str
    match_type: ClientQuotaMatchType
    match: str | None = None

    @classmethod
    def of_entity(cls, entity_type: str, name: str) -> ClientQuotaFilterComponent:
        """Entities whose ``entity_type`` name is ``name``."""
        return cls(entity_type, ClientQuotaMatchType.EXACT, name)

    @classmethod
    def of_default_entity(cls, entity_type: str) -> ClientQuotaFilterComponent:
        """The default entity of ``entity_type``."""
        return cls(entity_type, ClientQuotaMatchType.DEFAULT)

    @classmethod
    def of_entity_type(cls, entity_type: str) -> ClientQuotaFilterComponent:
        """Entities with any name of ``entity_type`` (the default included)."""
        return cls(entity_type, ClientQuotaMatchType.ANY)


@dataclass(frozen=True, slots=True)
class ClientQuotaFilter:
    """Which quota entities :meth:`describe_client_quotas` returns.

    ``strict``: only entities made of exactly the components' types; otherwise entities
    with more types match too.
    """

    components: tuple[ClientQuotaFilterComponent, ...] = ()
    strict: bool = False

    @classmethod
    def contains(cls, components: Iterable[ClientQuotaFilterComponent]) -> ClientQuotaFilter:
        """Entities matching every component (and maybe of more types)."""
        return cls(tuple(components), False)

    @classmethod
    def contains_only(cls, components: Iterable[ClientQuotaFilterComponent]
                      ) -> ClientQuotaFilter:
        """Entities matching every component, of no other type."""
        return cls(tuple(components), True)

    @classmethod
    def all(cls) -> ClientQuotaFilter:
        """Every entity with a quota."""
        return cls((), False)


@dataclass(frozen=True, slots=True)
class ClientQuotaAlteration:
    """Changes to one entity's quotas: quota key -> new value, or None to remove it."""

    entity: ClientQuotaEntity
    ops: Mapping[str, float | None] = field(default_factory=dict)


def _check_filter(flt: ClientQuotaFilter) -> None:
    if not isinstance(flt, ClientQuotaFilter):
        raise InvalidArgumentError(f"expected a ClientQuotaFilter, got {flt!r}")
    types = [c.entity_type for c in flt.components]
    if len(set(types)) != len(types):
        raise InvalidArgumentError(f"an entity type appears twice in the filter: {types}")
    for c in flt.components:
        if not isinstance(c, ClientQuotaFilterComponent) or not c.entity_type:
            raise InvalidArgumentError(f"not a filter component: {c!r}")
        if (c.match_type is ClientQuotaMatchType.EXACT) != isinstance(c.match, str):
            raise InvalidArgumentError(f"{c!r}: an EXACT match needs a name, the others none")


def _check_alterations(items: list[ClientQuotaAlteration]) -> None:
    seen: set[ClientQuotaEntity] = set()
    for a in items:
        if not isinstance(a, ClientQuotaAlteration) or not isinstance(a.entity,
                                                                       ClientQuotaEntity):
            raise InvalidArgumentError(f"expected ClientQuotaAlteration(ClientQuotaEntity, "
                                       f"ops), got {a!r}")
        if a.entity in seen:
            raise InvalidArgumentError(f"{a.entity!r} is altered twice")
        seen.add(a.entity)
        for key, value in a.ops.items():
            if not isinstance(key, str) or not key:
                raise InvalidArgumentError(f"{a.entity!r}: quota keys are non-empty strings, "
                                           f"got {key!r}")
            if value is not None and (isinstance(value, bool) or not isinstance(
                    value, (int, float)) or not math.isfinite(value) or value <= 0):
                raise InvalidArgumentError(f"{a.entity!r}: quota {key} must be a finite "
                                           f"number > 0 (None removes it), got {value!r}")


def _entity(parts: Iterable[Any]) -> ClientQuotaEntity:
    return ClientQuotaEntity({p.entity_type: p.entity_name for p in parts})


class ClientQuotaOperations:
    """Client-quota operations (see the module doc)."""

    _client: AsyncKafkaClient
    _router: Router

    async def describe_client_quotas(
            self, filter: ClientQuotaFilter | None = None, *,
            timeout: float | None = None) -> dict[ClientQuotaEntity, dict[str, float]]:
        """The quotas of the entities ``filter`` matches (default: every entity).

        Returns:
            entity -> quota key -> value.

        Raises:
            InvalidArgumentError: not a ClientQuotaFilter, an entity type twice, or an
                EXACT component without a name; nothing is sent.
            BrokerResponseError: the broker refused (e.g. InvalidRequestError for an
                unknown entity type, ClusterAuthorizationFailedError).
            KafkaTimeoutError: no answer within ``timeout`` (default
                ``default.api.timeout.ms``), retries included.
        """
        flt = filter if filter is not None else ClientQuotaFilter.all()
        _check_filter(flt)
        req = DescribeClientQuotasRequest
        components = [req.ComponentData(entity_type=c.entity_type, match_type=int(c.match_type),
                                        match=c.match) for c in flt.components]
        deadline = self._router.deadline(timeout)
        await self._client.start()

        async def attempt() -> dict[ClientQuotaEntity, dict[str, float]]:
            resp = await self._router.exchange(
                self._client.least_loaded_node(), req,
                lambda ver: req(components=components, strict=flt.strict), deadline)
            if resp.error_code:
                raise error_for(resp.error_code, resp.error_message, "describe_client_quotas")
            return {_entity(e.entity): {v.key: v.value for v in e.values}
                    for e in resp.entries or []}

        return await self._router.call(attempt, deadline)

    async def alter_client_quotas(
            self, alterations: Iterable[ClientQuotaAlteration], *, validate_only: bool = False,
            timeout: float | None = None,
            return_exceptions: bool = False) -> dict[ClientQuotaEntity, None]:
        """Set or remove quotas of entities.

        Args:
            validate_only: have the broker check the alterations without applying them.

        Returns:
            entity -> None for each entity altered.

        Raises:
            InvalidArgumentError: not ClientQuotaAlteration values, an entity twice, an
                empty key, or a value that is not a finite number > 0; nothing is sent.
            BrokerResponseError: the only entity's alteration failed (e.g.
                InvalidRequestError for an unknown quota key); several entities:
                PartialFailureError (or the errors in the dict with ``return_exceptions``).
            KafkaTimeoutError: no answer within ``timeout``.
        """
        items = list(alterations)
        _check_alterations(items)
        req = AlterClientQuotasRequest
        entries = [req.EntryData(
            entity=[req.EntryData.EntityData(entity_type=k, entity_name=v)
                    for k, v in a.entity.items()],
            ops=[req.EntryData.OpData(key=k, value=float(v) if v is not None else 0.0,
                                      remove=v is None) for k, v in a.ops.items()])
            for a in items]
        deadline = self._router.deadline(timeout)
        await self._client.start()

        async def attempt() -> dict[ClientQuotaEntity, Any]:
            resp = await self._router.exchange(
                self._client.least_loaded_node(), req,
                lambda ver: req(entries=entries, validate_only=validate_only), deadline)
            out: dict[ClientQuotaEntity, Any] = {}
            for e in resp.entries:
                entity = _entity(e.entity)
                out[entity] = error_for(e.error_code, e.error_message, repr(entity)) \
                    if e.error_code else None
            missing = [a.entity for a in items if a.entity not in out]
            if missing:
                raise ProtocolError(f"alter_client_quotas: no result for {missing}")
            return out

        # Setting or removing a value twice ends the same: an attempt without an answer is
        # repeated; per-entity errors are final.
        results = await self._router.call(attempt, deadline)
        return finish(results, "alter_client_quotas", return_exceptions)
