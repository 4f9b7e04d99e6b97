"""TLS listeners: Kontrakt and confluent-kafka produce and consume over TLS against a Cluster
given a server context (neither Tansu nor the mock cluster speaks TLS). Certificates are made
by the ``openssl`` command: a CA and a server certificate for 127.0.0.1 signed by it."""

from __future__ import annotations

import ssl
import time
from pathlib import Path

import pytest

from kontrakt import Consumer, Producer
from kontrakt._types import TopicPartition as TP
from kontrakt.errors import KafkaConnectionError
from kontrakt.protocol.messages import ApiVersionsRequest
from kontrakt.testing import Cluster, send_request
from tests._certs import make_ca_and_server


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_ca_and_server(tmp_path_factory.mktemp("tls"))


def test_clients_produce_and_consume_over_tls(certs: Path, topic: str) -> None:
    import confluent_kafka

    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(certs / "server.pem", certs / "server.key")
    with Cluster(2, ssl_context=context) as cluster:
        cluster.create_topic(topic, partitions=2)
        bs = cluster.bootstrap_servers
        tls = {"security_protocol": "SSL", "ssl_ca_location": str(certs / "ca.pem")}
        with Producer(bootstrap_servers=bs, **tls) as p:
            assert p.send_and_wait(topic, b"kontrakt", partition=0).offset == 0
        cp = confluent_kafka.Producer({"bootstrap.servers": bs, "security.protocol": "SSL",
                                       "ssl.ca.location": str(certs / "ca.pem"),
                                       "log_level": 3})
        cp.produce(topic, b"confluent", partition=1)
        assert cp.flush(10) == 0
        with Consumer(bootstrap_servers=bs, auto_offset_reset="earliest", **tls) as c:
            c.assign([TP(topic, 0), TP(topic, 1)])
            got = []
            deadline = time.monotonic() + 10
            while len(got) < 2 and time.monotonic() < deadline:
                r = c.poll(0.2)
                if r is not None:
                    got.append(r.value)
        assert sorted(got) == [b"confluent", b"kontrakt"]
        # A plaintext request gets no answer: the listener only speaks TLS.
        with pytest.raises(KafkaConnectionError):
            send_request(bs.split(",")[0], ApiVersionsRequest(), 3, timeout=5)
        assert cluster.end_offsets(topic) == [1, 1]
