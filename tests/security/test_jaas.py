"""``sasl.jaas.config`` parsing: Kafka's PLAIN and SCRAM forms, quoting, and clear errors."""

from __future__ import annotations

import pytest

from security.jaas import (
    PLAIN_LOGIN_MODULE,
    SCRAM_LOGIN_MODULE,
    client_identity,
    parse_jaas_config,
    plain_users,
)

PLAIN = (
    f"{PLAIN_LOGIN_MODULE} required "
    'username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";'
)


def test_plain_listener_entry() -> None:
    module, flag, options = parse_jaas_config(PLAIN)
    assert (module, flag) == (PLAIN_LOGIN_MODULE, "required")
    assert plain_users(options) == {"admin": "admin-secret", "alice": "alice-secret"}
    assert client_identity(options) == ("admin", "admin-secret")


def test_scram_client_entry_over_several_lines() -> None:
    entry = parse_jaas_config(f'{SCRAM_LOGIN_MODULE} required\n  username="broker"\n  password="b-secret";\n')
    assert entry.login_module == SCRAM_LOGIN_MODULE
    assert client_identity(entry.options) == ("broker", "b-secret")
    assert plain_users(entry.options) == {}


def test_values_may_be_bare_single_quoted_or_escaped() -> None:
    options = parse_jaas_config(
        r"""M optional a=plain b='single "q"' c="semi;colon = x" d="back\\slash \"q\"" e="";"""
    ).options
    assert options == {
        "a": "plain",
        "b": 'single "q"',
        "c": "semi;colon = x",
        "d": 'back\\slash "q"',
        "e": "",
    }


def test_flag_is_case_insensitive_and_comments_are_skipped() -> None:
    entry = parse_jaas_config('/* listener */ M Sufficient // why\n k="v";')
    assert entry.control_flag == "sufficient" and entry.options == {"k": "v"}


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("M", "control flag"),
        ("M mandatory;", "control flag"),
        ('M required username="a"', "end with ';'"),
        ('M required username="a"; N required;', "exactly one"),
        ('M required username "a";', "has no '=value'"),
        ("M required username=;", "has no value"),
        ('M required a="1" a="2";', "twice"),
        ('M required a="unterminated;', "unterminated"),
        ('"M" required;', "login module class name"),
        ('M required ="x";', "expected an option name"),
        ("M required; junk", "after the entry"),
    ],
)
def test_malformed_text_is_a_clear_value_error(text: str, complaint: str) -> None:
    with pytest.raises(ValueError, match=complaint):
        parse_jaas_config(text)


def test_client_identity_names_what_is_missing() -> None:
    with pytest.raises(ValueError, match="password"):
        client_identity({"username": "a"})


def test_user_option_without_a_name_is_not_a_user() -> None:
    assert plain_users({"user_": "x", "username": "a", "user_bob": "b"}) == {"bob": "b"}
