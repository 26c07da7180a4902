"""HTTPS on Hypercorn: TLS 1.3 only, HTTP/2 by ALPN with HTTP/1.1 beside it, the transport
limits, and the CLI's checks of its certificate and key, against a CA the tests make."""

from __future__ import annotations

import datetime
import ipaddress
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from typer.testing import CliRunner

from worthit.cli.app import app as cli_app
from worthit.http.app import create_app
from worthit.service.https import HttpsServer, TlsFiles, adopt
from worthit.service.transport import DEFAULT_LIMITS, TransportLimits

from service_fixtures import fake_engine, market_settings, start_workers

SSE = {"Accept": "text/event-stream"}
NOT_BEFORE = datetime.datetime(2000, 1, 1, tzinfo=datetime.UTC)
NOT_AFTER = datetime.datetime(2999, 1, 1, tzinfo=datetime.UTC)
"""Fixed validity: the suite runs under faketime on any day."""


@dataclass(frozen=True)
class Certs:
    ca: Path
    cert: Path
    key: Path
    other_key: Path
    """A key of no certificate here."""


def _pem_key(key: ec.EllipticCurvePrivateKey, path: Path) -> Path:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return path


def _certificate(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: x509.Name | None,
    signer: ec.EllipticCurvePrivateKey,
    ca: bool,
) -> x509.Certificate:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer or name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(NOT_BEFORE)
        .not_valid_after(NOT_AFTER)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), True
        )
        builder = builder.add_extension(
            x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False
        )
    else:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        ).add_extension(
            x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
        )
    return builder.sign(signer, hashes.SHA256())


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    """A CA and a leaf it signed for localhost and 127.0.0.1."""
    folder = tmp_path_factory.mktemp("tls")
    ca_key, leaf_key = (
        ec.generate_private_key(ec.SECP256R1()),
        ec.generate_private_key(ec.SECP256R1()),
    )
    ca = _certificate("worthit test CA", ca_key, None, ca_key, ca=True)
    leaf = _certificate("localhost", leaf_key, ca.subject, ca_key, ca=False)
    (folder / "ca.pem").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    (folder / "cert.pem").write_bytes(
        leaf.public_bytes(serialization.Encoding.PEM) + ca.public_bytes(serialization.Encoding.PEM)
    )
    return Certs(
        ca=folder / "ca.pem",
        cert=folder / "cert.pem",
        key=_pem_key(leaf_key, folder / "key.pem"),
        other_key=_pem_key(ec.generate_private_key(ec.SECP256R1()), folder / "other.pem"),
    )


def client_context(certs: Certs, maximum: ssl.TLSVersion | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=certs.ca)
    if maximum is not None:
        context.maximum_version = maximum
    return context


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def https_serving(
    market: Path,
    certs: Certs,
    limits: TransportLimits = DEFAULT_LIMITS,
    sock: socket.socket | None = None,
) -> Iterator[str]:
    """The service on the fake engine behind the real HttpsServer, in a thread (on `sock`
    when given); yields its base URL."""
    engine = fake_engine()
    app = create_app(market_settings(market, auth=False), engine=engine)
    port = free_port() if sock is None else sock.getsockname()[1]
    tls = TlsFiles(certs.cert, certs.key)
    server = HttpsServer(app, "127.0.0.1", port, tls, limits, sock=sock)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started:
            if time.monotonic() > deadline or not thread.is_alive():
                raise RuntimeError("hypercorn did not start")
            time.sleep(0.01)
        yield f"https://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        engine.close()


