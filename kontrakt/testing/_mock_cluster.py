"""librdkafka's mock Kafka cluster, driven through ctypes: several brokers and fault injection.

The mock cluster lives inside librdkafka, which the ``confluent-kafka`` wheel bundles as
``confluent_kafka.libs/librdkafka-*.so*``. Its brokers run on threads of this process and
listen on random ports of 127.0.0.1. librdkafka marks the mock API experimental; the functions
used here are checked for at load time, and the optional ones (request tracking, the array form
of error injection, per-broker error stacks) raise :class:`NotImplementedError` when the
bundled version lacks them.
"""

from __future__ import annotations

import ctypes
import glob
import os
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, ClassVar

from kontrakt.errors import IllegalStateError, InvalidArgumentError
from kontrakt.testing._util import MissingDependencyError, MockClusterError

__all__ = ["MockCluster", "MockRequest", "load_librdkafka"]

_c_void_p = ctypes.c_void_p
_c_char_p = ctypes.c_char_p
_c_int = ctypes.c_int
_c_int16 = ctypes.c_int16
_c_int32 = ctypes.c_int32
_c_int64 = ctypes.c_int64
_c_size_t = ctypes.c_size_t

# name: (restype, argtypes); None restype means void.
_REQUIRED: dict[str, tuple[Any, list[Any]]] = {
    "rd_kafka_conf_new": (_c_void_p, []),
    "rd_kafka_conf_set": (_c_int, [_c_void_p, _c_char_p, _c_char_p, _c_char_p, _c_size_t]),
    "rd_kafka_conf_destroy": (None, [_c_void_p]),
    "rd_kafka_new": (_c_void_p, [_c_int, _c_void_p, _c_char_p, _c_size_t]),
    "rd_kafka_destroy": (None, [_c_void_p]),
    "rd_kafka_err2name": (_c_char_p, [_c_int]),
    "rd_kafka_mock_cluster_new": (_c_void_p, [_c_void_p, _c_int]),
    "rd_kafka_mock_cluster_destroy": (None, [_c_void_p]),
    "rd_kafka_mock_cluster_bootstraps": (_c_char_p, [_c_void_p]),
    "rd_kafka_mock_topic_create": (_c_int, [_c_void_p, _c_char_p, _c_int, _c_int]),
    "rd_kafka_mock_partition_set_leader": (_c_int, [_c_void_p, _c_char_p, _c_int32, _c_int32]),
    "rd_kafka_mock_partition_set_follower": (_c_int, [_c_void_p, _c_char_p, _c_int32, _c_int32]),
    "rd_kafka_mock_broker_set_down": (_c_int, [_c_void_p, _c_int32]),
    "rd_kafka_mock_broker_set_up": (_c_int, [_c_void_p, _c_int32]),
    "rd_kafka_mock_broker_set_rtt": (_c_int, [_c_void_p, _c_int32, _c_int]),
    "rd_kafka_mock_coordinator_set": (_c_int, [_c_void_p, _c_char_p, _c_char_p, _c_int32]),
    "rd_kafka_mock_set_apiversion": (_c_int, [_c_void_p, _c_int16, _c_int16, _c_int16]),
    "rd_kafka_mock_clear_request_errors": (None, [_c_void_p, _c_int16]),
    "rd_kafka_mock_topic_set_error": (None, [_c_void_p, _c_char_p, _c_int]),
}
_OPTIONAL: dict[str, tuple[Any, list[Any]]] = {
    "rd_kafka_mock_push_request_errors_array":
        (None, [_c_void_p, _c_int16, _c_size_t, ctypes.POINTER(_c_int)]),
    "rd_kafka_mock_group_initial_rebalance_delay_ms": (None, [_c_void_p, _c_int32]),
    "rd_kafka_mock_set_group_consumer_heartbeat_interval_ms": (None, [_c_void_p, _c_int]),
    "rd_kafka_mock_set_group_consumer_session_timeout_ms": (None, [_c_void_p, _c_int]),
    "rd_kafka_mock_sharegroup_set_auto_offset_reset": (None, [_c_void_p, _c_int]),
    "rd_kafka_mock_sharegroup_set_heartbeat_interval": (None, [_c_void_p, _c_int]),
    "rd_kafka_mock_sharegroup_set_session_timeout": (None, [_c_void_p, _c_int]),
    "rd_kafka_mock_sharegroup_set_record_lock_duration": (None, [_c_void_p, _c_int]),
    "rd_kafka_mock_sharegroup_set_max_delivery_attempts": (None, [_c_void_p, _c_int]),
    "rd_kafka_mock_broker_set_rack": (_c_int, [_c_void_p, _c_int32, _c_char_p]),
    "rd_kafka_mock_partition_set_follower_wmarks":
        (_c_int, [_c_void_p, _c_char_p, _c_int32, _c_int64, _c_int64]),
    "rd_kafka_mock_start_request_tracking": (None, [_c_void_p]),
    "rd_kafka_mock_stop_request_tracking": (None, [_c_void_p]),
    "rd_kafka_mock_clear_requests": (None, [_c_void_p]),
    "rd_kafka_mock_get_requests": (ctypes.POINTER(_c_void_p), [_c_void_p,
                                                              ctypes.POINTER(_c_size_t)]),
    "rd_kafka_mock_request_id": (_c_int32, [_c_void_p]),
    "rd_kafka_mock_request_api_key": (_c_int16, [_c_void_p]),
    "rd_kafka_mock_request_timestamp": (_c_int64, [_c_void_p]),
    "rd_kafka_mock_request_destroy": (None, [_c_void_p]),
    "rd_kafka_mock_request_destroy_array": (None, [ctypes.POINTER(_c_void_p), _c_size_t]),
    "rd_kafka_mem_free": (None, [_c_void_p, _c_void_p]),
}
# Variadic functions get only their fixed arguments declared here; the variadic part is
# passed as C ints per call (what C's default argument promotions make of enums and ints).
_VARIADIC: dict[str, Any] = {
    "rd_kafka_mock_push_request_errors": None,
    "rd_kafka_mock_partition_push_request_errors": _c_int,
    "rd_kafka_mock_broker_push_request_error_rtts": _c_int,
}

