"""cluster.secrets_cli generate: idempotent, certificates for the right names, files for their readers."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest
from cryptography import x509

from cluster.secrets_cli import Owner, SecretsRequest, generate, main
from cluster.secure import MAPPING_RULES
from security.principal import PrincipalMapper

NODES = ("broker-1", "controller-1001")
ZOOKEEPER_HOSTS = ("zookeeper-1", "zookeeper-2")
SECRETS = ("ca.key", "zookeeper.identity", "admin.password", "daemon.properties", "client/client.properties")


def request(directory: Path, **changes: object) -> SecretsRequest:
    fields: dict[str, object] = {"directory": directory, "nodes": NODES, "zookeeper_hosts": ZOOKEEPER_HOSTS}
    return SecretsRequest(**(fields | changes))  # type: ignore[arg-type]


def certificate(directory: Path, name: str) -> x509.Certificate:
    return x509.load_pem_x509_certificates((directory / f"{name}.crt").read_bytes())[0]


def contents(directory: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()
    }


def test_a_second_run_keeps_every_certificate_and_secret(tmp_path: Path) -> None:
    generate(request(tmp_path))
    before = contents(tmp_path)
    report = generate(request(tmp_path))
    assert contents(tmp_path) == before
    assert [line for line in report if line.startswith("kept") and "CA" not in line] == [
        "kept broker-1",
        "kept controller-1001",
        "kept zookeeper",
        "kept admin",
    ]


def test_certificates_are_issued_again_for_new_host_names_or_a_new_ca(tmp_path: Path) -> None:
    generate(request(tmp_path))
    broker = certificate(tmp_path, "broker-1")
    report = generate(request(tmp_path, zookeeper_hosts=(*ZOOKEEPER_HOSTS, "zookeeper-3")))
    assert any(line.startswith("issued zookeeper (new host names)") for line in report)
    assert certificate(tmp_path, "broker-1") == broker
    for name in ("ca.crt", "ca.key"):
        (tmp_path / name).unlink()
    report = generate(request(tmp_path))
    assert sum(line.startswith("issued") and "(another CA)" in line for line in report) == 4


def test_node_certificates_name_their_host_and_map_to_the_cluster_principals(tmp_path: Path) -> None:
    generate(request(tmp_path))
    mapper = PrincipalMapper(MAPPING_RULES)
    expected = {"broker-1": "broker", "controller-1001": "controller", "admin": "admin"}
    for name, principal in expected.items():
        cert = certificate(tmp_path, name)
        assert mapper.name(cert.subject.rfc4514_string()) == principal
    for name, hosts in {"broker-1": {"broker-1"}, "zookeeper": set(ZOOKEEPER_HOSTS)}.items():
        san = certificate(tmp_path, name).extensions.get_extension_for_class(x509.SubjectAlternativeName)
        assert hosts | {"localhost"} <= set(san.value.get_values_for_type(x509.DNSName))
    zookeeper = certificate(tmp_path, "zookeeper").subject.rfc4514_string()
    assert mapper.name(zookeeper) not in ("broker", "controller"), "a ZooKeeper server is no cluster node"


def test_secrets_are_private(tmp_path: Path) -> None:
    generate(request(tmp_path))
    for name in SECRETS:
        assert (tmp_path / name).stat().st_mode & 0o077 == 0, name
    assert (tmp_path / "ca.crt").stat().st_mode & 0o044 == 0o044, "every reader needs the CA"


@pytest.mark.skipif(os.geteuid() != 0, reason="giving files away needs root")
def test_as_root_each_file_goes_to_its_reader_and_the_ca_key_stays(tmp_path: Path) -> None:
    generate(request(tmp_path, owner=Owner(10001), zookeeper_owner=Owner(1000, 1000)))
    owners = {name: (tmp_path / name).stat().st_uid for name in contents(tmp_path)}
    assert owners.pop("ca.key") == 0
    zookeeper = {name: owners.pop(name) for name in list(owners) if name.startswith("zookeeper.")}
    assert zookeeper.pop("zookeeper.identity") == 10001, "the daemons' digest identity"
    assert set(zookeeper.values()) == {1000}
    assert set(owners.values()) == {10001}


def test_owners_are_numbers() -> None:
    assert Owner.parse("10001") == Owner(10001, -1)
    assert Owner.parse("1000:1000") == Owner(1000, 1000)
    with pytest.raises(argparse.ArgumentTypeError):
        Owner.parse("kafka")


def test_the_command_line_generates(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["generate", "--dir", str(tmp_path), "--nodes", ",".join(NODES), "--zookeeper-hosts", "zk"]
    assert main(argv) == 0
    assert "issued broker-1" in capsys.readouterr().out
    assert (tmp_path / "client" / "client.properties").is_file()
