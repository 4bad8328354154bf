"""SCRAM credentials in ``/config/users`` on a real ZooKeeper: Kafka's JSON and encoding, other keys
kept, change notifications, and reads that survive a corrupt znode."""

from __future__ import annotations

import json
import logging

import pytest
from kazoo.exceptions import NoNodeError

from placement.errors import AdminError
from security.sasl import ScramCredential, derive_credential
from zkstore import users
from zkstore.aio import AsyncZooKeeper
from zkstore.entity_configs import CONFIG_CHANGES

pytestmark = pytest.mark.zookeeper


def credential(iterations: int = 4096, password: str = "pw") -> ScramCredential:
    return derive_credential("SCRAM-SHA-256", password, iterations, salt=b"salt")


async def stored(zk: AsyncZooKeeper, user: str) -> dict[str, object]:
    data, _ = await zk.get(users.user_config_path(user))
    decoded: dict[str, object] = json.loads(data)
    return decoded


async def notifications(zk: AsyncZooKeeper) -> list[dict[str, object]]:
    children = sorted(await zk.get_children(CONFIG_CHANGES))
    return [json.loads((await zk.get(f"{CONFIG_CHANGES}/{child}"))[0]) for child in children]


def test_user_names_are_encoded_as_kafka_does() -> None:
    assert users.sanitize("alice") == "alice"
    assert users.sanitize("a b*c+d~e/f@g") == "a%20b%2Ac%2Bd%7Ee%2Ff%40g"
    assert users.sanitize("é.-_") == "%C3%A9.-_"
    assert users.desanitize("a%20b%2Ac%2Bd%7Ee%2Ff%40g") == "a b*c+d~e/f@g"
    assert users.desanitize("a+b") == "a b"


async def test_write_then_read_a_credential(zk: AsyncZooKeeper) -> None:
    await users.set_scram_credential(zk, "alice", "SCRAM-SHA-256", credential())
    assert await users.read_scram_credential(zk, "alice", "SCRAM-SHA-256") == credential()
    assert await users.read_scram_credential(zk, "alice", "SCRAM-SHA-512") is None
    assert await users.read_scram_credential(zk, "nobody", "SCRAM-SHA-256") is None
    assert await stored(zk, "alice") == {"version": 1, "config": {"SCRAM-SHA-256": str(credential())}}
    assert await notifications(zk) == [{"version": 2, "entity_path": "users/alice"}]


async def test_other_config_keys_are_kept(zk: AsyncZooKeeper) -> None:
    path = users.user_config_path("bob@corp")
    await zk.create(path, b'{"version":1,"config":{"producer_byte_rate":"1024"}}', makepath=True)
    await users.set_scram_credential(zk, "bob@corp", "SCRAM-SHA-512", credential())
    await users.delete_scram_credential(zk, "bob@corp", "SCRAM-SHA-512")
    assert await stored(zk, "bob@corp") == {"version": 1, "config": {"producer_byte_rate": "1024"}}
    assert [n["entity_path"] for n in await notifications(zk)] == ["users/bob%40corp"] * 2


async def test_deleting_the_last_credential_removes_the_user(zk: AsyncZooKeeper) -> None:
    await users.alter_scram_credentials(
        zk, "carol", {"SCRAM-SHA-256": credential(), "SCRAM-SHA-512": credential(8192)}
    )
    await users.delete_scram_credential(zk, "carol", "SCRAM-SHA-256")
    assert await users.describe_scram_users(zk) == {"carol": {"SCRAM-SHA-512": 8192}}
    await users.delete_scram_credential(zk, "carol", "SCRAM-SHA-512")
    with pytest.raises(NoNodeError):
        await zk.get(users.user_config_path("carol"))
    assert len(await notifications(zk)) == 3


async def test_a_user_with_quota_children_keeps_its_znode(zk: AsyncZooKeeper) -> None:
    await users.set_scram_credential(zk, "dave", "SCRAM-SHA-256", credential())
    await zk.create(users.user_config_path("dave") + "/clients/app1", b"{}", makepath=True)
    await users.delete_scram_credential(zk, "dave", "SCRAM-SHA-256")
    assert await stored(zk, "dave") == {"version": 1, "config": {}}


@pytest.mark.parametrize(
    ("upserts", "deletions", "kind"),
    [
        ({"SCRAM-SHA-1": credential()}, (), "UNSUPPORTED_SASL_MECHANISM"),
        ({"SCRAM-SHA-256": credential()}, ("SCRAM-SHA-256",), "DUPLICATE_RESOURCE"),
        ({}, ("SCRAM-SHA-512",), "RESOURCE_NOT_FOUND"),
    ],
)
async def test_refused_alterations_write_nothing(
    zk: AsyncZooKeeper, upserts: dict[str, ScramCredential], deletions: tuple[str, ...], kind: str
) -> None:
    with pytest.raises(AdminError) as refused:
        await users.alter_scram_credentials(zk, "erin", upserts, deletions)
    assert refused.value.kind == kind
    assert await zk.exists(users.user_config_path("erin")) is None
    assert await zk.exists(CONFIG_CHANGES) is None


async def test_corrupt_znodes_read_as_absent(zk: AsyncZooKeeper, caplog: pytest.LogCaptureFixture) -> None:
    await zk.create(users.user_config_path("frank"), b"{not json", makepath=True)
    await zk.create(
        users.user_config_path("grace"),
        json.dumps(
            {"version": 1, "config": {"SCRAM-SHA-256": "salt=AAAA", "SCRAM-SHA-512": str(credential())}}
        ).encode(),
    )
    with caplog.at_level(logging.WARNING, logger="zkstore.users"):
        assert await users.read_scram_credential(zk, "frank", "SCRAM-SHA-256") is None
        assert await users.read_scram_credential(zk, "grace", "SCRAM-SHA-256") is None
        assert await users.read_scram_credential(zk, "grace", "SCRAM-SHA-512") == credential()
    assert "frank" in caplog.text and "grace" in caplog.text
    with pytest.raises(AdminError, match="config JSON"):  # a write does not overwrite what it cannot read
        await users.set_scram_credential(zk, "frank", "SCRAM-SHA-256", credential())


async def test_list_and_describe(zk: AsyncZooKeeper) -> None:
    await users.set_scram_credential(zk, "a,b=c", "SCRAM-SHA-256", credential(8192))
    await zk.create(users.user_config_path("quota-only"), b'{"version":1,"config":{}}', makepath=True)
    assert await users.list_users(zk) == ["a,b=c", "quota-only"]
    assert await users.describe_scram_users(zk) == {"a,b=c": {"SCRAM-SHA-256": 8192}}
    assert await users.describe_scram_users(zk, ["quota-only", "missing"]) == {
        "quota-only": {},
        "missing": {},
    }


async def test_list_without_any_user(zk: AsyncZooKeeper) -> None:
    assert await users.list_users(zk) == []
    assert await users.describe_scram_users(zk) == {}
