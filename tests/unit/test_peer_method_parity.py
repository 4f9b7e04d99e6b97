"""``set_sasl_credentials`` without a broker: what it refuses, and that the next login of
each mechanism uses the new pair (read through a fake connection that records the
SaslAuthenticate bytes)."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest

from kontrakt import AsyncAdminClient, AsyncConsumer, AsyncProducer
from kontrakt.clients._net.security import PlainAuthenticator, ScramAuthenticator
from kontrakt.errors import ConfigError

BOOTSTRAP = "127.0.0.1:1"
SASL = {"bootstrap.servers": BOOTSTRAP, "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN", "sasl.username": "u", "sasl.password": "p"}


def _clients(conf: dict[str, Any]) -> list[Any]:
    return [AsyncProducer(conf), AsyncConsumer(conf, group_id=None), AsyncAdminClient(conf)]


def test_without_sasl_it_is_refused() -> None:
    for client in _clients({"bootstrap.servers": BOOTSTRAP}):
        with pytest.raises(ConfigError, match=r"PLAIN and SCRAM only.*security.protocol="
                                              r"PLAINTEXT"):
            client.set_sasl_credentials("u", "p")


def test_oauthbearer_has_no_password_to_set() -> None:
    conf = {**SASL, "sasl.mechanism": "OAUTHBEARER",
            "oauth_cb": lambda _s: ("t", time.time() + 60)}
    del conf["sasl.username"], conf["sasl.password"]
    for client in _clients(conf):
        with pytest.raises(ConfigError, match=r"sasl\.mechanism=OAUTHBEARER"):
            client.set_sasl_credentials("u", "p")


@pytest.mark.parametrize(("username", "password"), [(b"u", "p"), ("u", None), ("u", 1)])
def test_credentials_must_be_str(username: Any, password: Any) -> None:
    for client in _clients(SASL):
        with pytest.raises(TypeError, match="two str"):
            client.set_sasl_credentials(username, password)


def test_a_closed_client_refuses_it() -> None:
    """As confluent-kafka's ("Handle has been closed", a RuntimeError there)."""
    from kontrakt.errors import IllegalStateError

    async def main() -> None:
        for client in _clients(SASL):
            await client.close()
            with pytest.raises(IllegalStateError, match="closed"):
                client.set_sasl_credentials("u", "p")

    asyncio.run(main())


class _Recorder:
    """Enough of a connection for a login: answers SaslHandshake and SaslAuthenticate, and
    keeps the auth bytes sent."""

    address = "fake:9092"

    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def negotiate(self, _request: Any) -> int:
        return 1

    async def send(self, request: Any, **_kw: Any) -> Any:
        from kontrakt.protocol.messages import SaslAuthenticateResponse, SaslHandshakeResponse

        if hasattr(request, "auth_bytes"):
            self.sent.append(bytes(request.auth_bytes))
            return SaslAuthenticateResponse(error_code=0, auth_bytes=b"",
                                            session_lifetime_ms=0)
        return SaslHandshakeResponse(error_code=0, mechanisms=["PLAIN", "SCRAM-SHA-256"])


def test_the_next_plain_login_uses_the_new_pair() -> None:
    auth = PlainAuthenticator("old", "old-pw")
    conn = _Recorder()
    asyncio.run(auth.authenticate(conn))  # type: ignore[arg-type]
    auth.set_credentials("new", "new-pw")
    asyncio.run(auth.authenticate(conn))  # type: ignore[arg-type]
    assert conn.sent == [b"\0old\0old-pw", b"\0new\0new-pw"]
    assert auth.username == "new" and "new-pw" not in repr(auth)


def test_the_next_scram_login_uses_the_new_user() -> None:
    auth = ScramAuthenticator("SCRAM-SHA-256", "old", "old-pw")
    auth.set_credentials("new", "new-pw")
    conn = _Recorder()
    with pytest.raises(Exception):  # noqa: B017 - the fake server's first answer is empty
        asyncio.run(auth.authenticate(conn))  # type: ignore[arg-type]
    assert conn.sent[0].startswith(b"n,,n=new,r=")
    assert auth.username == "new"


