"""SSE over HTTP/2 with TLS 1.3 against uvicorn over HTTP/1.1 (plain and with TLS): time to
the `verdict` event and answers a second for N concurrent streamed /v1/decide answers.

Each server runs in a child process of its own (this script with --serve) the way
`worthit serve` runs: the bundled model loaded on the main thread, HTTP on another, over a
small simulated market (auth, live simulator and background generator off), with a
certificate from a CA made for the run. The client is httpx (http2=True for h2: every
stream on one connection, as a browser; one connection per shopper for h1), closed loop,
no think time, each question's deadline under the engine's finishing margin, so answers
carry the template text and the figure is the transport's and the decision path's.

    .venv/bin/python bench/tls.py --levels 1,10,50 --seconds 20
    .venv/bin/python bench/tls.py --modes h2,h2-granian --levels 50   # Granian: pip install granian

Modes: h1 (uvicorn, what `worthit serve` runs without a certificate), h1-tls (uvicorn with
ssl_certfile), h2 (Hypercorn through service/https.py, what `worthit serve --tls-cert` runs),
h2-granian (Granian's embedded server, when installed).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import ipaddress
import json
import os
import random
import shutil
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import httpx
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from service import QUESTIONS, Answer, free_port, one, pct
from worthit.demo.simulator import simulate
from worthit.market.store import MarketStore

MODES = ("h1", "h1-tls", "h2", "h2-granian")
DEADLINE_MS = 100


def make_certs(folder: Path) -> tuple[Path, Path, Path]:
    """(ca, cert chain, key): a CA and a leaf for 127.0.0.1 and localhost."""
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)

    def certificate(
        name: str, public: ec.EllipticCurvePublicKey, issuer: x509.Name | None, ca: bool
    ) -> x509.Certificate:
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        builder = (
            x509.CertificateBuilder().subject_name(subject).issuer_name(issuer or subject)
            .public_key(public).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )  # fmt: skip
        if not ca:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
                ),
                critical=False,
            )
        return builder.sign(ca_key, hashes.SHA256())

    ca = certificate("bench CA", ca_key.public_key(), None, ca=True)
    leaf = certificate("localhost", key.public_key(), ca.subject, ca=False)
    pem = serialization.Encoding.PEM
    (folder / "ca.pem").write_bytes(ca.public_bytes(pem))
    (folder / "cert.pem").write_bytes(leaf.public_bytes(pem) + ca.public_bytes(pem))
    (folder / "key.pem").write_bytes(
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return folder / "ca.pem", folder / "cert.pem", folder / "key.pem"


# -- the server side (a child process) ------------------------------------------------


def serve(mode: str, db: Path, port: int, cert: Path, key: Path, threads: int) -> None:
    from worthit.engine.config import EngineConfig
    from worthit.engine.engine import Engine
    from worthit.engine.model_files import resolve_model_path
    from worthit.engine.runner import LlamaRunner
    from worthit.http.app import create_app
    from worthit.service import runtime
    from worthit.service.https import TlsFiles
    from worthit.service.settings import ServiceSettings

    model = resolve_model_path(None)
    config = EngineConfig(n_threads=threads)
    settings = ServiceSettings(
        db_path=db, model_path=model, engine_config=config, auth=False, background=False,
        ticker_rate=0.0, freshness=False,
    )  # fmt: skip
    engine = Engine(LlamaRunner(model, config), config)
    engine.claim_current_thread()
    app = create_app(settings, engine=engine)
    if mode in ("h1", "h2"):  # what `worthit serve` runs, without and with --tls-cert
        tls = TlsFiles(cert, key) if mode == "h2" else None
        runtime.run(app, engine, "127.0.0.1", port, engine_nice=runtime.ENGINE_NICE, tls=tls)
        return
    run, stop = (
        uvicorn_tls(app, port, cert, key) if mode == "h1-tls" else granian(app, port, cert, key)
    )

    def serve_http() -> None:
        try:
            run()
        finally:
            engine.stop()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop())
    http = threading.Thread(target=serve_http, name="worthit-http")
    http.start()
    engine.run_here()
    http.join()
    engine.close()


def uvicorn_tls(
    app: object, port: int, cert: Path, key: Path
) -> tuple[Callable[[], None], Callable[[], None]]:
    import uvicorn

    from worthit.service.transport import uvicorn_config

    config = uvicorn_config(app, "127.0.0.1", port)  # type: ignore[arg-type]
    config.ssl_certfile, config.ssl_keyfile = str(cert), str(key)
    server = uvicorn.Server(config)

    def stop() -> None:
        server.should_exit = True

    return server.run, stop


def granian(
    app: object, port: int, cert: Path, key: Path
) -> tuple[Callable[[], None], Callable[[], None]]:
    from granian.constants import HTTPModes, Interfaces, SSLProtocols
    from granian.server.embed import Server

    server = Server(
        app, address="127.0.0.1", port=port, interface=Interfaces.ASGI, http=HTTPModes.auto,
        ssl_cert=cert, ssl_key=key, ssl_protocol_min=SSLProtocols.tls13, log_level="warning",
    )  # fmt: skip
    loop = asyncio.new_event_loop()

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(server.serve())

    def stop() -> None:
        loop.call_soon_threadsafe(server.stop)

    return run, stop


# -- the client side ------------------------------------------------------------------


async def level(
    base: str, http2: bool, verify: ssl.SSLContext | bool, titles: list[str], clients: int,
    seconds: float, seed: int,
) -> dict[str, object]:  # fmt: skip
    rng = random.Random(seed)
    answers: list[Answer] = []
    versions: Counter[str] = Counter()
    limits = httpx.Limits(max_connections=clients + 5, max_keepalive_connections=clients + 5)
    async with httpx.AsyncClient(
        base_url=base, http2=http2, verify=verify, timeout=60, limits=limits
    ) as client:
        for _ in range(20):  # warm: connections, handshakes, caches
            await one(client, rng.choice(QUESTIONS["en"]).format(name=titles[0]), "en", DEADLINE_MS)
        versions[(await client.get("/healthz")).http_version] += 1
        stop_at = time.perf_counter() + seconds

        async def shopper() -> None:
            while time.perf_counter() < stop_at:
                question = rng.choice(QUESTIONS["en"]).format(name=rng.choice(titles))
                try:
                    answers.append(await one(client, question, "en", DEADLINE_MS))
                except httpx.HTTPError as exc:
                    answers.append(Answer("en", f"error:{type(exc).__name__}"))

        started = time.perf_counter()
        await asyncio.gather(*(shopper() for _ in range(clients)))
        elapsed = time.perf_counter() - started
    done = [a for a in answers if a.done_ms is not None and a.verdict_ms is not None]
    verdicts = [a.verdict_ms for a in done if a.verdict_ms is not None]
    return {
        "clients": clients,
        "http": dict(versions),
        "answers": len(answers),
        "answers_per_s": round(len(done) / elapsed, 1),
        "errors": dict(Counter(a.source for a in answers if a.source.startswith("error:"))),
        "verdict_p50_ms": pct(verdicts, 50),
        "verdict_p99_ms": pct(verdicts, 99),
        "done_p50_ms": pct([a.done_ms for a in done if a.done_ms is not None], 50),
    }


def wait_ready(base: str, verify: ssl.SSLContext | bool, child: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if child.poll() is not None:
            sys.exit(f"the server exited with {child.returncode}")
        try:
            if httpx.get(base + "/readyz", verify=verify, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    sys.exit("the server did not get ready")


MEDIANS = ("answers_per_s", "verdict_p50_ms", "verdict_p99_ms")


def median(runs: list[dict[str, object]], key: str) -> float | None:
    values = [float(str(r[key])) for r in runs if r.get(key) is not None]
    return round(statistics.median(values), 1) if values else None


def run_mode(
    mode: str, market: Path, scratch: Path, certs: tuple[Path, Path, Path], titles: list[str],
    args: argparse.Namespace,
) -> list[dict[str, object]]:  # fmt: skip
    ca, cert, key = certs
    db = scratch / f"{mode}.db"  # each server its own copy: the audit log has one writer
    shutil.copy(market, db)
    port = free_port()
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve", mode, "--db", str(db), "--port", str(port),
         "--cert", str(cert), "--key", str(key), "--threads", str(args.threads)],
        stderr=subprocess.DEVNULL, env={**os.environ, "NO_COLOR": "1"},
    )  # fmt: skip
    tls = mode != "h1"
    base = f"{'https' if tls else 'http'}://127.0.0.1:{port}"
    verify: ssl.SSLContext | bool = ssl.create_default_context(cafile=ca) if tls else True
    try:
        wait_ready(base, verify, child)
        return [
            asyncio.run(
                level(base, mode.startswith("h2"), verify, titles, clients, args.seconds, i + 1)
            )
            for i, clients in enumerate(int(x) for x in args.levels.split(","))
        ]
    finally:
        child.send_signal(signal.SIGINT)
        try:
            child.wait(timeout=60)
        except subprocess.TimeoutExpired:
            child.kill()
        db.unlink(missing_ok=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--levels", default="1,10,50", help="concurrent shoppers")
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument(
        "--rounds", type=int, default=1, help="run every mode this often, interleaved; medians"
    )
    parser.add_argument("--threads", type=int, default=2, help="llama.cpp threads")
    parser.add_argument("--skus", type=int, default=200, help="products in the market")
    parser.add_argument("--serve", choices=MODES, help=argparse.SUPPRESS)
    parser.add_argument("--db", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--cert", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--key", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.db, args.port, args.cert, args.key, args.threads)
        return
    modes = [m for m in args.modes.split(",") if m]
    if "h2-granian" in modes:
        try:
            import granian  # noqa: F401
        except ImportError:
            print(json.dumps({"mode": "h2-granian", "skipped": "granian is not installed"}))
            modes.remove("h2-granian")
    scratch = Path(tempfile.mkdtemp(prefix="worthit-tls-bench-"))
    try:
        ca, cert, key = make_certs(scratch)
        market = scratch / "market.db"
        store = MarketStore(market)
        simulate(store, skus=args.skus, days=120, seed=7)  # ending today, as the clock
        titles = [hit.title for hit in store.all_names()]
        store.close()
        results: dict[tuple[str, int], list[dict[str, object]]] = {}
        for _ in range(args.rounds):
            for mode in modes:
                for result in run_mode(mode, market, scratch, (ca, cert, key), titles, args):
                    print(json.dumps({"mode": mode, **result}), flush=True)
                    results.setdefault((mode, int(str(result["clients"]))), []).append(result)
        if args.rounds > 1:
            for (mode, clients), runs in results.items():
                medians = {k: median(runs, k) for k in MEDIANS}
                print(json.dumps({"median_of": len(runs), "mode": mode, "clients": clients,
                                  **medians}), flush=True)  # fmt: skip
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
