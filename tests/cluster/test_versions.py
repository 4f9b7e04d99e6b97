"""Every API the cluster serves answers every version it advertises: a default request of
each (API, version) gets a response that decodes, never a dropped connection or an internal
error. Catches fields set on a response that an old or new version cannot carry."""

from __future__ import annotations

import socket
import struct

import pytest

from kontrakt.errors import IllegalStateError, InvalidArgumentError
from kontrakt.protocol import errors as E
from kontrakt.protocol import messages as _messages  # noqa: F401  (fills the registry)
from kontrakt.protocol.headers import decode_response, encode_request
from kontrakt.protocol.messages import ApiVersionsRequest, ApiVersionsResponse
from kontrakt.protocol.spec import registry
from kontrakt.testing import BrokerStartError, Cluster, free_port, send_request


def test_every_advertised_version_of_every_api_answers(cluster: Cluster) -> None:
    cluster.create_topic("t", partitions=2)
    address = cluster.bootstrap_servers.split(",")[0]
    offered = send_request(address, ApiVersionsRequest(), 3).api_keys
    assert len(offered) >= 30
    specs = registry()
    answered = 0
    for api in offered:
        request_class = specs[api.api_key].request_class
        for version in range(api.min_version, api.max_version + 1):
            if api.api_key == 0:
                continue  # acks=0 by default: no response by design (tested elsewhere)
            send_request(address, request_class(), version, timeout=5)
            answered += 1
    assert cluster.internal_errors() == []
    assert answered > 150


def test_unknown_api_versions_version_is_answered_in_v0(cluster: Cluster) -> None:
    """Kafka answers an ApiVersions version it does not know with UNSUPPORTED_VERSION in v0,
    listing its versions, so a client can downgrade."""
    host, port = cluster.broker_address(1)
    frame = bytearray(encode_request(ApiVersionsRequest(), 3, 5))
    struct.pack_into(">h", frame, 6, 99)  # the header's api_version
    with socket.create_connection((host, port), timeout=5) as s:
        s.sendall(frame)
        size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
        body = s.recv(size, socket.MSG_WAITALL)
    corr, resp = decode_response(ApiVersionsResponse, 0, body)
    assert corr == 5 and resp.error_code == E.UnsupportedVersionError.code and resp.api_keys


@pytest.mark.parametrize("num_brokers", [1, 5])
def test_cluster_sizes(num_brokers: int) -> None:
    with Cluster(num_brokers) as c:
        assert len(c.bootstrap_servers.split(",")) == num_brokers
    assert c.closed


def test_fixed_ports_and_a_taken_port() -> None:
    with Cluster(2) as first:
        port = first.broker_address(2)[1]
        with pytest.raises(BrokerStartError):
            Cluster(2, ports={1: port}).start()
    with Cluster(1, ports={1: port}) as again:  # free again once the first closed
        assert again.bootstrap_servers == f"127.0.0.1:{port}"
    with pytest.raises(IllegalStateError):
        again.start()
    with pytest.raises(InvalidArgumentError):
        Cluster(0)


def test_a_failed_start_leaves_no_listener_open() -> None:
    with Cluster(1) as first:
        taken = first.broker_address(1)[1]
        own = free_port()
        probe = Cluster(2, ports={1: own, 2: taken})
        with pytest.raises(BrokerStartError):
            probe.start()
        # Broker 1 of the failed cluster had opened its port: it is closed again.
        with socket.socket() as s:
            s.bind(("127.0.0.1", own))
