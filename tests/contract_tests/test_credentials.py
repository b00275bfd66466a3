"""The caller's credential: never put in a URL by the suite, caught wherever a service shows it.

Every test runs the real suite over real HTTP against a service that records what it was sent,
or that gives the key away in one more place than the last.
"""

from __future__ import annotations

from urllib.parse import quote, unquote_plus

import pytest

from tests.contract_tests.servers import (
    BROKEN,
    CONFORMING,
    CONTROLLED,
    KEY,
    SUITE,
    Variant,
    run_suite,
    serve,
)

REAL_KEY = "sk-live-verdict-9f8e7d6c5b4a3210"
"""A key exported as VERDICT_API_KEY, as a pipeline would: it must stay in the header."""


def _in_a_target(key: str, targets: list[str]) -> list[str]:
    forms = {key, quote(key, safe=""), quote(key)}
    return [t for t in targets if any(f in t for f in forms) or key in unquote_plus(t)]


@pytest.mark.parametrize("kind", ["auto", "mock"])
def test_the_exported_key_never_goes_in_a_url_of_a_mock(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """A verdict-mock behind a proxy: the key-in-URL checks still run, with the mock's own key."""
    monkeypatch.setenv("VERDICT_API_KEY", REAL_KEY)
    with serve(CONTROLLED, key=REAL_KEY) as running:
        result = pytester.runpytest_subprocess(
            *SUITE, "--base-url", running.base_url, "--verdict-target-kind", kind, "-rA"
        )
    assert running.traffic is not None
    targets = running.traffic.targets
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert len(targets) > 30  # the whole suite ran against it
    result.stdout.fnmatch_lines(["PASSED *test_key_in_the_query_does_not_authorise*api_key*"])
    assert any("api_key=" in t for t in targets)  # the check ran ...
    assert _in_a_target(REAL_KEY, targets) == []  # ... without the exported key


def test_a_live_target_gets_no_key_in_a_url_without_the_opt_in(pytester: pytest.Pytester) -> None:
    with serve(Variant(), key=REAL_KEY) as running:
        result = pytester.runpytest_subprocess(*running.suite_args("-rA"))
    assert running.traffic is not None
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert _in_a_target(REAL_KEY, running.traffic.targets) == []
    result.stdout.fnmatch_lines(["SKIPPED *opt-in: pass --verdict-check-key-in-url*"])


@pytest.mark.parametrize(
    ("name", "where"),
    [
        (
            "the key in every answer",
            "header x-upstream-authorization holds the whole key (so does an answer to a call "
            "without any credential)",
        ),
        ("a 401 quoting the token after 64 KiB", "body holds the whole key"),
        ("the token in the reason phrase", "the reason phrase holds the whole key"),
        ("the credential base64-encoded in a header", "header x-debug-auth holds the key base64"),
        ("the token base64url-encoded in a 401 body", "body holds the key base64-encoded"),
    ],
)
def test_a_credential_shown_anywhere_is_a_breach(
    pytester: pytest.Pytester, name: str, where: str
) -> None:
    result, _ = run_suite(pytester, BROKEN[name], "-rf")
    output = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, output
    result.stdout.fnmatch_lines([f"*reflects the caller's credential (*{where}*"])
    for start in range(len(KEY) - 7):  # the report names the place, never 8 characters of it
        assert KEY[start : start + 8] not in output


@pytest.mark.parametrize(
    "name", ["a base64 request id on every answer", "a 401 naming the key's last 4 characters"]
)
def test_a_service_that_keeps_its_credential_stays_green(
    pytester: pytest.Pytester, name: str
) -> None:
    result, _ = run_suite(pytester, CONFORMING[name], "-rA")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines(["PASSED *test_credential_is_never_reflected*"])
