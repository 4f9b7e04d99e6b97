"""Client quotas (KIP-546), stored, not applied: DescribeClientQuotas (48) and
AlterClientQuotas (49) with the validation and entity matching of Kafka's controller
(``ClientQuotaControlManager``) and quota image.

An entity is a set of (type, name) pairs over ``user``, ``client-id`` (together or alone)
and ``ip`` (alone); a None name is the type's default entity. An entity whose last quota is
removed is forgotten, as Kafka does.
"""

from __future__ import annotations

import ipaddress
import math
from typing import Any, Final

from kontrakt.protocol import errors as E
from kontrakt.protocol.messages import AlterClientQuotasResponse, DescribeClientQuotasResponse
from kontrakt.protocol.spec import Response
from kontrakt.testing._cluster._acls import CLUSTER_NAME, AclStore, Op, Res
from kontrakt.testing._cluster._state import RequestContext

__all__ = ["ClientQuotas"]

_USER, _CLIENT, _IP = "user", "client-id", "ip"
#: quota key -> whether its value must be a whole number (Kafka's LONG vs DOUBLE keys)
_CLIENT_KEYS: Final = {"producer_byte_rate": True, "consumer_byte_rate": True,
                       "request_percentage": False, "controller_mutation_rate": False}
_IP_KEYS: Final = {"connection_creation_rate": True}
_EXACT, _DEFAULT, _ANY = 0, 1, 2

Entity = tuple[tuple[str, str | None], ...]  # sorted (type, name) pairs


class _Invalid(Exception):
    """INVALID_REQUEST with this message."""


def _entity(pairs: list[Any]) -> Entity:
    """The entity of a request's EntityData list, validated as Kafka's controller does."""
    if not pairs:
        raise _Invalid("Invalid empty client quota entity")
    types = [p.entity_type for p in pairs]
    if len(set(types)) != len(types):
        raise _Invalid(f"Invalid client quota entity: duplicate entity type in {types}")
    for p in pairs:
        if p.entity_type not in (_USER, _CLIENT, _IP):
            raise _Invalid(f"Unhandled client quota entity type: {p.entity_type}")
        if p.entity_type == _IP and p.entity_name is not None:
            try:
                ipaddress.ip_address(p.entity_name)
            except ValueError:
                raise _Invalid(f"{p.entity_name} is not a valid IP or resolvable host.") \
                    from None
    if _IP in types and len(types) > 1:
        raise _Invalid("Invalid quota entity combination, IP entity should not be combined "
                       "with User or ClientId entities.")
    return tuple(sorted((p.entity_type, p.entity_name) for p in pairs))


class ClientQuotas:
    """The cluster's quota store and the two APIs.

    Args:
        acls: the authorizer's store when ``authorizer=True`` (describing needs
            DESCRIBE_CONFIGS on the cluster, altering ALTER_CONFIGS), else None.
    """

    def __init__(self, acls: AclStore | None) -> None:
        self.acls = acls
        self.quotas: dict[Entity, dict[str, float]] = {}

    def _allowed(self, ctx: RequestContext, op: int) -> bool:
        return self.acls is None or self.acls.authorized(ctx, Res.CLUSTER, CLUSTER_NAME, op)

    def describe(self, ctx: RequestContext, version: int, req: Any) -> Response:
        dr = DescribeClientQuotasResponse
        if not self._allowed(ctx, Op.DESCRIBE_CONFIGS):
            return dr(error_code=E.ClusterAuthorizationFailedError.code,
                      error_message="Cluster authorization failed.", entries=None)
        try:
            wanted = self._components(req.components)
        except _Invalid as exc:
            return dr(error_code=E.InvalidRequestError.code, error_message=str(exc),
                      entries=None)
        entries = []
        for entity, values in self.quotas.items():
            names = dict(entity)
            if req.strict and set(names) != set(wanted):
                continue
            if all(t in names and (kind == _ANY or names[t] == match)
                   for t, (kind, match) in wanted.items()):
                entries.append(dr.EntryData(
                    entity=[dr.EntryData.EntityData(entity_type=t, entity_name=n)
                            for t, n in entity],
                    values=[dr.EntryData.ValueData(key=k, value=v)
                            for k, v in sorted(values.items())]))
        return dr(error_code=0, entries=entries)

    @staticmethod
    def _components(components: list[Any]) -> dict[str, tuple[int, str | None]]:
        wanted: dict[str, tuple[int, str | None]] = {}
        for c in components:
            if c.entity_type in wanted:
                raise _Invalid(f"Entity type {c.entity_type} cannot appear more than once "
                               f"in the filter.")
            if c.entity_type not in (_USER, _CLIENT, _IP):
                raise _Invalid(f"Custom entity type {c.entity_type} not supported")
            if c.match_type == _EXACT and c.match is None:
                raise _Invalid(f"Request specified MATCH_TYPE_EXACT, but set match string "
                               f"to null for {c.entity_type}")
            if c.match_type not in (_EXACT, _DEFAULT, _ANY):
                raise _Invalid(f"Unknown match type: {c.match_type}")
            wanted[c.entity_type] = (c.match_type, None if c.match_type == _DEFAULT
                                     else c.match)
        if _IP in wanted and len(wanted) > 1:
            raise _Invalid("Invalid entity filter component combination, IP filter "
                           "component should not be used with user or clientId filter "
                           "component.")
        return wanted

    def alter(self, ctx: RequestContext, version: int, req: Any) -> Response:
        ar = AlterClientQuotasResponse
        allowed = self._allowed(ctx, Op.ALTER_CONFIGS)
        results = []
        for entry in req.entries:
            code, message = 0, None
            try:
                if not allowed:
                    code, message = (E.ClusterAuthorizationFailedError.code,
                                     "Cluster authorization failed.")
                else:
                    entity = _entity(entry.entity)
                    changes = self._changes(entity, entry.ops)
                    if not req.validate_only:
                        values = self.quotas.setdefault(entity, {})
                        for key, value in changes.items():
                            if value is None:
                                values.pop(key, None)
                            else:
                                values[key] = value
                        if not values:
                            del self.quotas[entity]
            except _Invalid as exc:
                code, message = E.InvalidRequestError.code, str(exc)
            results.append(ar.EntryData(error_code=code, error_message=message, entity=[
                ar.EntryData.EntityData(entity_type=e.entity_type, entity_name=e.entity_name)
                for e in entry.entity]))
        return ar(entries=results)

    @staticmethod
    def _changes(entity: Entity, ops: list[Any]) -> dict[str, float | None]:
        keys = _IP_KEYS if entity[0][0] == _IP else _CLIENT_KEYS
        changes: dict[str, float | None] = {}
        for op in ops:
            if op.key in changes:
                raise _Invalid(f"Duplicate quota key {op.key} not updating quota for {entity}")
            whole = keys.get(op.key)
            if whole is None:
                raise _Invalid(f"Invalid configuration key {op.key}")
            if not op.remove and (not math.isfinite(op.value) or (
                    whole and op.value != int(op.value))):
                raise _Invalid(f"Invalid value {op.value} for {op.key}"
                               + (": an integer is expected" if whole else ""))
            changes[op.key] = None if op.remove else op.value
        return changes
