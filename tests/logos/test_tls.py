"""The TLS logos's clients shake hands with (`logos.tls`): an HTTPS endpoint is verified by
the CA bundle, or by the user's `SSL_CERT_FILE`, with one context per process; a plain-HTTP
endpoint's client never shakes hands, and if it tried, it would fail closed."""

from __future__ import annotations

import ssl

import httpx
import pytest

from logos.tls import tls_for, tls_problem
from tests.support.cli_harness import Home, logos, openai_env
from tests.support.private_ca import PrivateCA, make_private_ca
from tests.support.sse_server import ScriptedServer, openai_stream


@pytest.fixture(scope="module")
def private_ca(tmp_path_factory: pytest.TempPathFactory) -> PrivateCA:
    return make_private_ca(tmp_path_factory.mktemp("ca"))


@pytest.mark.parametrize("model", [["--model", "m"], []], ids=["named", "listed"])
def test_an_https_server_behind_a_private_ca_is_reached_through_ssl_cert_file(
    model: list[str], home: Home, private_ca: PrivateCA
) -> None:
    with ScriptedServer(tls=private_ca.server_context()) as server:
        server.enqueue(openai_stream("<cmd>echo over tls</cmd>"), openai_stream("Done, over TLS."))
        env = openai_env(home, server, SSL_CERT_FILE=str(private_ca.ca_file))
        done = logos([*model, "--yes", "go"], home, env)

    assert server.base_url.startswith("https://127.0.0.1:")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Done, over TLS.\n"
    assert len(server.requests) == 2
    assert len(server.model_requests) == 1  # the listing (which model, whose server): TLS too


@pytest.mark.parametrize("model", [["--model", "m"], []], ids=["named", "listed"])
def test_an_https_server_the_trust_store_does_not_know_is_refused_at_once_saying_what_to_do(
    model: list[str], home: Home, private_ca: PrivateCA
) -> None:
    with ScriptedServer(tls=private_ca.server_context()) as server:
        server.enqueue(openai_stream("never read"))
        done = logos([*model, "--yes", "go"], home, openai_env(home, server))

    assert done.returncode == 2
    assert f"{server.base_url}/v1" in done.stderr  # which endpoint it could not trust
    assert "the TLS certificate of 127.0.0.1 is not trusted" in done.stderr, done.stderr
    assert "set SSL_CERT_FILE to that CA's certificate" in done.stderr
    assert "retrying" not in done.stderr  # another try cannot fix it
    assert server.requests == [] and server.model_requests == []


@pytest.mark.parametrize("model", [["--model", "m"], []], ids=["named", "listed"])
def test_https_written_for_a_plain_http_server_is_named_at_once_with_the_address_to_write(
    model: list[str], home: Home
) -> None:
    with ScriptedServer() as server:
        server.enqueue(openai_stream("never read"))
        written = server.base_url.replace("http://", "https://") + "/v1"
        env = home.env(OPENAI_BASE_URL=written, OPENAI_API_KEY="test-key")
        done = logos([*model, "--yes", "go"], home, env)

    assert done.returncode == 2
    host_port = written.split("/")[2]
    assert f"{host_port} answered in plain HTTP, not TLS: write its address with http:// " in (
        done.stderr
    ), done.stderr
    assert f"({server.base_url}/v1)" in done.stderr  # the address to write instead
    assert "retrying" not in done.stderr
    assert server.requests == []


def test_the_plain_address_keeps_the_port_the_server_answered_on() -> None:
    answer = ssl.SSLError(1, "[SSL: WRONG_VERSION_NUMBER] wrong version number")
    answer.reason = "WRONG_VERSION_NUMBER"
    failure = httpx.ConnectError(str(answer))
    failure.__cause__ = answer

    problem = tls_problem("https://models.example/v1", failure)

    assert problem is not None
    assert problem.endswith("write its address with http:// (http://models.example:443/v1)")
    assert tls_problem("https://models.example/v1", httpx.ConnectError("refused")) is None


def test_a_plain_http_endpoints_context_trusts_no_certificate(private_ca: PrivateCA) -> None:
    with ScriptedServer(tls=private_ca.server_context()) as server:
        plain = tls_for("http://127.0.0.1:8080/v1")
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            httpx.get(f"{server.base_url}/v1/models", verify=plain)
        assert server.model_requests == []


def test_one_verifying_context_serves_every_https_client_of_a_process() -> None:
    assert tls_for("https://api.openai.com/v1") is tls_for(httpx.URL("https://127.0.0.1:1"))
    assert tls_for("http://127.0.0.1:8080/v1") is tls_for("http://temenos")
    assert tls_for("http://127.0.0.1:8080/v1") is not tls_for("https://127.0.0.1:8080/v1")


def test_logos_project_names_the_untrusted_certificate_of_its_server(
    home: Home, private_ca: PrivateCA
) -> None:
    token_file = home.root / "serve.token"
    token_file.write_text("t" * 43 + "\n")
    token_file.chmod(0o600)
    with ScriptedServer(tls=private_ca.server_context()) as server:
        url = server.base_url.rsplit("/", 1)[0]  # the server's root
        args = ["project", "--url", url, "--token-file", str(token_file), "list"]
        done = logos(args, home, home.env())

    assert done.returncode == 2
    assert f"cannot reach logos serve at {url}: the TLS certificate of 127.0.0.1" in done.stderr
    assert "SSL_CERT_FILE" in done.stderr, done.stderr
