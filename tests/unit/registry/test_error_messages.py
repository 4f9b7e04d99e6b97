"""Registry client errors name what failed: the request a 404 answered, a URL with a bad
port (as a ConfigError), never the credentials a URL carries."""

from __future__ import annotations

import re

import pytest

from kontrakt.errors import ConfigError, SchemaRegistryError
from kontrakt.registry import SchemaRegistryClient, SubjectNotFoundError
from kontrakt.registry.server import RegistryServer


def test_a_404_names_the_request_and_the_likely_mistake() -> None:
    with RegistryServer() as srv:
        with SchemaRegistryClient({"url": srv.url + "/api"}) as client, \
                pytest.raises(SchemaRegistryError) as info:
            client.get_subjects()
        assert f"(GET {srv.url}/api/subjects)" in str(info.value)
        assert "is the client's url the registry's base URL?" in str(info.value)
        assert info.value.http_status_code == 404

        with SchemaRegistryClient({"url": srv.url}) as client, \
                pytest.raises(SubjectNotFoundError) as missing:
            client.get_latest_version("nothing-value")
        assert f"(GET {srv.url}/subjects/nothing-value/versions/latest)" in str(missing.value)
        assert "base URL" not in str(missing.value)
        # The cached negative answer says the same.
        with pytest.raises(SubjectNotFoundError) as again:
            client.get_latest_version("nothing-value")
        assert str(again.value) == str(missing.value)


@pytest.mark.parametrize("url", ["http://127.0.0.1:99999", "http://127.0.0.1:0",
                                 "http://127.0.0.1:port"])
def test_an_out_of_range_port_is_a_config_error(url: str) -> None:
    with pytest.raises(ConfigError) as info:
        SchemaRegistryClient({"url": url})
    assert str(info.value) == (f"invalid registry url {url!r}: the port must be a number "
                               "in 1..65535")


@pytest.mark.parametrize("url", ["htp://bob:s3cret-pw@127.0.0.1:8081",
                                 "bob:s3cret-pw@127.0.0.1:8081",
                                 "http://bob:s3cret-pw@127.0.0.1:123456"])
def test_a_bad_url_is_shown_without_its_credentials(url: str) -> None:
    with pytest.raises(ConfigError) as info:
        SchemaRegistryClient({"url": url})
    assert "s3cret-pw" not in str(info.value) and "bob" not in str(info.value)
    assert re.search(r"'[a-z]*:?/*\*\*\*@127\.0\.0\.1:\d+'", str(info.value)), info.value