def test_last_poll_timestamp_moves_for_partitions_an_incremental_fetch_leaves_out() -> None:
    """KIP-227: a broker's incremental answer lists only the partitions that changed; the
    others' watermarks are told as current all the same (aiokafka, which has no sessions,
    gets every partition in every answer)."""
    from kontrakt import TopicPartition
    from kontrakt.protocol.messages import FetchResponse
    from tests._crafted_broker import FakeBroker

    topic = "stamps"
    requests: list[Any] = []

    async def handle(version: int, req: Any) -> Any:
        requests.append(req)
        R = FetchResponse.FetchableTopicResponse
        if req.session_id == 0:  # the full fetch opening the session: every partition
            parts = [R.PartitionData(partition_index=p.partition, error_code=0,
                                     high_watermark=0)
                     for t in req.topics for p in t.partitions]
            return FetchResponse(session_id=77, responses=[R(topic=topic, partitions=parts)])
        await asyncio.sleep(0.02)
        return FetchResponse(session_id=77, responses=[])  # nothing changed

    async def main() -> tuple[list[int | None], list[int | None]]:
        async with FakeBroker({topic: 2}, {1: handle}) as broker:  # noqa: SIM117
            async with AsyncConsumer(bootstrap_servers=broker.bootstrap,
                                     fetch_max_wait_ms=10) as c:
                tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
                c.assign(tps)
                for tp in tps:
                    c.seek(tp, 0)
                first: list[int | None] = [None, None]
                for _ in range(100):
                    await c.getmany(timeout=0.02)
                    first = [c.last_poll_timestamp(tp) for tp in tps]
                    if None not in first:
                        break
                await asyncio.sleep(0.05)
                for _ in range(5):
                    await c.getmany(timeout=0.02)
                return first, [c.last_poll_timestamp(tp) for tp in tps]

    first, later = asyncio.run(main())
    assert any(r.session_id == 77 for r in requests)  # incremental fetches were made
    assert None not in first and None not in later
    assert all(b > a for a, b in zip(first, later, strict=True))  # type: ignore[operator]


def test_topics_leaves_out_internal_topics_unless_told_not_to() -> None:
    from tests._crafted_broker import FakeBroker

    def metadata(version: int, req: Any) -> Any:
        resp: Any = broker._metadata(req)
        for t in resp.topics:
            t.is_internal = t.name == "__consumer_offsets"
        return resp

    broker = FakeBroker({"orders": 1, "__consumer_offsets": 1}, {3: metadata})

    async def main() -> list[set[str]]:
        async with broker:
            found = []
            for exclude in (True, False):
                async with AsyncConsumer(bootstrap_servers=broker.bootstrap, group_id=None,
                                         exclude_internal_topics=exclude) as c:
                    found.append(await c.topics())
            return found

    assert asyncio.run(main()) == [{"orders"}, {"orders", "__consumer_offsets"}]


@pytest.mark.parametrize(("metadata_version", "expected"), [(12, "crafted"), (1, None)])
def test_cluster_id_is_none_where_the_brokers_report_none(metadata_version: int,
                                                          expected: str | None) -> None:
    """Metadata v2 brought the cluster id (KIP-78); librdkafka answers None before it."""
    from tests._crafted_broker import FakeBroker

    def metadata(version: int, req: Any) -> Any:
        resp: Any = broker._metadata(req)
        if version < 2:  # fields the older layouts do not have
            resp.cluster_id = None
            for t in resp.topics:
                t.topic_id = uuid.UUID(int=0)
                for p in t.partitions:
                    p.leader_epoch = -1
        return resp

    broker = FakeBroker({"t": 1}, {3: metadata}, versions={3: (0, metadata_version)})

    async def main() -> list[str | None]:
        async with broker:  # noqa: SIM117 - the clients need its port
            async with AsyncConsumer(bootstrap_servers=broker.bootstrap, group_id=None) as c, \
                    AsyncAdminClient(bootstrap_servers=broker.bootstrap) as a:
                return [await c.cluster_id(5), await a.cluster_id()]

    assert asyncio.run(main()) == [expected, expected]
