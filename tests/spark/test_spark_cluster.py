"""The source and the sink on real multi-process clusters: ``local-cluster[2,1,1024]`` (two
executor JVMs started by the driver) and the standalone master + worker of
``examples/spark_cluster.py``.

Spark allows one SparkContext per process and the other Spark tests share a ``local[2]``
one, so each cluster runs in an interpreter of its own, started here (``cluster_job.py``
and the example), against Tansu and the embedded registry; the whole process group is
killed if it outlives its time.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyspark", reason="needs the spark extra")

from kontrakt.testing import TansuBroker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
# Generous: a cluster starts 3-4 JVMs, slow on a busy 2-core machine.
RUN_TIMEOUT_S = 840


@pytest.fixture(autouse=True)
def _needs_java() -> None:
    java_home = os.environ.get("JAVA_HOME")
    if shutil.which("java") is None and not (
            java_home and os.path.exists(os.path.join(java_home, "bin", "java"))):
        # PySpark starts JVMs; the package registries cannot provide one.
        pytest.skip("the Spark tests need a Java 17+ runtime (java on PATH or JAVA_HOME)")


def _run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` in a new session with this checkout's kontrakt; whatever of its process
    group is left afterwards (JVMs, brokers of a run that failed) is killed."""
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1",
           "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH"))
                                         if p)}
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True, env=env, cwd=cwd,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate(timeout=30)
        pytest.fail(f"{argv[1]} did not finish within {RUN_TIMEOUT_S}s; stderr: {err[-3000:]}")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, f"{argv[1]} failed: {err[-5000:]}"
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def test_source_and_sink_run_on_separate_executor_jvms(
        tansu_broker: TansuBroker, registry_url: str, topic_name: str,
        tmp_path: Path) -> None:
    """Write (the sink), a batch read and an availableNow stream each run their tasks in
    both executor JVMs of ``local-cluster[2,1,1024]``, none in the driver's, and every
    record written is read back by both reads."""
    tansu_broker.create_topic(topic_name, 2)
    run = _run([sys.executable, str(ROOT / "tests" / "spark" / "cluster_job.py"),
                tansu_broker.bootstrap_servers, registry_url, topic_name,
                str(tmp_path / "checkpoint")], tmp_path)
    got = json.loads(run.stdout.strip().splitlines()[-1])
    jvms = got["read_jvms"]
    assert len(jvms) == 2 and got["driver_jvm"] not in jvms and -1 not in jvms, got
    assert got["write_jvms"] == jvms  # the same two executors wrote the records
    assert got["stream_jvms"] == jvms
    assert got["read_ids"] == got["stream_ids"] == list(range(200))


def test_standalone_cluster_example(tmp_path: Path) -> None:
    """``examples/spark_cluster.py`` as a user runs it: a master and a worker from
    PySpark's spark-class, two executors, write + read + stream; it stops what it
    started."""
    run = _run([sys.executable, str(ROOT / "examples" / "spark_cluster.py")], tmp_path)
    lines = run.stdout.splitlines()
    for expected in ("executors: 2", "wrote 1000 orders", "read 1000 orders, qty 2997",
                     "streamed 1000 orders to parquet"):
        assert expected in lines, run.stdout
    assert sum(int(m) for m in re.findall(r"^partition \d: (\d+) orders", run.stdout,
                                          re.M)) == 1000
    started = [int(p) for p in re.findall(r"^started \w+ pid (\d+)$", run.stdout, re.M)]
    stopped = [int(p) for p in re.findall(r"^stopped pid (\d+)$", run.stdout, re.M)]
    assert len(started) == 2 and sorted(stopped) == sorted(started), run.stdout
    for pid in started:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
