"""The ``kontrakt`` command end to end: each command run as a subprocess against Tansu and the
embedded registry, its exit code and output checked, bad input included."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kontrakt.clients.producer import Producer
from kontrakt.registry.server import RegistryServer
from kontrakt.testing import TansuBroker

AVRO = json.dumps({"type": "record", "name": "Order", "fields": [
    {"name": "id", "type": "long"}, {"name": "item", "type": "string"}]})
PROTO = """syntax = "proto3";
package cli.test;
message Ping { string text = 1; int32 n = 2; }
"""


@pytest.fixture(scope="module")
def registry() -> Iterator[RegistryServer]:
    with RegistryServer() as srv:
        yield srv


@pytest.fixture
def run(tansu_broker: TansuBroker, registry: RegistryServer) -> Any:
    env = {**os.environ, "KONTRAKT_BOOTSTRAP": tansu_broker.bootstrap_servers,
           "KONTRAKT_REGISTRY": registry.url}

    def run(*args: str, stdin: str = "", timeout: float = 90) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "kontrakt.cli", *args], input=stdin,
                              capture_output=True, text=True, env=env, timeout=timeout,
                              check=False)
    return run


def test_version_and_help(run: Any) -> None:
    from kontrakt import __version__

    got = run("--version")
    assert got.returncode == 0 and __version__ in got.stdout
    for command in ("dev", "produce", "consume", "topics", "groups", "cluster", "transactions",
                    "configs", "schemas"):
        assert command in run("--help").stdout
    help_text = run("consume", "--help").stdout
    assert "default: beginning" in help_text and "KONTRAKT_BOOTSTRAP" in help_text
    bad = run("consume")
    assert bad.returncode == 2 and "TOPIC" in bad.stderr


def test_topics_lifecycle(run: Any, topic_name: str) -> None:
    assert run("topics", "create", topic_name, "-p", "2").returncode == 0
    again = run("topics", "create", topic_name)
    assert again.returncode == 2 and "already exists" in again.stderr.lower()
    assert run("topics", "create", topic_name, "--if-not-exists").returncode == 0
    assert topic_name in run("topics", "list").stdout.split()
    described = json.loads(run("topics", "describe", topic_name, "--json").stdout)
    assert [p["partition"] for p in described[0]["partitions"]] == [0, 1]
    # Tansu has no CreatePartitions (see TEST-BROKERS.md), nor has the mock cluster any admin
    # API: what is tested here is that the refusal is said plainly.
    grow = run("topics", "partitions", topic_name, "3")
    assert grow.returncode == 2 and "does not support CreatePartitions" in grow.stderr
    assert run("topics", "delete", topic_name).returncode == 0
    assert topic_name not in run("topics", "list").stdout.split()
    missing = run("topics", "describe", topic_name)
    assert missing.returncode == 2 and topic_name in missing.stderr


@pytest.mark.also_on_cluster
def test_produce_and_consume_raw_kcat_style(run: Any, topic_name: str,
                                            tansu_broker: TansuBroker) -> None:
    assert run("topics", "create", topic_name).returncode == 0
    lines = "".join(f"k{i}:value {i}\n" for i in range(5))
    got = run("produce", topic_name, "-K", ":", "-H", "source=test", stdin=lines)
    assert got.returncode == 0, got.stderr
    assert "produced 5 record(s)" in got.stderr
    out = run("consume", topic_name, "-e", "-f", "%k=%s@%o %h\\n")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [f"k{i}=value {i}@{i} source=test" for i in range(5)]
    # -o -N counts back from ListOffsets' end, which Tansu gets wrong after a batch of
    # several records (TEST-BROKERS.md): end the log with one-record batches first.
    with Producer(bootstrap_servers=tansu_broker.bootstrap_servers) as p:
        for i in (5, 6):
            p.send_and_wait(topic_name, b"value %d" % i, b"k%d" % i, timeout=30)
    tail = run("consume", topic_name, "-o", "-2", "-e", "-q")
    assert tail.stdout.splitlines() == ["value 5", "value 6"] and tail.stderr == ""
    records = [json.loads(line) for line in run("consume", topic_name, "-e", "-J",
                                                 "-c", "2").stdout.splitlines()]
    assert [(r["offset"], r["key"], r["value"]) for r in records] == [
        (0, "k0", "value 0"), (1, "k1", "value 1")]
    short = run("consume", topic_name, "-e", "-c", "9", "-q")
    assert short.returncode == 1 and "7 of the 9" in short.stderr


@pytest.mark.also_on_cluster
def test_bad_input_is_named_and_earlier_records_are_kept(run: Any, topic_name: str) -> None:
    assert run("topics", "create", topic_name).returncode == 0
    got = run("produce", topic_name, "--format", "json", stdin='{"a": 1}\n{"a": 2}\nnot json\n')
    assert got.returncode == 2 and "line 3" in got.stderr and "not JSON" in got.stderr
    out = run("consume", topic_name, "-e", "--format", "json", "-q")
    assert out.stdout.splitlines() == ['{"a":1}', '{"a":2}']
    unknown = run("consume", "no-such-topic-here", "-e")
    assert unknown.returncode == 2 and "does not exist" in unknown.stderr
    bad_code = run("consume", topic_name, "-e", "-f", "%z")
    assert bad_code.returncode == 2 and "%z" in bad_code.stderr
    bad_x = run("topics", "list", "-X", "novalue")
    assert bad_x.returncode == 2 and "KEY=VALUE" in bad_x.stderr


def test_avro_and_protobuf_through_the_registry(run: Any, topic_name: str,
                                                tmp_path: Path) -> None:
    assert run("topics", "create", topic_name).returncode == 0
    schema = tmp_path / "order.avsc"
    schema.write_text(AVRO)
    got = run("produce", topic_name, "--format", "avro", "--schema", str(schema),
              stdin='{"id": 1, "item": "tea"}\n{"id": 2, "item": "cake"}\n')
    assert got.returncode == 0, got.stderr
    # Later producers use the registered version without the file.
    assert run("produce", topic_name, "--format", "avro",
               stdin='{"id": 3, "item": "jam"}\n').returncode == 0
    wrong = run("produce", topic_name, "--format", "avro", stdin='{"id": "x"}\n')
    assert wrong.returncode == 2 and "refuses" in wrong.stderr
    out = run("consume", topic_name, "-e", "--format", "avro", "-q")
    assert [json.loads(line) for line in out.stdout.splitlines()] == [
        {"id": 1, "item": "tea"}, {"id": 2, "item": "cake"}, {"id": 3, "item": "jam"}]
    raw = run("consume", topic_name, "-e", "-c", "1", "-f", "%S\\n", "-q")
    assert raw.stdout.strip() == str(5 + 1 + 4)  # framing + zigzag 1 + "tea" with its length

    proto_topic = topic_name + "-pb"
    assert run("topics", "create", proto_topic).returncode == 0
    proto = tmp_path / "ping.proto"
    proto.write_text(PROTO)
    got = run("produce", proto_topic, "--format", "protobuf", "--schema", str(proto),
              stdin='{"text": "hi", "n": 7}\n')
    assert got.returncode == 0, got.stderr
    out = run("consume", proto_topic, "-e", "--format", "protobuf", "-q")
    assert json.loads(out.stdout) == {"text": "hi", "n": 7}


@pytest.mark.also_on_cluster
def test_groups_lag_and_reset(run: Any, topic_name: str, tansu_broker: TansuBroker) -> None:
    group = f"g-{topic_name}"[:200]
    assert run("topics", "create", topic_name).returncode == 0
    # One record a batch: Tansu's ListOffsets LATEST (behind the lag) is wrong for batches
    # of several records (TEST-BROKERS.md), and the CLI's produce batches its lines.
    with Producer(bootstrap_servers=tansu_broker.bootstrap_servers) as p:
        for value in (b"a", b"b", b"c"):
            p.send_and_wait(topic_name, value, timeout=30)
    got = run("consume", topic_name, "-G", group, "-c", "3", "-q",
              "-X", "session.timeout.ms=6000", "-X", "auto.commit.interval.ms=100")
    assert got.returncode == 0, got.stderr
    assert f"{group}  " in run("groups", "list").stdout
    assert group in run("groups", "list", "--type", "classic").stdout
    with Producer(bootstrap_servers=tansu_broker.bootstrap_servers) as p:
        for value in (b"d", b"e"):
            p.send_and_wait(topic_name, value, timeout=30)
    described = json.loads(run("groups", "describe", group, "--json").stdout)
    assert described["offsets"] == [
        {"topic": topic_name, "partition": 0, "committed": 3, "end": 5, "lag": 2}]
    assert (described["type"], described["group_epoch"]) == ("Classic", None)
    assert "classic protocol" in run("groups", "describe", group).stdout
    plan = run("groups", "reset-offsets", group, "-t", topic_name, "--to-earliest")
    assert plan.returncode == 0 and "3 -> 0" in plan.stdout and "dry run" in plan.stdout
    assert json.loads(run("groups", "describe", group, "--json").stdout)["total_lag"] == 2
    done = run("groups", "reset-offsets", group, "-t", topic_name, "--shift-by", "-1",
               "--execute")
    assert done.returncode == 0 and "3 -> 2" in done.stdout
    assert json.loads(run("groups", "describe", group, "--json").stdout)["total_lag"] == 3
    both = run("groups", "reset-offsets", group, "-t", topic_name, "--to-earliest",
               "--to-latest")
    assert both.returncode == 2 and "exactly one" in both.stderr
    # As kafka-consumer-groups.sh: nothing committed, nothing to shift.
    fresh = run("groups", "reset-offsets", f"{group}-none"[:200], "-t", topic_name,
                "--shift-by", "1")
    assert fresh.returncode == 2 and "no committed offset to shift" in fresh.stderr
    assert run("groups", "delete", group).returncode == 0


@pytest.mark.also_on_cluster
def test_cluster(run: Any, tansu_broker: TansuBroker) -> None:
    got = json.loads(run("cluster", "--api-versions", "--json").stdout)
    port = int(tansu_broker.bootstrap_servers.rsplit(":", 1)[1])
    assert [b["port"] for b in got["brokers"]] == [port]
    assert got["api_versions"]["Produce"]["key"] == 0
    # cluster is also a group of commands now; alone it still describes the cluster
    assert "quorum" in run("cluster", "--help").stdout
    assert run("cluster").stdout.startswith("cluster ")


def test_configs_reset_a_topic_config(run: Any, topic_name: str) -> None:
    # Broken variant tried: the dry run resetting (retention.ms gone before --execute).
    assert run("topics", "create", topic_name, "-c", "retention.ms=1234").returncode == 0
    plan = run("configs", "reset", "topic", topic_name, "-k", "retention.ms")
    assert plan.returncode == 0, plan.stderr
    assert plan.stdout.splitlines() == ["would reset retention.ms (now 1234)",
                                        "dry run: nothing changed (add --execute)"]
    # (Tansu describes only the configs set, each as a default: topics describe hides
    # them, a second plan shows whether the key is still set.)
    again = run("configs", "reset", "topic", topic_name, "-k", "retention.ms", "--json")
    assert json.loads(again.stdout)["configs"] == [{"key": "retention.ms", "value": "1234"}]
    done = run("configs", "reset", "topic", topic_name, "-k", "retention.ms", "--execute")
    assert done.returncode == 0 and done.stdout.strip() == "reset retention.ms (now 1234)"
    after = run("configs", "reset", "topic", topic_name, "-k", "retention.ms")
    assert after.stdout.startswith("would reset retention.ms (not described)"), after.stdout
    # (Tansu describes a topic that does not exist without an error: the refusals are
    # checked against a crafted broker in test_cli_admin_ops.py.)


def test_unreachable_broker_is_exit_3(run: Any) -> None:
    got = run("topics", "list", "-b", "127.0.0.1:1", "-X", "request.timeout.ms=2000",
              "-X", "socket.connection.setup.timeout.ms=1000")
    assert got.returncode == 3, (got.returncode, got.stderr)
    assert "127.0.0.1:1" in got.stderr


def test_schemas_register_get_diff_download(run: Any, tmp_path: Path,
                                            topic_name: str) -> None:
    folder = tmp_path / "schemas"
    folder.mkdir()
    subject = f"{topic_name}-value"
    (folder / f"{subject}.avsc").write_text(AVRO)
    got = run("schemas", "register", str(folder))
    assert got.returncode == 0 and f"{subject}: id" in got.stdout and "version 1" in got.stdout
    evolved = json.loads(AVRO)
    evolved["fields"].append({"name": "note", "type": "string", "default": ""})
    (folder / f"{subject}.avsc").write_text(json.dumps(evolved))
    assert run("schemas", "test-compatibility", str(folder)).returncode == 0
    assert "version 2" in run("schemas", "register", str(folder)).stdout
    assert subject in run("schemas", "list", "--prefix", topic_name).stdout.split()
    assert json.loads(run("schemas", "get", subject, "--version", "1").stdout)["version"] == 1
    diff = run("schemas", "diff", subject)
    added = [line for line in diff.stdout.splitlines() if line.startswith("+ ")]
    assert diff.returncode == 0 and any('"name": "note"' in line for line in added)
    assert "may follow" in diff.stdout
    breaking = tmp_path / "breaking.avsc"
    breaking.write_text(json.dumps({"type": "record", "name": "Order", "fields": [
        {"name": "id", "type": "string"}]}))
    bad = run("schemas", "diff", subject, "latest", str(breaking))
    assert bad.returncode == 1 and "may NOT follow" in bad.stdout
    out = tmp_path / "down"
    assert run("schemas", "download", str(out), "-s", subject).returncode == 0
    assert json.loads((out / f"{subject}.avsc").read_text()) == evolved
    missing = run("schemas", "get", "no-such-subject")
    assert missing.returncode == 2 and "no-such-subject" in missing.stderr


def _children(pid: int) -> set[int]:
    out: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        out.update(int(c) for c in (task / "children").read_text().split())
    return out


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux /proc")
@pytest.mark.parametrize(("broker", "stop_signal"), [
    ("tansu", signal.SIGTERM),
    (None, signal.SIGTERM),  # the default: the in-process cluster
    (None, signal.SIGINT),  # Ctrl-C
], ids=["tansu-sigterm", "cluster-sigterm", "cluster-ctrl-c"])
def test_dev_serves_and_stops_cleanly(tmp_path: Path, broker: str | None,
                                      stop_signal: signal.Signals) -> None:
    chosen = ["--broker", broker] if broker else []
    proc = subprocess.Popen([sys.executable, "-m", "kontrakt.cli", "dev", *chosen,
                             "--broker-port", "0", "--registry-port", "0",
                             "--storage", str(tmp_path / "state")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        lines: list[str] = []
        deadline = time.monotonic() + 60
        while not any(line.startswith("Ctrl-C") for line in lines):
            assert time.monotonic() < deadline and proc.poll() is None, lines
            lines.append(proc.stdout.readline())
        kept = f"kept in {tmp_path / 'state' / 'kafka'}"
        assert ("(Tansu, in memory)" if broker else f"(in-process cluster, 1 broker, {kept})") \
            in lines[0], lines
        exports = next(line for line in lines if line.startswith("export"))
        env = dict(part.split("=", 1) for part in exports.split()[1:])
        children = _children(proc.pid)
        if broker == "tansu":
            assert children, "the broker runs as a child process"
        else:
            assert not children, "the cluster runs in the command's own process"
        run_env = {**os.environ, **env}
        cli = [sys.executable, "-m", "kontrakt.cli"]
        assert subprocess.run([*cli, "topics", "create", "dev-t"], env=run_env,
                              timeout=60, check=False).returncode == 0
        produced = subprocess.run([*cli, "produce", "dev-t"], input="hello\n", env=run_env,
                                  timeout=60, capture_output=True, text=True, check=False)
        assert produced.returncode == 0, produced.stderr
        consumed = subprocess.run([*cli, "consume", "dev-t", "-e"], env=run_env, timeout=60,
                                  capture_output=True, text=True, check=False)
        assert consumed.stdout.split() == ["hello"], consumed.stderr
        assert subprocess.run([*cli, "schemas", "list"], env=run_env, timeout=60,
                              capture_output=True, check=False).returncode == 0
        proc.send_signal(stop_signal)
        assert proc.wait(30) == 0, proc.stderr.read() if proc.stderr else ""
        assert proc.stdout.read().strip() == "stopping"
        assert proc.stderr is not None and proc.stderr.read() == ""  # no traceback, no warning
        time.sleep(0.2)
        assert not [c for c in children if Path(f"/proc/{c}").exists()], "a child was left"
        assert (tmp_path / "state" / "registry.journal").exists()
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=10)  # reaps it and closes its pipes


def _start_dev(*args: str) -> tuple[subprocess.Popen[str], dict[str, str]]:
    """Start ``kontrakt dev`` and wait for its banner; returns it and the exports it printed."""
    proc = subprocess.Popen([sys.executable, "-m", "kontrakt.cli", "dev", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + 60
    while not any(line.startswith("Ctrl-C") for line in lines):
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            raise AssertionError(f"{lines} {proc.communicate(timeout=10)}")
        lines.append(proc.stdout.readline())
    exports = next(line for line in lines if line.startswith("export"))
    return proc, dict(part.split("=", 1) for part in exports.split()[1:])


def test_dev_storage_keeps_the_cluster_s_topics_and_records_across_restarts(
        tmp_path: Path) -> None:
    args = ("--broker-port", "0", "--no-registry", "--storage", str(tmp_path / "state"))
    cli = [sys.executable, "-m", "kontrakt.cli"]
    proc, env = _start_dev(*args)
    try:
        run_env = {**os.environ, **env}
        assert subprocess.run([*cli, "topics", "create", "kept", "--partitions", "2"],
                              env=run_env, timeout=60, check=False).returncode == 0
        produced = subprocess.run([*cli, "produce", "kept", "-p", "0"], input="a\nb\n",
                                  env=run_env, timeout=60, capture_output=True, text=True,
                                  check=False)
        assert produced.returncode == 0, produced.stderr
        # A second dev on the same folder is refused while this one runs.
        second = subprocess.run([*cli, "dev", *args], capture_output=True, text=True,
                                timeout=60, check=False)
        assert second.returncode == 3 and "is in use by another running" in second.stderr
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=10)
    proc, env = _start_dev(*args)
    try:
        run_env = {**os.environ, **env}
        consumed = subprocess.run([*cli, "consume", "kept", "-e"], env=run_env, timeout=60,
                                  capture_output=True, text=True, check=False)
        assert consumed.stdout.split() == ["a", "b"], consumed.stderr
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=10)


def test_dev_names_a_taken_port_and_a_bad_combination() -> None:
    cli = [sys.executable, "-m", "kontrakt.cli", "dev", "--no-registry"]
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        got = subprocess.run([*cli, "--broker-port", str(port)], capture_output=True,
                             text=True, timeout=60, check=False)
    assert got.returncode == 3, got.stderr
    assert f"127.0.0.1:{port} is already in use; choose another --broker-port" in got.stderr
    bad = subprocess.run([*cli, "--broker", "tansu", "--brokers", "3"], capture_output=True,
                         text=True, timeout=60, check=False)
    assert bad.returncode == 2 and "--brokers needs --broker cluster" in bad.stderr
    helped = subprocess.run([*cli, "--help"], capture_output=True, text=True, timeout=60,
                            check=False).stdout
    assert "in memory only" in " ".join(helped.split())
