"""`kontrakt schemas check` (git and registry modes) and the pytest contract helpers."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest
import respx

from kontrakt.cli import main
from kontrakt.testing.contracts import assert_compatible, assert_folder_compatible

REPO_SCHEMAS = Path(__file__).resolve().parents[3] / "schemas"
USER = REPO_SCHEMAS / "user-value.avsc"


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, timeout=30)


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for key, value in {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
                       "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
                       "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}.items():
        monkeypatch.setenv(key, value)
    git(tmp_path, "init", "-q")
    shutil.copytree(REPO_SCHEMAS, tmp_path / "schemas")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-q", "-m", "v1")
    return tmp_path


def edit_user(repo: Path, extra_field: dict[str, object]) -> None:
    path = repo / "schemas" / "user-value.avsc"
    schema = json.loads(path.read_text())
    schema["fields"].append(extra_field)
    path.write_text(json.dumps(schema))


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(args)
    out = capsys.readouterr()
    return code, out.out + out.err


def test_git_mode_unchanged_then_compatible_then_incompatible(
        repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = str(repo / "schemas")
    code, out = run(["schemas", "check", folder], capsys)
    assert code == 0, out
    assert out.count("OK ") == 4 and "vs 1 previous version(s) [BACKWARD]" in out
    edit_user(repo, {"name": "plan", "type": "string", "default": "free"})
    assert run(["schemas", "check", folder, "--level", "full"], capsys)[0] == 0
    edit_user(repo, {"name": "country", "type": "string"})
    code, out = run(["schemas", "check", folder], capsys)
    assert code == 1
    assert "FAIL  user-value.avsc" in out
    assert "READER_FIELD_MISSING_DEFAULT_VALUE" in out and "'country'" in out
    assert "{oldSchemaVersion: 1}" in out


def test_git_mode_transitive_levels_use_history(
        repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = str(repo / "schemas")
    edit_user(repo, {"name": "plan", "type": "string", "default": "free"})
    git(repo, "commit", "-q", "-am", "v2")
    path = repo / "schemas" / "user-value.avsc"
    schema = json.loads(path.read_text())
    del schema["fields"][-1]["default"]  # v3: 'plan' loses its default
    path.write_text(json.dumps(schema))
    assert run(["schemas", "check", folder], capsys)[0] == 0  # vs v2 only: plan exists there
    code, out = run(["schemas", "check", folder, "--level", "BACKWARD_TRANSITIVE", "--json"],
                    capsys)
    assert code == 1
    report = {r["subject"]: r for r in json.loads(out)}
    assert report["user-value"]["previous"] == 2
    assert not report["user-value"]["compatible"]
    assert any("oldSchemaVersion: 1" in m for m in report["user-value"]["messages"])


def test_git_mode_protobuf_import_reference(
        repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    money = repo / "schemas" / "acme" / "money.proto"
    money.write_text(money.read_text().replace("int64 minor_units", "string minor_units"))
    code, out = run(["schemas", "check", str(repo / "schemas")], capsys)
    assert code == 1
    assert "FAIL  acme/money.proto" in out and "FAIL  payment-value.proto" in out
    assert "FIELD_NAMED_TYPE_CHANGED" in out and "FIELD_SCALAR_KIND_CHANGED" in out


def test_errors_exit_2(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (repo / "schemas" / "user-value.avsc").write_text('{"type": "record"')
    code, out = run(["schemas", "check", str(repo / "schemas")], capsys)
    assert code == 2 and "ERROR user-value.avsc" in out and "not valid JSON" in out
    code, out = run(["schemas", "check", str(repo / "schemas"), "--git", "no-such-rev"], capsys)
    assert code == 2 and "unknown git revision" in out
    # A usage error is exit code 2 too (main() returns it rather than raising SystemExit).
    assert main(["schemas", "check", "--level", "SIDEWAYS"]) == 2
    assert "SIDEWAYS" in capsys.readouterr().err


def test_not_a_git_repository(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    folder = tmp_path / "s"
    folder.mkdir()
    (folder / "x.avsc").write_text('"int"')
    code, out = run(["schemas", "check", str(folder)], capsys)
    assert code == 2 and "not inside a git work tree" in out


def test_a_missing_folder_is_named_not_blamed_on_git(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nonexist"
    code, out = run(["schemas", "check", str(missing)], capsys)
    assert code == 2
    assert out.strip() == f"kontrakt: error: schema folder {str(missing)!r} does not exist"


def test_git_missing_says_so_and_offers_the_registry(
        repo: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(repo / "no-bin-here"))
    code, out = run(["schemas", "check", str(repo / "schemas")], capsys)
    assert code == 2
    assert "git is not installed (or not on PATH)" in out and "--registry URL" in out


REGISTRY = "http://127.0.0.1:18081"


def _registry_routes(router: respx.MockRouter, user_v1: str) -> None:
    router.get(f"{REGISTRY}/subjects/user-value/versions").respond(json=[1])
    router.get(f"{REGISTRY}/subjects/user-value/versions/1").respond(
        json={"subject": "user-value", "version": 1, "id": 1, "schema": user_v1})
    router.get(url__regex=rf"{REGISTRY}/config/user-value.*").respond(
        json={"compatibilityLevel": "FULL"})
    router.get(url__regex=rf"{REGISTRY}/subjects/[^/]+/versions$").respond(
        404, json={"error_code": 40401, "message": "Subject not found"})
    router.get(url__regex=rf"{REGISTRY}/config/.*").respond(
        json={"compatibilityLevel": "BACKWARD"})


def test_registry_mode_with_mocked_http(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "schemas"
    shutil.copytree(REPO_SCHEMAS, folder)
    user_v1 = USER.read_text()
    schema = json.loads(user_v1)
    schema["fields"].append({"name": "plan", "type": "string"})  # FORWARD ok, BACKWARD not
    (folder / "user-value.avsc").write_text(json.dumps(schema))
    with respx.mock(assert_all_called=False) as router:
        _registry_routes(router, user_v1)
        code, out = run(["schemas", "check", str(folder), "--registry", REGISTRY], capsys)
        assert code == 1, out
        assert "FAIL  user-value.avsc" in out and "[FULL]" in out
        assert "OK    order-value.json (subject order-value) vs no previous version" in out
        code, out = run(["schemas", "check", str(folder), "--registry", REGISTRY,
                         "--level", "FORWARD"], capsys)
        assert code == 0, out
    with respx.mock() as router:
        router.get(url__regex=r".*").mock(side_effect=httpx.ConnectError("refused"))
        code, out = run(["schemas", "check", str(folder), "--registry", REGISTRY], capsys)
        assert code == 2 and "unreachable" in out


def test_registry_mode_against_embedded_server(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    server_mod = pytest.importorskip("kontrakt.registry.server")
    folder = tmp_path / "schemas"
    shutil.copytree(REPO_SCHEMAS, folder)
    with server_mod.RegistryServer() as server:
        resp = httpx.post(f"{server.url}/subjects/user-value/versions",
                          json={"schema": USER.read_text()}, timeout=10)
        assert resp.status_code == 200, resp.text
        assert run(["schemas", "check", str(folder), "--registry", server.url], capsys)[0] == 0
        edit_user(tmp_path, {"name": "country", "type": "string"})
        code, out = run(["schemas", "check", str(folder), "--registry", server.url], capsys)
        assert code == 1 and "READER_FIELD_MISSING_DEFAULT_VALUE" in out
        # The server enforces the same engine: registering the change is refused with 409.
        resp = httpx.post(f"{server.url}/subjects/user-value/versions",
                          json={"schema": (folder / "user-value.avsc").read_text()}, timeout=10)
        assert resp.status_code == 409, resp.text


def test_assert_compatible_helper(tmp_path: Path) -> None:
    v1 = USER.read_text()
    schema = json.loads(v1)
    schema["fields"].append({"name": "plan", "type": "string"})
    v2 = json.dumps(schema)
    assert assert_compatible(v2, v1, "FORWARD").is_compatible
    with pytest.raises(AssertionError, match="READER_FIELD_MISSING_DEFAULT_VALUE"):
        assert_compatible(v2, [v1], "BACKWARD")
    path = tmp_path / "new.avsc"
    path.write_text(v2)
    with pytest.raises(AssertionError, match="not FULL compatible"):
        assert_compatible(path, USER, "full")
    assert_compatible(REPO_SCHEMAS / "order-value.json", REPO_SCHEMAS / "order-value.json")


def test_assert_folder_compatible_helper(repo: Path) -> None:
    assert_folder_compatible(repo / "schemas")
    edit_user(repo, {"name": "country", "type": "string"})
    with pytest.raises(AssertionError, match=r"FAIL  user-value\.avsc"):
        assert_folder_compatible(repo / "schemas", git="HEAD", level="BACKWARD")
