"""ACLs: the store, Kafka's StandardAuthorizer decision, and CreateAcls / DescribeAcls /
DeleteAcls (29-31).

Authorization is opt-in (``Cluster(authorizer=True)``); :func:`enforce` (in ``_authorize``)
wraps the request handlers with the checks Kafka's brokers make. The decision follows
``StandardAuthorizer``: super users may do anything; otherwise a DENY binding matching the
principal, host, resource and operation wins over any ALLOW; an ALLOW of READ, WRITE, DELETE
or ALTER implies DESCRIBE and one of ALTER_CONFIGS implies DESCRIBE_CONFIGS; a resource with
no binding at all is allowed only with ``allow.everyone.if.no.acl.found``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from kontrakt.protocol import errors as E
from kontrakt.protocol.messages import (
    CreateAclsResponse,
    DeleteAclsResponse,
    DescribeAclsResponse,
)
from kontrakt.protocol.spec import Response
from kontrakt.testing._cluster._state import RequestContext

__all__ = ["ANONYMOUS", "AclBinding", "AclStore", "Op", "Res"]

ANONYMOUS: Final = "User:ANONYMOUS"
CLUSTER_NAME: Final = "kafka-cluster"
_WILDCARD: Final = "*"
_WILDCARD_PRINCIPAL: Final = "User:*"


class Res:
    """Resource types (Kafka's ``ResourceType`` codes)."""

    ANY, TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN, USER = 1, 2, 3, 4, 5, 6, 7


class Op:
    """Operations (Kafka's ``AclOperation`` codes)."""

    ANY, ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 1, 2, 3, 4, 5, 6, 7, 8
    CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 9, 10, 11, 12
    CREATE_TOKENS, DESCRIBE_TOKENS, TWO_PHASE_COMMIT = 13, 14, 15


_PAT_ANY, _PAT_MATCH, _PAT_LITERAL, _PAT_PREFIXED = 1, 2, 3, 4
_PERM_ANY, _DENY, _ALLOW = 1, 2, 3
#: An ALLOW of the key also allows these (Kafka's implied operations).
_IMPLIED: Final = {
    Op.DESCRIBE: (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER),
    Op.DESCRIBE_CONFIGS: (Op.ALTER_CONFIGS,),
}


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One stored ACL."""

    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission: int

    def covers(self, resource_type: int, name: str) -> bool:
        """Whether this binding's resource pattern applies to the resource."""
        if self.resource_type != resource_type:
            return False
        if self.pattern_type == _PAT_PREFIXED:
            return name.startswith(self.resource_name)
        return self.resource_name in (name, _WILDCARD)


@dataclass(frozen=True, slots=True)
class AclFilter:
    """A DescribeAcls / DeleteAcls filter (None and ANY match everything)."""

    resource_type: int
    resource_name: str | None
    pattern_type: int
    principal: str | None
    host: str | None
    operation: int
    permission: int

    def invalid(self) -> str | None:
        """Why Kafka would reject this filter, or None."""
        if self.resource_type not in range(1, 8):
            return f"Unknown resource type {self.resource_type}"
        if self.pattern_type not in range(1, 5):
            return f"Unknown pattern type {self.pattern_type}"
        if self.operation not in range(1, 16):
            return f"Unknown operation {self.operation}"
        if self.permission not in (_PERM_ANY, _DENY, _ALLOW):
            return f"Unknown permission type {self.permission}"
        return None

    def matches(self, b: AclBinding) -> bool:
        """Kafka's ``AclBindingFilter.matches``."""
        if self.resource_type != Res.ANY and self.resource_type != b.resource_type:
            return False
        if self.pattern_type not in (_PAT_ANY, _PAT_MATCH) and \
                self.pattern_type != b.pattern_type:
            return False
        if self.resource_name is not None:
            if self.pattern_type == _PAT_MATCH:
                if b.pattern_type == _PAT_PREFIXED:
                    if not self.resource_name.startswith(b.resource_name):
                        return False
                elif b.resource_name not in (self.resource_name, _WILDCARD):
                    return False
            elif self.resource_name != b.resource_name:
                return False
        return (self.principal is None or self.principal == b.principal) and \
            (self.host is None or self.host == b.host) and \
            self.operation in (Op.ANY, b.operation) and \
            self.permission in (_PERM_ANY, b.permission)


def _binding_error(b: AclBinding) -> str | None:
    if b.resource_type not in range(2, 8):
        return f"Invalid resource type {b.resource_type} for an ACL"
    if b.pattern_type not in (_PAT_LITERAL, _PAT_PREFIXED):
        return f"Invalid pattern type {b.pattern_type} for an ACL"
    if b.operation not in range(2, 16):
        return f"Invalid operation {b.operation} for an ACL"
    if b.permission not in (_DENY, _ALLOW):
        return f"Invalid permission type {b.permission} for an ACL"
    if not b.resource_name:
        return "Resource name must not be empty"
    if b.resource_type == Res.CLUSTER and b.resource_name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    kind, sep, name = b.principal.partition(":")
    if not sep or not kind or not name:
        return f"Could not parse principal from `{b.principal}` (no colon is found " \
               f"separating principal type from principal name)"
    if not b.host:
        return "Host must not be empty (use * for every host)"
    return None


class AclStore:
    """The cluster's ACLs and the authorization decision.

    Args:
        super_users: principals (``User:name``) allowed everything.
        allow_everyone_if_no_acl_found: allow access to a resource no ACL names.
    """

    def __init__(self, super_users: tuple[str, ...] = (),
                 allow_everyone_if_no_acl_found: bool = False) -> None:
        self.bindings: dict[AclBinding, None] = {}  # insertion-ordered set
        self.super_users = frozenset(super_users)
        self.allow_everyone = allow_everyone_if_no_acl_found

    def authorized(self, ctx: RequestContext, resource_type: int, name: str, op: int) -> bool:
        """Whether the request's principal may do ``op`` on the resource."""
        principal = ctx.principal
        if principal in self.super_users:
            return True
        relevant = [b for b in self.bindings if b.covers(resource_type, name)]
        if not relevant:
            return self.allow_everyone
        mine = [b for b in relevant
                if b.principal in (principal, _WILDCARD_PRINCIPAL)
                and b.host in (ctx.client_host, _WILDCARD)]
        if any(b.permission == _DENY and b.operation in (op, Op.ALL) for b in mine):
            return False
        allowing = (op, Op.ALL, *_IMPLIED.get(op, ()))
        return any(b.permission == _ALLOW and b.operation in allowing for b in mine)

    def authorized_any(self, ctx: RequestContext, resource_type: int, op: int) -> bool:
        """Whether some resource of the type may be used for ``op`` (Kafka's
        ``authorizeByResourceType``: an ALLOW binding of the principal not cancelled by a
        DENY of the same or a covering pattern), e.g. idempotent producers with WRITE on
        any topic."""
        if ctx.principal in self.super_users:
            return True
        mine = [b for b in self.bindings if b.resource_type == resource_type
                and b.principal in (ctx.principal, _WILDCARD_PRINCIPAL)
                and b.host in (ctx.client_host, _WILDCARD) and b.operation in (op, Op.ALL)]
        denied = [b for b in mine if b.permission == _DENY]
        if any(d.resource_name == _WILDCARD and d.pattern_type == _PAT_LITERAL
               for d in denied):
            return False
        for a in mine:
            if a.permission == _ALLOW and not any(
                    (d.pattern_type == _PAT_PREFIXED and a.resource_name.startswith(
                        d.resource_name)) or (d.pattern_type == a.pattern_type
                                             and d.resource_name == a.resource_name)
                    for d in denied):
                return True
        return False

    # --- the three APIs ---------------------------------------------------------------------
    def create_acls(self, ctx: RequestContext, version: int, req: Any) -> Response:
        cr = CreateAclsResponse
        if not self.authorized(ctx, Res.CLUSTER, CLUSTER_NAME, Op.ALTER):
            return cr(results=[cr.AclCreationResult(
                error_code=E.ClusterAuthorizationFailedError.code,
                error_message="Cluster authorization failed.") for _c in req.creations])
        results = []
        for c in req.creations:
            b = AclBinding(c.resource_type, c.resource_name, c.resource_pattern_type,
                           c.principal, c.host, c.operation, c.permission_type)
            why = _binding_error(b)
            if why is None:
                self.bindings[b] = None
            results.append(cr.AclCreationResult(
                error_code=E.InvalidRequestError.code if why else 0, error_message=why))
        return cr(results=results)

    def describe_acls(self, ctx: RequestContext, version: int, req: Any) -> Response:
        dr = DescribeAclsResponse
        if not self.authorized(ctx, Res.CLUSTER, CLUSTER_NAME, Op.DESCRIBE):
            return dr(error_code=E.ClusterAuthorizationFailedError.code,
                      error_message="Cluster authorization failed.")
        f = AclFilter(req.resource_type_filter, req.resource_name_filter,
                      req.pattern_type_filter, req.principal_filter, req.host_filter,
                      req.operation, req.permission_type)
        why = f.invalid()
        if why:
            return dr(error_code=E.InvalidRequestError.code, error_message=why)
        grouped: dict[tuple[int, str, int], list[AclBinding]] = {}
        for b in self.bindings:
            if f.matches(b):
                grouped.setdefault((b.resource_type, b.resource_name, b.pattern_type),
                                   []).append(b)
        return dr(error_code=0, resources=[dr.DescribeAclsResource(
            resource_type=rt, resource_name=name, pattern_type=pt, acls=[
                dr.DescribeAclsResource.AclDescription(
                    principal=b.principal, host=b.host, operation=b.operation,
                    permission_type=b.permission) for b in bs])
            for (rt, name, pt), bs in grouped.items()])

    def delete_acls(self, ctx: RequestContext, version: int, req: Any) -> Response:
        dr = DeleteAclsResponse
        fr = dr.DeleteAclsFilterResult
        if not self.authorized(ctx, Res.CLUSTER, CLUSTER_NAME, Op.ALTER):
            return dr(filter_results=[fr(error_code=E.ClusterAuthorizationFailedError.code,
                                         error_message="Cluster authorization failed.")
                                      for _f in req.filters])
        results = []
        for rf in req.filters:
            f = AclFilter(rf.resource_type_filter, rf.resource_name_filter,
                          rf.pattern_type_filter, rf.principal_filter, rf.host_filter,
                          rf.operation, rf.permission_type)
            why = f.invalid()
            if why:
                results.append(fr(error_code=E.InvalidRequestError.code, error_message=why))
                continue
            gone = [b for b in self.bindings if f.matches(b)]
            for b in gone:
                del self.bindings[b]
            results.append(fr(error_code=0, matching_acls=[fr.DeleteAclsMatchingAcl(
                error_code=0, resource_type=b.resource_type, resource_name=b.resource_name,
                pattern_type=b.pattern_type, principal=b.principal, host=b.host,
                operation=b.operation, permission_type=b.permission) for b in gone]))
        return dr(filter_results=results)
