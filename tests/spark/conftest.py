"""One local SparkSession and one registry for every Spark test (the JVM costs seconds)."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from kontrakt.registry import SchemaRegistryClient
from kontrakt.registry.server import RegistryServer


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """A ``local[2]`` SparkSession bound to 127.0.0.1, with ``kontrakt`` registered."""
    pytest.importorskip("pyspark", reason="needs the spark extra")
    java_home = os.environ.get("JAVA_HOME")
    if shutil.which("java") is None and not (
            java_home and os.path.exists(os.path.join(java_home, "bin", "java"))):
        # PySpark starts a JVM; the package registries cannot provide one.
        pytest.skip("the Spark tests need a Java 17+ runtime (java on PATH or JAVA_HOME)")
    from pyspark.sql import SparkSession

    from kontrakt.spark import register

    # Python workers must import kontrakt from this interpreter's environment.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    session = (SparkSession.builder.master("local[2]")
               .appName("kontrakt-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.pyspark.python", sys.executable)
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.driver.memory", "1g")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="session")
def registry_url() -> Iterator[str]:
    """One embedded Schema Registry for the Spark tests (subjects are per topic, so unique)."""
    with RegistryServer() as srv:
        yield srv.url


@pytest.fixture
def client(registry_url: str) -> Iterator[SchemaRegistryClient]:
    with SchemaRegistryClient({"url": registry_url}) as c:
        yield c


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.when == "call" and report.failed:
        item.stash[_CALL_FAILED] = True
    return report


_CALL_FAILED = pytest.StashKey[bool]()


@pytest.fixture(autouse=True)
def _fresh_py4j_connection_after_a_failure(request: pytest.FixtureRequest) -> Iterator[None]:
    """Drop this thread's py4j connection after a Spark test fails.

    A test timeout interrupts a py4j call between its command and its answer; the connection
    stays this thread's (the failure's traceback holds it), so the next command would read
    the interrupted call's answer and every later Spark test in the worker would fail on
    answers to other calls. A closed connection is replaced on the next call; the jobs the
    interrupted call started are cancelled, so they do not hold the session's two cores.
    """
    yield
    if not request.node.stash.get(_CALL_FAILED, False):
        return
    if "spark" not in request.fixturenames:
        return
    session = request.getfixturevalue("spark")
    client = session.sparkContext._gateway._gateway_client
    # Only py4j's pinned-thread client (PySpark's default) keeps a connection per thread.
    connection = getattr(client, "get_thread_connection", lambda: None)()
    if connection is not None:
        connection.close(reset=True)
    session.sparkContext.cancelAllJobs()