def copy_of(small_market: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A market of one server's own (each server holds its audit log's lock)."""
    path = tmp_path_factory.mktemp("tls-market") / "market.db"
    shutil.copy(small_market, path)
    return path


@pytest.fixture(scope="module")
def market(small_market: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_of(small_market, tmp_path_factory)


@pytest.fixture(scope="module")
def service(market: Path, certs: Certs) -> Iterator[str]:
    with https_serving(market, certs) as base:
        yield base


def events(response: httpx.Response) -> list[str]:
    return [line[7:] for line in response.iter_lines() if line.startswith("event: ")]


def test_http2_over_tls13_with_the_security_headers(service: str, certs: Certs) -> None:
    with httpx.Client(http2=True, verify=client_context(certs)) as client:
        r = client.get(service + "/healthz")
        tls = r.extensions["network_stream"].get_extra_info("ssl_object")
    assert r.status_code == 200 and r.http_version == "HTTP/2"
    assert tls.version() == "TLSv1.3" and tls.selected_alpn_protocol() == "h2"
    assert r.headers["x-content-type-options"] == "nosniff"
    assert r.headers["referrer-policy"] == "no-referrer"
    assert "frame-ancestors 'none'" in r.headers["content-security-policy"]
    assert "server-timing" in r.headers


def test_decide_streams_its_verdict_and_done_over_http2(service: str, certs: Certs) -> None:
    with (
        httpx.Client(http2=True, verify=client_context(certs)) as client,
        client.stream(
            "POST",
            service + "/v1/decide",
            json={"question": "Is the Aurora NC700 worth buying?"},
            headers=SSE,
        ) as r,
    ):
        assert r.http_version == "HTTP/2"
        assert r.headers["content-type"].startswith("text/event-stream")
        names = events(r)
    assert names[0] == "verdict" and names[-1] == "done"


def test_http11_still_works_over_tls(service: str, certs: Certs) -> None:
    with httpx.Client(http2=False, verify=client_context(certs)) as client:
        r = client.post(service + "/v1/decide", json={"question": "Is the Aurora NC700 worth it?"})
    assert r.status_code == 200 and r.http_version == "HTTP/1.1"
    assert r.json()["verdict"] == "BUY"


def test_a_tls12_client_is_refused(service: str, certs: Certs) -> None:
    tls12 = client_context(certs, maximum=ssl.TLSVersion.TLSv1_2)
    with httpx.Client(verify=tls12) as client, pytest.raises(httpx.ConnectError):
        client.get(service + "/healthz")


def test_a_client_that_does_not_trust_the_ca_is_refused(service: str) -> None:
    with httpx.Client(http2=True) as client, pytest.raises(httpx.ConnectError):
        client.get(service + "/healthz")


def test_a_request_head_past_the_cap_is_refused_on_both_protocols(
    service: str, certs: Certs
) -> None:
    cap = DEFAULT_LIMITS.max_header_bytes
    just_past, far_past = {"x-filler": "a" * cap}, {"x-filler": "a" * 5 * cap}
    with httpx.Client(http2=False, verify=client_context(certs)) as h1:
        assert h1.get(service + "/healthz", headers=just_past).status_code == 431
        assert h1.get(service + "/healthz", headers=far_past).status_code == 431
    with httpx.Client(http2=True, verify=client_context(certs)) as h2:
        assert h2.get(service + "/healthz", headers=just_past).status_code == 431
        with pytest.raises(httpx.RemoteProtocolError):  # past h2's header list limit
            h2.get(service + "/healthz", headers=far_past)


def tls_socket(base: str, certs: Certs, timeout: float = 10) -> ssl.SSLSocket:
    port = int(base.rsplit(":", 1)[1])
    raw = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    context = client_context(certs)
    context.set_alpn_protocols(["http/1.1"])
    return context.wrap_socket(raw, server_hostname="localhost")


def closed_by_server(sock: socket.socket) -> bool:
    """True when the server ends the connection (before the test's socket timeout)."""
    try:
        return sock.recv(1024) == b""
    except (ssl.SSLEOFError, ssl.SSLZeroReturnError, ConnectionResetError):
        return True
    except TimeoutError:
        return False


@pytest.fixture(scope="module")
def tight(
    small_market: Path, tmp_path_factory: pytest.TempPathFactory, certs: Certs
) -> Iterator[str]:
    """A server with a short head timeout and room for two connections (a server of its
    own, so no other test's connection, closing late, takes a place)."""
    limits = TransportLimits(header_timeout_s=0.5, max_connections=2)
    with https_serving(copy_of(small_market, tmp_path_factory), certs, limits) as base:
        yield base


def test_a_slow_handshake_and_a_slow_head_are_cut_off(tight: str, certs: Certs) -> None:
    port = int(tight.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as silent:
        assert closed_by_server(silent)  # never began its handshake
    with tls_socket(tight, certs) as slow:
        slow.sendall(b"GET /healthz HTTP/1.1\r\nhost: localhost\r\n")  # and no more
        assert closed_by_server(slow)


def test_connections_past_the_cap_are_closed_before_their_handshake(
    tight: str, certs: Certs
) -> None:
    held = [tls_socket(tight, certs), tls_socket(tight, certs)]
    try:
        with pytest.raises((ssl.SSLError, ConnectionError)):
            tls_socket(tight, certs).close()
    finally:
        for sock in held:
            sock.close()
    # the places come back once the server has seen those two close
    deadline = time.monotonic() + 10
    while True:
        try:
            with httpx.Client(http2=True, verify=client_context(certs)) as client:
                assert client.get(tight + "/healthz").status_code == 200
            break
        except httpx.HTTPError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def test_it_serves_http2_on_a_socket_bound_before_it(
    small_market: Path, tmp_path_factory: pytest.TempPathFactory, certs: Certs
) -> None:
    """As each `--workers` worker does, on the socket its parent bound."""
    sock = socket.create_server(("127.0.0.1", 0))
    market = copy_of(small_market, tmp_path_factory)
    with (
        https_serving(market, certs, sock=sock) as base,
        httpx.Client(http2=True, verify=client_context(certs)) as client,
    ):
        r = client.get(base + "/healthz")
    assert r.status_code == 200 and r.http_version == "HTTP/2"


def test_an_adopted_socket_says_tcp_so_asyncio_sets_nodelay_on_its_connections() -> None:
    bound = socket.create_server(("127.0.0.1", 0))
    assert bound.proto == 0
    with adopt(bound, cap=1) as listener:
        assert listener.proto == socket.IPPROTO_TCP and bound.fileno() == -1


def test_the_cli_names_the_tls_option_at_fault(certs: Certs, market: Path, tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    cases = {
        "--tls-cert": [
            ("--tls-cert", str(tmp_path / "missing.pem"), "--tls-key", str(certs.key)),
            ("--tls-cert", str(garbage), "--tls-key", str(certs.key)),
            ("--tls-key", str(certs.key)),
        ],
        "--tls-key": [
            ("--tls-cert", str(certs.cert), "--tls-key", str(tmp_path)),  # a folder
            ("--tls-cert", str(certs.cert), "--tls-key", str(certs.other_key)),
            ("--tls-cert", str(certs.cert), "--tls-key", str(certs.ca)),
        ],
    }
    runner = CliRunner()  # a model that is not there: the check comes before the model loads
    for option, argument_lists in cases.items():
        for arguments in argument_lists:
            result = runner.invoke(
                cli_app,
                ["serve", "--db", str(market), "--model", "/nowhere.gguf", *arguments],
                env={"NO_COLOR": "1", "COLUMNS": "200"},
            )
            said = " ".join(result.output.split())
            assert result.exit_code == 2, (arguments, said)
            assert option in said and "Traceback" not in said, (arguments, said)


@pytest.mark.slow
def test_worthit_serve_over_https_with_the_bundled_model(
    small_market: Path, certs: Certs, tmp_path: Path
) -> None:
    """The CLI's path: runtime.run puts Hypercorn on a thread, the engine on the main one."""
    market = tmp_path / "market.db"
    shutil.copy(small_market, market)
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "worthit", "serve", "--demo", "--db", str(market),
         "--port", str(port), "--no-background", "--live-rate", "0",
         "--stale-price-days", "36500",  # the small market ends on a pinned day, long past
         "--tls-cert", str(certs.cert), "--tls-key", str(certs.key)],
        stderr=subprocess.PIPE, text=True, env={**os.environ, "NO_COLOR": "1"},
    )  # fmt: skip
    base = f"https://127.0.0.1:{port}"
    try:
        with httpx.Client(http2=True, verify=client_context(certs), timeout=60) as client:
            deadline = time.monotonic() + 120
            while True:
                try:
                    if client.get(base + "/readyz").status_code == 200:
                        break
                except httpx.ConnectError:
                    pass
                assert server.poll() is None and time.monotonic() < deadline
                time.sleep(0.2)
            with client.stream(
                "POST",
                base + "/v1/decide",
                json={"question": "Is the Aurora NC700 worth buying?"},
                headers=SSE,
            ) as r:
                assert r.http_version == "HTTP/2"
                lines = list(r.iter_lines())
        names = [line[7:] for line in lines if line.startswith("event: ")]
        data = [json.loads(line[6:]) for line in lines if line.startswith("data: ")]
        assert names[0] == "verdict" and names[-1] == "done"
        assert data[0]["verdict"] == "BUY" and data[-1]["explanation_source"] in ("llm", "template")
    finally:
        server.send_signal(signal.SIGINT)
        _, stderr = server.communicate(timeout=60)
    assert server.returncode == 0, stderr
    assert f"https://127.0.0.1:{port}" in stderr


def _children(pid: int) -> set[int]:
    """The processes whose parent is `pid` (Linux's /proc)."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.add(int(stat.parent.name))
    return found


def _running(pid: int) -> bool:
    """Alive and not a zombie (an orphan's may wait for a reaper that never comes)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _readyz_over_h2(base: str, certs: Certs) -> tuple[httpx.Response, ssl.SSLObject] | None:
    """/readyz on a connection of its own, and that connection's TLS."""
    try:
        with httpx.Client(http2=True, verify=client_context(certs), timeout=10) as client:
            r = client.get(base + "/readyz")
            return r, r.extensions["network_stream"].get_extra_info("ssl_object")
    except httpx.HTTPError:
        return None


@pytest.mark.slow
def test_two_workers_serve_https_on_one_port_and_stop_together(
    small_market: Path, certs: Certs, tmp_path: Path
) -> None:
    port = free_port()
    base = f"https://127.0.0.1:{port}"
    server = start_workers(
        small_market, tmp_path, port, "--tls-cert", str(certs.cert), "--tls-key", str(certs.key)
    )
    try:
        give_up = time.monotonic() + 180
        while (answer := _readyz_over_h2(base, certs)) is None or answer[0].status_code != 200:
            assert server.poll() is None, (tmp_path / "serve.log").read_text()[-3000:]
            assert time.monotonic() < give_up, "no worker became ready"
            time.sleep(0.2)
        seen: dict[int, int] = {}
        for _ in range(400):
            answer = _readyz_over_h2(base, certs)
            assert answer is not None
            r, tls = answer
            assert r.http_version == "HTTP/2" and tls.version() == "TLSv1.3"
            if r.status_code == 200:
                seen[r.json()["worker"]["index"]] = r.json()["worker"]["pid"]
            if len(seen) == 2:
                break
        assert set(seen) == {0, 1}, seen
        processes = _children(server.pid)
        assert set(seen.values()) < processes  # and the engine's, multiprocessing's tracker

        server.send_signal(signal.SIGINT)
        assert server.wait(timeout=60) == 0, (tmp_path / "serve.log").read_text()[-3000:]
        give_up = time.monotonic() + 30
        while left := {pid for pid in processes if _running(pid)}:
            assert time.monotonic() < give_up, f"still running: {left}"
            time.sleep(0.1)
        assert "https://127.0.0.1" in (tmp_path / "serve.log").read_text()
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
