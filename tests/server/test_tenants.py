"""API keys: hashed at rest, authenticated by id, revocable; and the `worthit keys` CLI."""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from worthit.market.store import MarketStore
from worthit.service.tenants import (
    InvalidKeyError,
    KeyNotFoundError,
    MalformedKeyError,
    PriorityClass,
    RevokedKeyError,
    Tenant,
    TenantStore,
    UnknownKeyError,
    parse_key_id,
)

from conftest import run_cli


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "worthit.db"


@pytest.fixture
def store(db: Path) -> TenantStore:
    return TenantStore(db)


def test_create_then_authenticate(store: TenantStore) -> None:
    key_id, key = store.create("acme", "high", 600, 20_000)
    assert key.startswith(f"{key_id}_")
    assert parse_key_id(key) == key_id
    assert store.authenticate(key) == Tenant(
        name="acme",
        key_id=key_id,
        priority=PriorityClass.HIGH,
        requests_per_minute=600,
        llm_tokens_per_minute=20_000,
    )


def test_only_the_hash_is_stored(store: TenantStore, db: Path) -> None:
    key_id, key = store.create("acme", PriorityClass.LOW, 10, 100)
    secret = key.removeprefix(f"{key_id}_")
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute("SELECT * FROM api_keys").fetchall()
        (key_hash,) = conn.execute("SELECT key_hash FROM api_keys").fetchone()
    finally:
        conn.close()
    assert rows and all(key not in map(str, row) for row in rows)
    assert key_hash == hashlib.sha256(key.encode()).hexdigest()
    on_disk = b"".join(p.read_bytes() for p in db.parent.glob(f"{db.name}*"))
    assert secret.encode() not in on_disk


def test_keys_are_distinct(store: TenantStore) -> None:
    keys = {store.create("acme", "medium", 1, 1)[1] for _ in range(20)}
    assert len(keys) == 20


@pytest.mark.parametrize(
    "text",
    [
        "",
        "Bearer wk_0123456789ab_xxxxxxxxxxxxxxxxxxxxxxxxxx",
        "wk_0123456789ab",
        "wk_0123456789ab_",
        "wk_0123456789ab_short",
        "wk_0123456789AB_xxxxxxxxxxxxxxxxxxxxxxxxxxxx",  # upper-case id
        "wk_0123456789a_xxxxxxxxxxxxxxxxxxxxxxxxxxxxx",  # id too short
        "sk_0123456789ab_xxxxxxxxxxxxxxxxxxxxxxxxxxxx",
        "wk_0123456789ab_" + "x" * 300,
        "wk_0123456789ab_xxxxxxxxxxxx xxxxxxxxxxxxxxxxx",
        "wk_0123456789ab_ключключключключключключ",
    ],
)
def test_malformed_keys_are_401(store: TenantStore, text: str) -> None:
    with pytest.raises(MalformedKeyError) as caught:
        store.authenticate(text)
    assert caught.value.status == 401


def test_unknown_id_and_wrong_secret_are_401(store: TenantStore) -> None:
    key_id, key = store.create("acme", "high", 1, 1)
    with pytest.raises(UnknownKeyError) as caught:
        store.authenticate("wk_0123456789ab_" + "A" * 43)
    assert caught.value.status == 401
    wrong_secret = f"{key_id}_" + "A" * 43
    with pytest.raises(UnknownKeyError):
        store.authenticate(wrong_secret)
    store.authenticate(key)  # now cached: the wrong secret is still refused
    with pytest.raises(UnknownKeyError):
        store.authenticate(wrong_secret)


def test_revoked_key_is_403_at_once_in_the_same_store(store: TenantStore) -> None:
    key_id, key = store.create("acme", "high", 1, 1)
    store.authenticate(key)  # cached
    info = store.revoke(key_id)
    assert info.revoked and info.revoked_at is not None
    with pytest.raises(RevokedKeyError) as caught:
        store.authenticate(key)
    assert caught.value.status == 403
    assert not isinstance(caught.value, InvalidKeyError)


def test_revocation_elsewhere_takes_effect_within_the_cache_ttl(db: Path) -> None:
    clock = FakeClock()
    server = TenantStore(db, cache_ttl=2.0, clock=clock)
    key_id, key = server.create("acme", "high", 1, 1)
    server.authenticate(key)
    TenantStore(db).revoke(key_id)  # `worthit keys revoke`, another process
    clock.now = 1.9
    server.authenticate(key)  # still cached: the documented window
    clock.now = 2.0
    with pytest.raises(RevokedKeyError):
        server.authenticate(key)


def test_revoke_twice_keeps_the_first_time_and_accepts_the_whole_key(
    store: TenantStore,
) -> None:
    key_id, key = store.create("acme", "low", 1, 1)
    first = store.revoke(key)
    assert first.key_id == key_id
    assert store.revoke(key_id).revoked_at == first.revoked_at