_RD_KAFKA_PRODUCER = 0
_LIB: ctypes.CDLL | None = None
_LIB_LOCK = threading.Lock()


def _library_path() -> str:
    try:
        import confluent_kafka
    except ImportError:
        raise MissingDependencyError(
            "the librdkafka mock cluster needs the confluent-kafka package: "
            "pip install confluent-kafka (or pip install 'kontrakt[testing]')",
            package="confluent-kafka",
        ) from None
    package_dir = os.path.dirname(os.path.abspath(confluent_kafka.__file__ or ""))
    site = os.path.dirname(package_dir)
    found = sorted(glob.glob(os.path.join(site, "confluent_kafka.libs", "librdkafka*.so*")))
    found += sorted(glob.glob(os.path.join(site, "confluent_kafka.libs", "librdkafka*.dylib")))
    found += sorted(glob.glob(os.path.join(package_dir, ".dylibs", "librdkafka*.dylib")))
    if not found:
        raise MissingDependencyError(
            f"no bundled librdkafka found next to {package_dir} (confluent_kafka.libs/); "
            "install confluent-kafka from its binary wheel",
            package="confluent-kafka",
        )
    return found[0]


def load_librdkafka() -> ctypes.CDLL:
    """Load (once) the librdkafka bundled in the confluent-kafka wheel, with typed functions.

    Returns:
        The loaded library.

    Raises:
        MissingDependencyError: confluent-kafka is not installed or has no bundled library.
        NotImplementedError: the library lacks a mock-cluster function this module needs.
    """
    global _LIB
    with _LIB_LOCK:
        if _LIB is not None:
            return _LIB
        lib = ctypes.CDLL(_library_path())
        for name, (restype, argtypes) in _REQUIRED.items():
            if not hasattr(lib, name):
                raise NotImplementedError(f"this librdkafka has no {name}")
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = restype, argtypes
        for name, (restype, argtypes) in _OPTIONAL.items():
            if hasattr(lib, name):
                fn = getattr(lib, name)
                fn.restype, fn.argtypes = restype, argtypes
        for name, restype in _VARIADIC.items():
            if hasattr(lib, name):
                getattr(lib, name).restype = restype
        _LIB = lib
        return lib


@dataclass(frozen=True, slots=True)
class MockRequest:
    """One request a mock broker received, as recorded by request tracking.

    Attributes:
        api_key: the Kafka API key of the request.
        broker_id: the id of the broker that received it.
        timestamp_us: when it was received, in librdkafka's monotonic clock (microseconds).
    """

    api_key: int
    broker_id: int
    timestamp_us: int


