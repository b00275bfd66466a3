"""mockserver.settings: every setting declared once; flags, variables and docs/mock.md follow."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest

from verdict_contract.core.redact import Secret
from verdict_contract.mockserver.cli import build_parser, settings_from
from verdict_contract.mockserver.settings import Settings, documented_default, env_var, options

MOCK_PAGE = (Path(__file__).resolve().parents[2] / "docs" / "mock.md").read_text(encoding="utf-8")


def markdown_table() -> str:
    """The table of options in docs/mock.md, generated from the fields."""
    rows = ["| flag | variable | default | what |", "|---|---|---|---|"]
    for name, option, default in options():
        flag = option.flag(name, default)
        if option.metavar:
            flag += f" {option.metavar}"
        variable = f"`{env_var(name)}`" + (" (comma-separated)" if option.repeatable else "")
        what = option.help + ("; repeatable" if option.repeatable else "")
        rows.append(f"| `{flag}` | {variable} | `{documented_default(option, default)}` | {what} |")
    return "\n".join(rows)


def test_the_mock_page_shows_the_generated_table() -> None:
    assert markdown_table() in MOCK_PAGE, (
        "docs/mock.md's settings table is stale; replace it with markdown_table():\n"
        + markdown_table()
    )


def test_every_field_has_a_flag_and_a_variable() -> None:
    parser_help = build_parser().format_help()
    for name, option, default in options():
        assert option.flag(name, default) in parser_help
        assert env_var(name) in parser_help
    assert {f.name for f in fields(Settings)} == {name for name, _, _ in options()}


@pytest.mark.parametrize(
    ("name", "raw", "expected"),
    [
        ("port", "8081", 8081),
        ("api_keys", "a-key,b-key", ("a-key", "b-key")),
        ("control", "off", False),
        ("accept_any_session", "YES", True),
        ("log_level", "WARNING", "warning"),
    ],
)
def test_a_variable_and_its_flag_give_the_same_setting(
    name: str, raw: str, expected: object
) -> None:
    from_env = Settings().with_env({env_var(name): raw})
    assert getattr(from_env, name) == expected
    option = dict((n, (o, d)) for n, o, d in options())[name]
    flag = option[0].flag(name, option[1])
    if isinstance(expected, bool):
        argv = [flag] if expected != option[1] else []
    elif isinstance(expected, tuple):
        argv = [part for value in expected for part in (flag, value)]
    else:
        argv = [flag, raw]
    assert getattr(settings_from(build_parser().parse_args(argv), {}), name) == expected


@pytest.mark.parametrize(
    ("name", "raw"),
    [("threads", "0"), ("journal_size", "-1"), ("control", "maybe"), ("log_level", "loud")],
)
def test_a_bad_variable_names_itself(name: str, raw: str) -> None:
    with pytest.raises(ValueError, match=env_var(name)):
        Settings().with_env({env_var(name): raw})


@pytest.mark.parametrize(
    ("changes", "complaint"),
    [
        ({"rate_limit": 5}, "Settings(rate_limit=...): received 5"),
        ({"rate_limit": "2 per minute"}, "REQUESTS/SECONDS"),
        ({"session_lifetime": "soon"}, "Settings(session_lifetime=...)"),
        ({"port": True}, "Settings(port=...)"),
        ({"api_keys": [" padded-key-0123456789"]}, "cannot be sent in an Authorization header"),
        ({"api_keys": ["clé-0123456789"]}, "cannot be sent in an Authorization header"),
        ({"api_keys": [1234]}, "a sequence of strings"),
        ({"api_keys": ["key-0123456789", 5]}, "Settings(api_keys=...): received …"),
        ({"control_token": b"token-0123456789"}, "Settings(control_token=...): received …"),
        ({"secret": 12}, "Settings(secret=...): received …"),
        ({"server": "WAITRESS"}, "Settings(server=...): received 'WAITRESS'; documented: one of"),
        ({"log_level": "loud"}, "Settings(log_level=...): received 'loud'"),
    ],
)
def test_values_that_would_fail_every_request_are_refused_at_construction(
    changes: dict[str, object], complaint: str
) -> None:
    from verdict_contract import SettingsError

    with pytest.raises(SettingsError) as refused:
        Settings(**changes)  # type: ignore[arg-type]
    assert complaint in str(refused.value)
    assert "0123456789" not in str(refused.value)  # a refused key is masked too


def test_strings_are_read_as_the_flags_read_them() -> None:
    from verdict_contract.core.rates import RateLimit

    settings = Settings.parse(rate_limit="2/60", api_keys="only-key-0123456789", port="0")
    assert settings.rate_limit == RateLimit(2, 60.0)
    assert settings.api_keys == ("only-key-0123456789",)
    assert settings.port == 0
    assert "only-key-0123456789" not in repr(settings)
    assert Settings.parse(allowed_hosts=["mock.test"]).allowed_hosts == ("mock.test",)


# --- the proxy's settings -------------------------------------------------------------------------


def test_the_upstream_key_comes_from_its_variable_and_never_shows() -> None:
    key = "staging-key-0123456789abcdef"
    settings = Settings().with_env(
        {env_var("proxy_to"): "https://staging.example/", env_var("upstream_key"): key}
    )
    assert settings.proxy_to == "https://staging.example"  # a base URL, no trailing slash
    assert settings.upstream_key is not None
    assert settings.upstream_key.reveal() == key
    assert key not in repr(settings)
    assert key[-4:] in repr(settings)


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ("ftp://staging.example", "is not an http(s) URL"),
        ("staging.example", "is not an http(s) URL"),
        ("https://staging.example?x=1", "give the base URL only"),
        ("https://user:secret@staging.example", "give the base URL only"),
    ],
)
def test_a_bad_upstream_is_named(raw: str, problem: str) -> None:
    with pytest.raises(ValueError, match=env_var("proxy_to")) as caught:
        Settings().with_env({env_var("proxy_to"): raw})
    assert problem in str(caught.value)
    assert "secret" not in str(caught.value)


DEPENDENT = [(name, option.needs) for name, option, _ in options() if option.needs]
"""Every setting that needs another, read from the one declaration (``needs=``)."""

RAW = {
    "proxy_to": "https://staging.example",
    "upstream_key": "staging-key-0123456789",
    "proxy_strict": "1",
    "record": "staging.yaml",
    "tenants": "tenants.yaml",
    "control_token": "operator-token-0123456789",
}
"""A value to give each setting of DEPENDENT, as its flag or variable takes it."""


def test_the_dependent_settings_are_the_proxys_and_the_tenants() -> None:
    assert {name for name, _ in DEPENDENT} == {"upstream_key", "proxy_strict", "record", "tenants"}
    assert {needed for _, needed in DEPENDENT} == {"proxy_to", "control_token"}


def _given(name: str, source: str) -> tuple[list[str], dict[str, str]]:
    """``name`` given its RAW value as a flag or as a variable: (argv, environ)."""
    option, default = next((o, d) for n, o, d in options() if n == name)
    if source == "variable":
        return [], {env_var(name): RAW[name]}
    flag = option.flag(name, default)
    return ([flag] if isinstance(default, bool) else [flag, RAW[name]]), {}


SOURCES = ("flag", "variable")


@pytest.mark.parametrize(("name", "needed"), DEPENDENT)
@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("needed_source", SOURCES)
def test_a_setting_and_the_one_it_needs_mix_flags_and_variables(
    name: str, needed: str, source: str, needed_source: str
) -> None:
    argv, environ = _given(name, source)
    more_argv, more_environ = _given(needed, needed_source)
    settings = settings_from(build_parser().parse_args(argv + more_argv), environ | more_environ)
    for given in (name, needed):
        value = getattr(settings, given)
        shown = value.reveal() if isinstance(value, Secret) else value
        assert shown in (True, Path(RAW[given]), RAW[given])


@pytest.mark.parametrize(("name", "needed"), DEPENDENT)
@pytest.mark.parametrize("source", SOURCES)
def test_a_setting_without_the_one_it_needs_is_refused_naming_both(
    name: str, needed: str, source: str
) -> None:
    argv, environ = _given(name, source)
    with pytest.raises(ValueError, match="needs") as refused:
        settings_from(build_parser().parse_args(argv), environ)
    for word in (env_var(name), env_var(needed), "--" + needed.replace("_", "-")):
        assert word in str(refused.value)
    assert RAW["upstream_key"] not in str(refused.value)


@pytest.mark.parametrize(("name", "needed"), DEPENDENT)
def test_an_empty_variable_does_not_give_the_needed_setting(name: str, needed: str) -> None:
    """The merged whole is checked, and an empty variable gives nothing."""
    argv, environ = _given(name, "variable")
    with pytest.raises(ValueError, match="needs"):
        settings_from(build_parser().parse_args(argv), environ | {env_var(needed): ""})


def test_the_readmes_proxy_line_is_accepted() -> None:
    """``VERDICT_MOCK_UPSTREAM_KEY=… verdict-mock --proxy-to URL --record staging.yaml``."""
    args = build_parser().parse_args(
        ["--proxy-to", "https://staging.example", "--record", "staging.yaml"]
    )
    settings = settings_from(args, {env_var("upstream_key"): "staging-key-0123456789"})
    assert settings.record == Path("staging.yaml")
    assert settings.upstream_key is not None


@pytest.mark.parametrize(
    "changes",
    [{"record": Path("r.yaml")}, {"proxy_strict": True}, {"upstream_key": Secret("k")}],
)
def test_proxy_options_need_a_proxy(changes: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="needs --proxy-to"):
        Settings(**changes)  # type: ignore[arg-type]
    Settings(proxy_to="http://127.0.0.1:1", **changes)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "raw", "said"),
    [
        ("port", "abc", "'abc' is not a port: a whole number from 0 to 65535"),
        ("port", "70000", "'70000' is not a port"),
        ("threads", "many", "'many' is not a whole number"),
        ("session_lifetime", "soon", "'soon' is not a number"),
        ("proxy_timeout", "0", "must be a positive number of seconds"),
    ],
)
def test_a_bad_number_says_which_flag_and_what_it_takes(
    name: str, raw: str, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    option, default = next((o, d) for n, o, d in options() if n == name)
    flag = option.flag(name, default)
    with pytest.raises(SystemExit):
        build_parser().parse_args([flag, raw])
    error = capsys.readouterr().err.splitlines()[-1]
    assert error == f"verdict-mock: error: argument {flag}: {said}" or (
        error.startswith(f"verdict-mock: error: argument {flag}: ") and said in error
    )
    assert "invalid literal" not in error
    with pytest.raises(ValueError, match=env_var(name)) as from_variable:
        Settings().with_env({env_var(name): raw})
    assert said in str(from_variable.value)
    build_parser().parse_args([flag, "8"])  # a good value passes


def test_the_proxy_timeout_is_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        Settings().with_env({env_var("proxy_timeout"): "0"})