@pytest.mark.parametrize("key_id", ["wk_0123456789ab", "nonsense"])
def test_revoke_unknown_key(store: TenantStore, key_id: str) -> None:
    with pytest.raises(KeyNotFoundError):
        store.revoke(key_id)


def test_list_shows_every_key_oldest_first_without_hashes(store: TenantStore) -> None:
    first, _ = store.create("acme", "high", 600, 20_000)
    second, _ = store.create("globex", "low", 5, 50)
    store.revoke(second)
    keys = store.list()
    assert [k.key_id for k in keys] == [first, second]
    assert [k.revoked for k in keys] == [False, True]
    assert set(keys[1].to_dict()) == {
        "key_id",
        "tenant",
        "priority",
        "requests_per_minute",
        "llm_tokens_per_minute",
        "created",
        "revoked_at",
        "scope",
        "source",
    }


@pytest.mark.parametrize(
    ("tenant", "priority", "rpm", "tpm", "field"),
    [
        ("", "high", 1, 1, "tenant"),
        ("a b", "high", 1, 1, "tenant"),
        ("-acme", "high", 1, 1, "tenant"),
        ("x" * 65, "high", 1, 1, "tenant"),
        ("acme", "urgent", 1, 1, "priority"),
        ("acme", "high", 0, 1, "rpm"),
        ("acme", "high", 1, -5, "tpm"),
        ("acme", "high", True, 1, "rpm"),
    ],
)
def test_create_rejects_bad_input_naming_the_field(
    store: TenantStore, tenant: str, priority: str, rpm: int, tpm: int, field: str
) -> None:
    with pytest.raises(ValueError, match=field):
        store.create(tenant, priority, rpm, tpm)


def test_lives_beside_the_market(small_market: Path, tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    shutil.copy(small_market, path)
    _, key = TenantStore(path).create("acme", "high", 1, 1)
    market = MarketStore(path)  # opening the market again migrates nothing away
    assert market.product("S1") is not None
    assert TenantStore(path).authenticate(key).name == "acme"

    fresh = tmp_path / "fresh.db"  # keys first, market created afterwards in the same file
    _, key = TenantStore(fresh).create("acme", "high", 1, 1)
    MarketStore(fresh)
    assert TenantStore(fresh).authenticate(key).name == "acme"


# --- `worthit keys` ------------------------------------------------------------------


def test_cli_create_list_revoke(db: Path) -> None:
    created = run_cli("keys", "create", "--tenant", "acme", "--priority", "high", "--db", str(db))
    assert created.returncode == 0, created.stderr
    key = created.stdout.strip()  # the key alone on stdout, so scripts can capture it
    assert "will not be shown again" in created.stderr
    tenant = TenantStore(db).authenticate(key)
    assert (tenant.priority, tenant.requests_per_minute, tenant.llm_tokens_per_minute) == (
        PriorityClass.HIGH,
        600,
        20_000,
    )

    env = {"WORTHIT_DB": str(db)}  # the same envvar as every other command
    second = run_cli(
        "keys", "create", "--tenant", "globex", "--priority", "LOW", "--rpm", "5", "--tpm", "50",
        "--json", env=env,
    )  # fmt: skip
    assert second.returncode == 0, second.stderr
    made = json.loads(second.stdout)
    assert made["priority"] == "low" and made["requests_per_minute"] == 5
    assert TenantStore(db).authenticate(made["key"]).name == "globex"

    revoked = run_cli("keys", "revoke", tenant.key_id, env=env)
    assert revoked.returncode == 0, revoked.stderr
    assert f"revoked {tenant.key_id}" in revoked.stdout
    with pytest.raises(RevokedKeyError):
        TenantStore(db).authenticate(key)

    listed = run_cli("keys", "list", "--json", env=env)
    rows = json.loads(listed.stdout)
    assert [(r["tenant"], r["revoked_at"] is not None) for r in rows] == [
        ("acme", True),
        ("globex", False),
    ]
    assert key not in listed.stdout and made["key"] not in listed.stdout
    table = run_cli("keys", "list", env=env)
    assert tenant.key_id in table.stdout and "revoked" in table.stdout


def test_cli_errors(db: Path) -> None:
    missing = run_cli("keys", "list", "--db", str(db))
    assert missing.returncode == 2 and "no database" in missing.stderr
    bad = run_cli("keys", "create", "--tenant", "a b", "--priority", "high", "--db", str(db))
    assert bad.returncode == 2 and "tenant" in bad.stderr
    unknown = run_cli("keys", "revoke", "wk_0123456789ab", "--db", str(db))
    assert unknown.returncode == 1 and "no API key" in unknown.stderr