def _encode(text: str, what: str) -> bytes:
    if not isinstance(text, str) or not text:
        raise InvalidArgumentError(f"{what} must be a non-empty string, got {text!r}")
    return text.encode("utf-8")


def _int(value: int, what: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise InvalidArgumentError(f"{what} must be an int in {lo}..{hi}, got {value!r}")
    return value


def _destroy(lib: ctypes.CDLL, mcluster: int, rk: int) -> None:
    # The cluster before its owning handle: the cluster's thread uses the handle.
    lib.rd_kafka_mock_cluster_destroy(mcluster)
    lib.rd_kafka_destroy(rk)


_INT16 = (-(2**15), 2**15 - 1)
_INT32 = (-(2**31), 2**31 - 1)


class MockCluster:
    """A librdkafka mock Kafka cluster with ``num_brokers`` brokers (ids 1..num_brokers).

    Faithful for produce/fetch, idempotence, leader moves, brokers going down and up, injected
    error codes, RTT and coordinator moves; it has no admin APIs (create topics with
    :meth:`create_topic`). See the project's TEST-BROKERS notes for its deviations.

    Example::

        with MockCluster(3) as cluster:
            cluster.create_topic("orders", partitions=3, replication_factor=3)
            cluster.set_partition_leader("orders", 0, 2)
            cluster.push_request_errors(0, [6, 6])  # two Produce requests fail
            client = KafkaClient(bootstrap_servers=cluster.bootstrap_servers)

    Thread safety: librdkafka hands each mock call to the cluster's own thread and waits for
    it, so methods may be called from any thread, also while clients are talking to the
    brokers. :meth:`close` must not race other calls on the same object: it takes a lock and
    later calls raise :class:`~kontrakt.errors.IllegalStateError`. Close clients first: a
    destroyed cluster drops their connections.

    Args:
        num_brokers: how many brokers to start (1..1000).
        initial_rebalance_delay_ms: the groups' ``group.initial.rebalance.delay.ms``; 0 by
            default so tests need not wait for a first rebalance (librdkafka's default is
            3000). None keeps librdkafka's default.
        cap_unfaithful_versions: advertise only the versions of each API that the mock
            serves faithfully (see :attr:`UNFAITHFUL_VERSION_CAPS`).

    Raises:
        MissingDependencyError: confluent-kafka is not installed.
        MockClusterError: librdkafka could not create the handle or the cluster.
        InvalidArgumentError: ``num_brokers`` is out of range (a ValueError).
    """

    #: Push this "error" to make the mock broker drop the connection instead of answering
    #: (librdkafka's ``RD_KAFKA_RESP_ERR__TRANSPORT``).
    DISCONNECT = -195

    #: API versions the mock advertises but serves wrongly (librdkafka itself never sends
    #: them): JoinGroup v6, SyncGroup v4 and LeaveGroup v3+ requests are mis-parsed.
    #: ``api key: highest faithful version``. (Its Metadata replies end with a stray byte
    #: at every flexible version; response decoding tolerates trailing bytes.)
    UNFAITHFUL_VERSION_CAPS: ClassVar[dict[int, int]] = {11: 5, 14: 3, 13: 2}

    def __init__(self, num_brokers: int = 3, *,
                 initial_rebalance_delay_ms: int | None = 0,
                 cap_unfaithful_versions: bool = True) -> None:
        _int(num_brokers, "num_brokers", 1, 1000)
        self._lib = lib = load_librdkafka()
        self._lock = threading.RLock()
        self._num_brokers = num_brokers
        errstr = ctypes.create_string_buffer(512)
        conf = lib.rd_kafka_conf_new()
        # The handle is only the cluster's owner; it connects nowhere and should stay quiet.
        for key, value in ((b"log_level", b"3"), (b"client.id", b"kontrakt-mock-cluster")):
            if lib.rd_kafka_conf_set(conf, key, value, errstr, len(errstr)) != 0:
                lib.rd_kafka_conf_destroy(conf)
                raise MockClusterError(f"rd_kafka_conf_set {key!r}: {errstr.value!r}",
                                       code=-186, error_name="_INVALID_ARG")
        # rd_kafka_new takes ownership of conf on success only.
        rk = lib.rd_kafka_new(_RD_KAFKA_PRODUCER, conf, errstr, len(errstr))
        if not rk:
            lib.rd_kafka_conf_destroy(conf)
            raise MockClusterError(f"rd_kafka_new failed: {errstr.value.decode(errors='replace')}",
                                   code=-196, error_name="_FAIL")
        mcluster = lib.rd_kafka_mock_cluster_new(rk, num_brokers)
        if not mcluster:
            lib.rd_kafka_destroy(rk)
            raise MockClusterError("rd_kafka_mock_cluster_new failed", code=-196,
                                   error_name="_FAIL")
        self._rk: int | None = rk
        self._mc: int | None = mcluster
        # A cluster nobody closed is destroyed when collected or at interpreter exit.
        self._finalizer = weakref.finalize(self, _destroy, lib, mcluster, rk)
        self._bootstraps = (lib.rd_kafka_mock_cluster_bootstraps(mcluster) or b"").decode()
        if initial_rebalance_delay_ms is not None:
            self.group_initial_rebalance_delay_ms(initial_rebalance_delay_ms)
        if cap_unfaithful_versions:
            for api_key, highest in self.UNFAITHFUL_VERSION_CAPS.items():
                self.set_apiversion(api_key, 0, highest)

    # -- plumbing ----------------------------------------------------------------------------

    def _handle(self) -> int:
        mc = self._mc
        if mc is None:
            raise IllegalStateError("the mock cluster is closed")
        return mc

    def _fn(self, name: str) -> Any:
        if not hasattr(self._lib, name):
            raise NotImplementedError(f"the bundled librdkafka has no {name}")
        return getattr(self._lib, name)

    def _check(self, code: int, what: str) -> None:
        if code != 0:
            name = (self._lib.rd_kafka_err2name(code) or b"?").decode()
            raise MockClusterError(what, code=code, error_name=name)

    def _call(self, name: str, *args: Any) -> None:
        with self._lock:
            mc = self._handle()
            result = self._fn(f"rd_kafka_mock_{name}")(mc, *args)
        if result is not None:
            self._check(int(result), name)

    # -- information -------------------------------------------------------------------------

    @property
    def bootstrap_servers(self) -> str:
        """Comma-separated ``host:port`` of every broker, e.g. ``"127.0.0.1:40001,..."``."""
        self._handle()
        return self._bootstraps

    @property
    def num_brokers(self) -> int:
        """How many brokers the cluster was created with (ids 1..num_brokers)."""
        return self._num_brokers

    @property
    def closed(self) -> bool:
        """True after :meth:`close`."""
        return self._mc is None

    # -- topics and partitions ---------------------------------------------------------------

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 1) -> None:
        """Create a topic (the mock brokers do not offer the CreateTopics API).

        Raises:
            MockClusterError: e.g. ``TOPIC_ALREADY_EXISTS`` or an invalid replication factor.
            InvalidArgumentError: bad arguments (a ValueError).
        """
        self._call("topic_create", _encode(name, "topic name"),
                   _int(partitions, "partitions", 1, 100_000),
                   _int(replication_factor, "replication_factor", 1, self._num_brokers))

    def set_partition_leader(self, topic: str, partition: int, broker_id: int) -> None:
        """Move a partition's leadership to ``broker_id`` (-1: no leader); bumps its epoch.

        The topic is created if it does not exist. Clients learn of the move on their next
        Metadata request (e.g. after a ``NOT_LEADER_OR_FOLLOWER`` answer).
        """
        self._call("partition_set_leader", _encode(topic, "topic"),
                   _int(partition, "partition", 0, _INT32[1]),
                   _int(broker_id, "broker_id", -1, _INT32[1]))

    def set_partition_follower(self, topic: str, partition: int, broker_id: int) -> None:
        """Set the partition's preferred replica for follower fetching (KIP-392)."""
        self._call("partition_set_follower", _encode(topic, "topic"),
                   _int(partition, "partition", 0, _INT32[1]),
                   _int(broker_id, "broker_id", -1, _INT32[1]))

    def set_partition_follower_wmarks(self, topic: str, partition: int, low: int = -1,
                                      high: int = -1) -> None:
        """Make the partition's follower (see :meth:`set_partition_follower`) hold only the
        offsets ``low``..``high`` (-1: the leader's, and kept in step with it).

        A follower fetch outside them is answered ``OFFSET_OUT_OF_RANGE``, as by a replica
        that lags the leader; its high watermark and log start offset are these. Measured
        with librdkafka 2.16: a fetch at ``high`` itself is served from the leader's log.

        Raises:
            NotImplementedError: the bundled librdkafka lacks the function.
        """
        self._call("partition_set_follower_wmarks", _encode(topic, "topic"),
                   _int(partition, "partition", 0, _INT32[1]),
                   _int(low, "low", -1, 2**63 - 1), _int(high, "high", -1, 2**63 - 1))

    def set_topic_error(self, topic: str, error: int) -> None:
        """Make Metadata (and AddPartitionsToTxn) answer ``error`` for ``topic`` (0 clears)."""
        self._call("topic_set_error", _encode(topic, "topic"), _int(error, "error", *_INT32))

    # -- brokers -----------------------------------------------------------------------------

    def broker_down(self, broker_id: int) -> None:
        """Close the broker's connections and refuse new ones (-1: every broker).

        Leadership does not move. Measured with librdkafka 2.16: the listener is closed, so a
        new connection gets ECONNREFUSED and open ones are closed.

        Raises:
            MockClusterError: ``BROKER_NOT_AVAILABLE`` for an unknown broker id.
        """
        self._call("broker_set_down", _int(broker_id, "broker_id", -1, _INT32[1]))

    def broker_up(self, broker_id: int) -> None:
        """Let the broker accept connections again (-1: every broker)."""
        self._call("broker_set_up", _int(broker_id, "broker_id", -1, _INT32[1]))

    def set_rtt(self, broker_id: int, rtt_ms: int) -> None:
        """Delay every response of the broker by ``rtt_ms`` milliseconds (-1: every broker)."""
        self._call("broker_set_rtt", _int(broker_id, "broker_id", -1, _INT32[1]),
                   _int(rtt_ms, "rtt_ms", 0, _INT32[1]))

    def set_rack(self, broker_id: int, rack: str) -> None:
        """Set the rack the broker reports in Metadata (-1: every broker)."""
        self._call("broker_set_rack", _int(broker_id, "broker_id", -1, _INT32[1]),
                   _encode(rack, "rack"))

    def coordinator_set(self, key_type: str, key: str, broker_id: int) -> None:
        """Make ``broker_id`` the coordinator of a group or transactional id.

        Args:
            key_type: ``"group"`` or ``"transaction"``.
            key: the group id or transactional id.
            broker_id: the new coordinator; it need not exist.
        """
        if key_type not in ("group", "transaction"):
            raise InvalidArgumentError(
                f"key_type must be 'group' or 'transaction', got {key_type!r}")
        self._call("coordinator_set", key_type.encode(), _encode(key, "key"),
                   _int(broker_id, "broker_id", *_INT32))

    def set_apiversion(self, api_key: int, min_version: int, max_version: int) -> None:
        """Limit the versions the brokers advertise and accept for ``api_key``.

        Use ``-1, -1`` to disable the API. ``max_version`` must not exceed what the mock
        implements.
        """
        self._call("set_apiversion", _int(api_key, "api_key", 0, _INT16[1]),
                   _int(min_version, "min_version", -1, _INT16[1]),
                   _int(max_version, "max_version", -1, _INT16[1]))

    def group_initial_rebalance_delay_ms(self, delay_ms: int) -> None:
        """Set ``group.initial.rebalance.delay.ms`` for every group of the cluster."""
        self._call("group_initial_rebalance_delay_ms", _int(delay_ms, "delay_ms", 0, _INT32[1]))

    def group_consumer_heartbeat_interval_ms(self, interval_ms: int) -> None:
        """Set the heartbeat interval the cluster gives KIP-848 (``group.protocol=consumer``)
        members; librdkafka's default of 3000 ms makes tests slow."""
        self._call("set_group_consumer_heartbeat_interval_ms",
                   _int(interval_ms, "interval_ms", 1, _INT32[1]))

    def group_consumer_session_timeout_ms(self, timeout_ms: int) -> None:
        """Set the session timeout of KIP-848 (``group.protocol=consumer``) members: one
        that sends no heartbeat for this long is dropped from its group (librdkafka's
        default is 45000 ms)."""
        self._call("set_group_consumer_session_timeout_ms",
                   _int(timeout_ms, "timeout_ms", 1, _INT32[1]))

    def sharegroup_auto_offset_reset(self, earliest: bool) -> None:
        """Where share groups (KIP-932) that have not read a partition yet start: its
        earliest offset, or (the mock's default) its end, so that only records produced
        after the group's first fetch are delivered."""
        self._call("sharegroup_set_auto_offset_reset", 1 if earliest else 0)

    def sharegroup_heartbeat_interval_ms(self, interval_ms: int) -> None:
        """Set the heartbeat interval the cluster gives share group members (the mock's
        default is 5000 ms)."""
        self._call("sharegroup_set_heartbeat_interval",
                   _int(interval_ms, "interval_ms", 1, _INT32[1]))

    def sharegroup_session_timeout_ms(self, timeout_ms: int) -> None:
        """Set the session timeout of share group members: one that sends no heartbeat for
        this long is dropped and its partitions go to the others (the mock's default is
        45000 ms, checked once a second)."""
        self._call("sharegroup_set_session_timeout",
                   _int(timeout_ms, "timeout_ms", 1, _INT32[1]))

    def sharegroup_record_lock_duration_ms(self, duration_ms: int) -> None:
        """Set how long a record a share group member acquired stays locked to it before
        the group may deliver it again."""
        self._call("sharegroup_set_record_lock_duration",
                   _int(duration_ms, "duration_ms", 0, _INT32[1]))

    def sharegroup_max_delivery_attempts(self, attempts: int) -> None:
        """Set how many times a share group delivers a record before archiving it (the
        mock's default is 5)."""
        self._call("sharegroup_set_max_delivery_attempts",
                   _int(attempts, "attempts", 1, _INT32[1]))

    # -- error injection ---------------------------------------------------------------------

    def push_request_errors(self, api_key: int, errors: Sequence[int]) -> None:
        """Make the next ``len(errors)`` requests with ``api_key`` (to any broker) fail.

        The n-th such request consumes ``errors[n]``. What the broker then does is up to its
        handler for that API; measured with librdkafka 2.16:

        - ApiVersions answers with the code as its top-level error (librdkafka's other
          handlers likewise put it in their responses' error fields instead of handling
          the request);
        - Metadata consumes the code but answers normally: use :meth:`set_topic_error` to
          make Metadata report a topic error;
        - :attr:`DISCONNECT` makes the broker close the connection without answering (for
          every API, Metadata included); 0 lets the request through.

        Errors pushed to one broker with :meth:`broker_push_request_error_rtts` are used
        before these.

        Raises:
            InvalidArgumentError: an error code outside int32, or a bad api key.
        """
        codes = [_int(e, "error", *_INT32) for e in errors]
        _int(api_key, "api_key", 0, _INT16[1])
        if not codes:
            return
        if hasattr(self._lib, "rd_kafka_mock_push_request_errors_array"):
            array = (_c_int * len(codes))(*codes)
            self._call("push_request_errors_array", api_key, len(codes), array)
            return
        # Variadic fallback: the fixed arguments typed, each error passed as a C int.
        with self._lock:
            mc = self._handle()
            self._lib.rd_kafka_mock_push_request_errors(
                _c_void_p(mc), _c_int16(api_key), _c_size_t(len(codes)),
                *(_c_int(c) for c in codes))

    def push_partition_request_errors(self, topic: str, partition: int, api_key: int,
                                      errors: Sequence[int]) -> None:
        """Make the partition fail in the next ``len(errors)`` requests with ``api_key`` that
        name it, at whichever broker they go to, with the n-th error as the partition's
        error code (the request's other partitions and its top-level error are unaffected).

        Measured with librdkafka 2.16 for Fetch: a follower the leader named answers the
        partition with the error; a leader answers it with the error and (the mock's way,
        not Kafka's) still names that follower.

        Raises:
            MockClusterError: e.g. an unknown topic or partition.
            NotImplementedError: the bundled librdkafka lacks the function.
            InvalidArgumentError: an error code outside int32, or a bad api key.
        """
        codes = [_int(e, "error", *_INT32) for e in errors]
        _int(api_key, "api_key", 0, _INT16[1])
        name = _encode(topic, "topic")
        _int(partition, "partition", 0, _INT32[1])
        if not codes:
            return
        fn = self._fn("rd_kafka_mock_partition_push_request_errors")
        with self._lock:
            mc = self._handle()
            # Variadic call: fixed arguments with their exact C types, then C ints.
            code = fn(_c_void_p(mc), _c_char_p(name), _c_int32(partition), _c_int16(api_key),
                      _c_size_t(len(codes)), *(_c_int(c) for c in codes))
        self._check(int(code), "partition_push_request_errors")

    def clear_request_errors(self, api_key: int) -> None:
        """Drop the errors still pushed for ``api_key`` at cluster level."""
        self._call("clear_request_errors", _int(api_key, "api_key", 0, _INT16[1]))

    def broker_push_request_error_rtts(
        self, broker_id: int, api_key: int, errors: Sequence[tuple[int, int]]
    ) -> None:
        """Queue ``(error, rtt_ms)`` answers for the next requests with ``api_key`` to one broker.

        Each of the next ``len(errors)`` such requests to ``broker_id`` is answered with the
        error (0 for a normal answer, :attr:`DISCONNECT` to drop the connection) after a delay
        of ``rtt_ms``. These take precedence over :meth:`push_request_errors`.

        Raises:
            MockClusterError: e.g. ``_UNKNOWN_BROKER``.
            NotImplementedError: the bundled librdkafka lacks the function.
        """
        _int(broker_id, "broker_id", *_INT32)
        _int(api_key, "api_key", 0, _INT16[1])
        flat: list[ctypes.c_int] = []
        for err, rtt in errors:
            flat += [_c_int(_int(err, "error", *_INT32)), _c_int(_int(rtt, "rtt_ms", 0, _INT32[1]))]
        if not flat:
            return
        fn = self._fn("rd_kafka_mock_broker_push_request_error_rtts")
        with self._lock:
            mc = self._handle()
            # Variadic call: fixed arguments with their exact C types, then (int, int) pairs.
            code = fn(_c_void_p(mc), _c_int32(broker_id), _c_int16(api_key),
                      _c_size_t(len(errors)), *flat)
        self._check(int(code), "broker_push_request_error_rtts")

    # -- request tracking --------------------------------------------------------------------

    def start_request_tracking(self) -> None:
        """Start recording every request the brokers receive (see :meth:`get_requests`)."""
        self._call("start_request_tracking")

    def stop_request_tracking(self) -> None:
        """Stop recording requests.

        Measured with librdkafka 2.16: this also drops what was recorded (its header says
        otherwise), so call :meth:`get_requests` first.
        """
        self._call("stop_request_tracking")

    def clear_requests(self) -> None:
        """Forget the recorded requests."""
        self._call("clear_requests")

    def get_requests(self) -> list[MockRequest]:
        """The requests recorded since tracking started (or the last clear), oldest first.

        Reading does not clear the record.

        Raises:
            NotImplementedError: the bundled librdkafka has no request tracking.
        """
        lib = self._lib
        get = self._fn("rd_kafka_mock_get_requests")
        count = _c_size_t(0)
        with self._lock:
            mc = self._handle()
            array = get(mc, ctypes.byref(count))
            try:
                return [
                    MockRequest(
                        api_key=int(lib.rd_kafka_mock_request_api_key(array[i])),
                        broker_id=int(lib.rd_kafka_mock_request_id(array[i])),
                        timestamp_us=int(lib.rd_kafka_mock_request_timestamp(array[i])),
                    )
                    for i in range(count.value)
                ]
            finally:
                if array:
                    if hasattr(lib, "rd_kafka_mock_request_destroy_array"):
                        lib.rd_kafka_mock_request_destroy_array(array, count.value)
                    else:
                        for i in range(count.value):
                            lib.rd_kafka_mock_request_destroy(array[i])
                        lib.rd_kafka_mem_free(self._rk, ctypes.cast(array, _c_void_p))

    # -- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        """Destroy the cluster (its brokers close every connection) and its owning handle.

        Idempotent. Blocks until librdkafka's threads have stopped.
        """
        with self._lock:
            self._mc = self._rk = None
            self._finalizer()

    def __enter__(self) -> MockCluster:
        self._handle()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        if self._mc is None:
            return "MockCluster(closed)"
        return f"MockCluster({self._num_brokers} brokers: {self._bootstraps})"
