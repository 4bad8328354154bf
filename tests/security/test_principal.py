"""Certificate subjects to principals: RFC 2253 strings and ssl.principal.mapping.rules (KIP-371)."""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon.config import ConfigError, ConfigKey, load_config
from security.principal import ANONYMOUS, NoMatchingRule, PrincipalMapper, parse_mapping_rules, rfc2253

SUBJECT = (
    (("countryName", "US"),),
    (("organizationName", "acme"),),
    (("organizationalUnitName", "eng"),),
    (("commonName", "client1"),),
)


def test_a_subject_is_written_most_specific_first_with_escapes() -> None:
    assert rfc2253(SUBJECT) == "CN=client1,OU=eng,O=acme,C=US"
    assert rfc2253(((("commonName", "a,b+c"),),)) == r"CN=a\,b\+c"


def test_default_keeps_the_distinguished_name_and_no_certificate_is_anonymous() -> None:
    mapper = PrincipalMapper()
    assert mapper.principal({"subject": SUBJECT}) == "User:CN=client1,OU=eng,O=acme,C=US"
    assert mapper.principal(None) == ANONYMOUS
    assert mapper.principal({}) == ANONYMOUS


def test_rules_match_the_whole_name_in_order_with_groups_and_case() -> None:
    mapper = PrincipalMapper(r"RULE:^CN=([a-z0-9]+),OU=eng,.*$/$1@eng/U,RULE:^CN=(.*?),.*$/$1/L,DEFAULT")
    assert mapper.name("CN=client1,OU=eng,O=acme,C=US") == "CLIENT1@ENG"
    assert mapper.name("CN=Bob,OU=ops,O=acme") == "bob"
    assert mapper.name("O=acme") == "O=acme"  # neither rule matches the whole name


def test_without_default_an_unmatched_name_fails_and_bad_rules_are_refused() -> None:
    with pytest.raises(NoMatchingRule):
        PrincipalMapper(r"RULE:^CN=x$/y/").name("CN=z")
    with pytest.raises(ValueError, match="cannot read a rule"):
        parse_mapping_rules("RULE:broken")
    assert PrincipalMapper(r"RULE:^CN=(a)$/$1$2/").name("CN=a") == "a$2"  # a missing group stays literal


def test_a_key_may_be_set_per_listener_and_per_mechanism(tmp_path: Path) -> None:
    keys = [
        ConfigKey("ssl.client.auth", "string", "none", per_listener=True, check=_no_sometimes),
        ConfigKey("sasl.jaas.config", "string", None, per_listener=True),
    ]
    path = tmp_path / "c.properties"
    path.write_text(
        "ssl.client.auth=required\n"
        "listener.name.client.ssl.client.auth=none\n"
        "listener.name.client.scram-sha-512.sasl.jaas.config=x required;\n"
    )
    loaded = load_config(keys, path, {})
    assert loaded.unknown == ()
    assert loaded.for_listener("CLIENT", "ssl.client.auth") == "none"
    assert loaded.for_listener("OTHER", "ssl.client.auth") == "required"  # the global value
    assert loaded.for_listener("client", "sasl.jaas.config", "SCRAM-SHA-512") == "x required;"
    assert loaded.for_listener("client", "sasl.jaas.config", "PLAIN") is None
    path.write_text("listener.name.client.ssl.client.auth=sometimes\n")
    with pytest.raises(ConfigError) as error:
        load_config(keys, path, {})
    assert error.value.key == "listener.name.client.ssl.client.auth"


def _no_sometimes(value: str) -> None:
    if value == "sometimes":
        raise ValueError("not a choice")
