"""Checks a release gate owes: a verdict never changes during a run, not only back to
back; the key's header is read in any case, as HTTP reads field names; a ``Retry-After`` RFC 9110
cannot parse is a failure, not an advisory.

Each runs the real suite against a local service (over https with a private CA where the
service must see the header names as sent) and shows a body that passes and one that breaks it.
"""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
import trustme

from tests.contract_tests.servers import (
    BROKEN,
    CONFORMING,
    HEADER_NAME_READ_EXACTLY,
    KEY,
    Variant,
    run_suite,
    serve,
    serve_tls,
)
from verdict_contract.contract_tests.client import BrokenAnswer, ExplainClient
from verdict_contract.contract_tests.retry import unreadable_retry_after
from verdict_contract.core.redact import Secret


def test_a_verdict_that_changes_later_fails_though_two_calls_agree(
    pytester: pytest.Pytester,
) -> None:
    result, running = run_suite(pytester, BROKEN["a verdict that changes from its third call on"])
    output = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, output
    assert result.parseoutcomes()["failed"] == 1  # back to back, every call agreed
    result.stdout.fnmatch_lines(["FAILED *::test_verdict_never_changes_during_the_run*"])
    for n in running.session_ids:
        assert f"session {n!r}: the verdict changed during the run" in output
    assert '-    "reporting": ' in output
    assert "+++ a later call" in output
    assert "replay, a later call: curl -i " in output


def test_a_verdict_that_changed_before_its_session_expired_still_fails(
    pytester: pytest.Pytester,
) -> None:
    """A 404 at the run's end (expired) spares the last call, not the verdicts seen before."""
    result, running = run_suite(
        pytester, BROKEN["a verdict that changes, then the session expires"]
    )
    output = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, output
    result.stdout.fnmatch_lines(["FAILED *::test_verdict_never_changes_during_the_run*"])
    for n in running.session_ids:
        assert f"session {n!r}: the verdict changed during the run" in output


def test_a_verdict_unchanged_all_run_passes(pytester: pytest.Pytester) -> None:
    """The counterpart: an undocumented field changing on every call is no change."""
    result, _ = run_suite(
        pytester,
        CONFORMING["an undocumented field that changes on every call"],
        "-k",
        "immutable or never_changes",
    )
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert result.parseoutcomes()["passed"] == 2


def test_the_run_s_look_back_is_its_last_check(pytester: pytest.Pytester) -> None:
    with serve(Variant()) as running:
        result = pytester.runpytest_inprocess(*running.suite_args("--collect-only", "-q"))
    ids = [line for line in result.stdout.lines if "::" in line]
    assert "test_verdict_never_changes_during_the_run" in ids[-1], ids[-3:]


@pytest.fixture(scope="module")
def https(tmp_path_factory: pytest.TempPathFactory) -> tuple[ssl.SSLContext, Path]:
    """A server context of a private CA's certificate for 127.0.0.1, and the CA's bundle."""
    ca = trustme.CA()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    bundle = tmp_path_factory.mktemp("ca") / "ca.pem"
    ca.cert_pem.write_to_path(str(bundle))
    return context, bundle


@pytest.mark.parametrize(
    ("variant", "passes"), [(HEADER_NAME_READ_EXACTLY, False), (Variant(), True)]
)
def test_the_key_s_header_name_is_read_in_any_case(
    pytester: pytest.Pytester,
    https: tuple[ssl.SSLContext, Path],
    variant: Variant,
    passes: bool,
) -> None:
    context, bundle = https
    with serve_tls(variant, context) as running:
        result = pytester.runpytest_subprocess(
            *running.suite_args("--verdict-ca-bundle", str(bundle), "-k", "header_name")
        )
    output = result.stdout.str()
    if passes:
        assert result.ret == pytest.ExitCode.OK, output
        assert result.parseoutcomes()["passed"] == 2
        return
    assert result.parseoutcomes()["failed"] == 2, output
    result.stdout.fnmatch_lines(
        [
            "*the key in 'authorization' (lowercase, as HTTP/2 sends it): received 401, where "
            "'Authorization' got 404*RFC 9110 §5.1*",
            f"*curl -i --cacert {bundle} -H 'authorization: '\"Bearer $VERDICT_API_KEY\"*",
        ]
    )


@pytest.mark.parametrize(
    ("value", "readable"),
    [
        ("120", True),
        ("0", True),  # retry at once: the retry cap, not a breach, ends a loop of them
        (" 3 ", True),  # optional white space around a field value
        ("Wed, 21 Oct 2026 07:28:00 GMT", True),
        ("Wednesday, 21-Oct-26 07:28:00 GMT", True),  # obsolete forms a recipient must read
        ("Wed Oct 21 07:28:00 2026", True),
        (None, True),  # absent: an advisory, not this
        ("in a minute", False),
        ("1.5", False),
        ("-1", False),
        ("", False),
        ("²", False),  # a digit to str.isdigit(), not to RFC 9110
        ("Wed, 21 Oct 2026", False),
    ],
)
def test_retry_after_is_read_as_rfc_9110_writes_it(value: str | None, readable: bool) -> None:
    assert (unreadable_retry_after(value) is None) is readable


def test_an_unreadable_retry_after_fails_the_call_that_met_it() -> None:
    with serve(BROKEN["a 429 whose Retry-After no client can read"]) as running:
        client = ExplainClient(running.base_url, Secret(KEY), timeout=5, wait_budget=5)
        with pytest.raises(BrokenAnswer, match=r"Retry-After 'in a minute' is neither"):
            client.explain(running.session_ids[1])
        assert client.answered_429 == 1
        assert client.waited == 0  # nothing to wait on: it fails at once
        client.close()


def test_an_unreadable_retry_after_is_a_failure_not_an_advisory(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    report = tmp_path / "report.md"
    result, running = run_suite(
        pytester,
        BROKEN["a 429 whose Retry-After no client can read"],
        f"--verdict-report={report}",
    )
    output = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, output
    n = running.session_ids[1]
    result.stdout.fnmatch_lines(
        [
            f"*session {n!r}: the 429's Retry-After 'in a minute' is neither delay-seconds "
            "(digits) nor an HTTP-date (RFC 9110 §10.2.3)*",
            f"*replay: curl -i -H 'Authorization: Bearer '\"$VERDICT_API_KEY\" *n={n}'",
        ]
    )
    text = report.read_text()
    assert "## Advisories" not in text or "in a minute" not in text.split("## Advisories")[1]
