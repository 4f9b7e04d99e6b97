"""Registry value types, error mapping and the package's public names."""

from __future__ import annotations

import pytest

import kontrakt.registry as registry
from kontrakt.errors import KontraktError, SchemaRegistryError
from kontrakt.registry import (
    CompatibilityLevel,
    Metadata,
    RegisteredSchema,
    RuleSet,
    Schema,
    SchemaReference,
    ServerConfig,
    error_from_response,
)
from kontrakt.registry._errors import _BY_CODE


def test_public_names() -> None:
    assert sorted(registry.__all__) == registry.__all__
    for name in registry.__all__:
        assert getattr(registry, name) is not None
    for name in ("SchemaRegistryClient", "AsyncSchemaRegistryClient",
                 "MockSchemaRegistryClient", "Schema", "RegisteredSchema", "SchemaReference",
                 "SchemaRegistryError", "SubjectNotFoundError", "IncompatibleSchemaError"):
        assert name in registry.__all__
    assert registry.SchemaRegistryError is SchemaRegistryError


def test_async_client_has_every_sync_method_as_coroutine() -> None:
    import inspect

    # The operations live on the client's mixins (one per area), so walk its whole MRO.
    sync_api = {n for cls in registry.SchemaRegistryClient.__mro__
                for n, f in vars(cls).items() if callable(f) and not n.startswith("_")}
    for name in sync_api - {"close", "clear_caches", "clear_latest_caches"}:
        method = getattr(registry.AsyncSchemaRegistryClient, name)
        assert inspect.iscoroutinefunction(method), name
        assert inspect.signature(method) == inspect.signature(
            getattr(registry.SchemaRegistryClient, name)), name
        assert method.__doc__ and method.__doc__ == getattr(
            registry.SchemaRegistryClient, name).__doc__, name


def test_schema_round_trip_and_hashable() -> None:
    s = Schema('"int"', "AVRO", references=[SchemaReference("a", "b", 1)],  # type: ignore[arg-type]
               metadata=Metadata(tags={"$.x": ["PII"]}, properties={"k": "v"}),
               rule_set=RuleSet(domain_rules=({"name": "r", "kind": "CONDITION"},)))
    assert Schema.from_dict(s.to_dict()) == s
    assert hash(s) == hash(Schema.from_dict(s.to_dict()))
    assert s.to_dict()["references"] == [{"name": "a", "subject": "b", "version": 1}]
    assert "schemaType" not in Schema('"int"').to_dict()
    assert Schema("{}", "JSON").to_dict()["schemaType"] == "JSON"
    reg = RegisteredSchema(3, s, "subj", 2, "g")
    assert RegisteredSchema.from_dict(reg.to_dict()) == reg
    # A bare {"id": n} answer keeps the caller's schema.
    assert RegisteredSchema.from_dict({"id": 4}, s).schema is s


def test_server_config_shapes() -> None:
    cfg = ServerConfig(compatibility=CompatibilityLevel.FULL, normalize=True)
    assert cfg.to_dict() == {"compatibility": "FULL", "normalize": True}
    got = ServerConfig.from_dict({"compatibilityLevel": "backward_transitive"})
    assert got.compatibility_level is CompatibilityLevel.BACKWARD_TRANSITIVE
    with pytest.raises(ValueError):
        ServerConfig.from_dict({"compatibility": "SIDEWAYS"})


@pytest.mark.parametrize("code", sorted(_BY_CODE))
def test_every_known_code_maps_to_its_class(code: int) -> None:
    status = 409 if code in (409, 40901) else int(str(code)[:3])
    exc = error_from_response(status, {"error_code": code, "message": "m"})
    assert type(exc) is _BY_CODE[code]
    assert isinstance(exc, SchemaRegistryError) and isinstance(exc, KontraktError)
    assert (exc.http_status_code, exc.error_code, exc.error_message) == (status, code, "m")


def test_unknown_codes_and_bodies() -> None:
    exc = error_from_response(500, {"error_code": 50001, "message": "store"})
    assert type(exc) is SchemaRegistryError and exc.error_code == 50001
    exc = error_from_response(502, "<html>")
    assert exc.error_code == -1 and "<html>" in exc.error_message
    assert type(error_from_response(409, None)) is registry.IncompatibleSchemaError
