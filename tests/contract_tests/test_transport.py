"""A hostile staging cannot exhaust the suite: each call is bounded in decoded bytes and in time.

Every attack is a real local server: an 8 GiB ``Content-Length``, an endless chunked stream, a
gzip bomb, a body dripped byte by byte, headers dripped byte by byte. Each bounded loop on the
server side stops on its own (64 MiB, or 2,000 drips) if the client does not hang up first.
"""

from __future__ import annotations

import ssl
import tracemalloc
from pathlib import Path

import httpx
import pytest
import trustme
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from tests.contract_tests.servers import (
    CONFORMING,
    KEY,
    Sent,
    Variant,
    gzip_bomb,
    hostile_answers,
    hostile_for_first_session,
    raw_attacks,
    raw_server,
    serve,
    serve_streaming,
)
from verdict_contract.contract_tests.client import BrokenAnswer, ExplainClient
from verdict_contract.contract_tests.transport import (
    MAX_ANSWER_BYTES,
    tls_context,
    with_decoded_body,
)
from verdict_contract.core.redact import Secret

ATTACKS = list(hostile_answers(Sent()))
EXPECTED = {
    "huge Content-Length": "the answer announced 8589934592 bytes (Content-Length), over the "
    "1 MiB cap",
    "endless chunked stream": "the answer exceeded 1 MiB after decoding",
    "gzip bomb": "the answer exceeded 1 MiB after decoding",
    "slow drip": "the call took longer than 1 s in all",
    "dripped headers": "the call took longer than 1 s in all",
}
CALL_TIMEOUT = 1.0  # a drip lasts 100 s or more unless the client hangs up


@pytest.mark.parametrize("attack", list(raw_attacks()))
def test_a_hostile_answer_fails_its_call_and_memory_stays_bounded(attack: str) -> None:
    """Each attack ends its call with one line; the client never holds much more than the cap.

    The server writes the same few objects again and again, so the memory traced is the
    client's. A read timeout (5 s) never fires on a drip of one byte per 0.05 s: only the
    call's deadline ends it.
    """
    gzip_bomb()  # made (and cached) before memory is measured
    pause = 0.05 if "drip" in attack else 0.0
    with raw_server(raw_attacks()[attack], pause) as sent:
        client = ExplainClient(
            f"http://127.0.0.1:{sent.port}", Secret(KEY), timeout=5, call_timeout=CALL_TIMEOUT
        )
        tracemalloc.start()
        try:
            with pytest.raises(BrokenAnswer) as caught:
                client.explain("any")
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        client.close()
        written = sent.chunks
    assert str(caught.value) == EXPECTED[attack]
    assert peak < 3 * MAX_ANSWER_BYTES, f"{peak} bytes held"
    if attack != "gzip bomb":  # written at once: its bound is the decoding, measured above
        assert written < 1000  # every other attack has 1,024 pieces or more: it was cut short
    assert client.sent[-1].status is None  # recorded for its replay, without an answer


@pytest.mark.parametrize("name", ["extra fields", "gzip-compressed verdicts"])
def test_the_cap_is_exact_after_decoding(name: str) -> None:
    """An answer of exactly the cap is read whole; one byte more is refused (decoded size)."""
    with serve(CONFORMING[name]) as running:
        probe = ExplainClient(running.base_url, Secret(KEY))
        size = len(probe.explain(running.session_ids[0]).content)
        probe.close()
        exact = ExplainClient(running.base_url, Secret(KEY), max_bytes=size)
        whole = exact.explain(running.session_ids[0])
        exact.close()
        under = ExplainClient(running.base_url, Secret(KEY), max_bytes=size - 1)
        over = rf"over the {size - 1} bytes cap$|^the answer exceeded {size - 1} bytes after"
        with pytest.raises(BrokenAnswer, match=over):
            under.explain(running.session_ids[0])
        under.close()
    assert whole.json()["schema"] == 7
    assert "content-encoding" not in whole.headers  # the kept answer is the decoded one


@pytest.mark.parametrize("attack", ATTACKS)
def test_a_hostile_staging_fails_the_session_and_the_run_writes_its_report(
    pytester: pytest.Pytester, tmp_path: Path, attack: str
) -> None:
    report = tmp_path / "report.md"
    junit = tmp_path / "junit.xml"
    variant = hostile_for_first_session(hostile_answers(Sent())[attack])
    with serve_streaming(variant) as running:
        result = pytester.runpytest_inprocess(
            *running.suite_args(
                "--verdict-call-timeout",
                str(CALL_TIMEOUT),
                f"--verdict-report={report}",
                f"--junitxml={junit}",
            )
        )
    output = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, output
    assert "Traceback" not in output
    bad, good = running.session_ids
    result.stdout.fnmatch_lines([f"*session {bad!r}: {EXPECTED[attack]}*"])
    assert f"session {good!r}" not in output  # the other session was read and kept the contract
    assert EXPECTED[attack] in report.read_text()
    assert EXPECTED[attack] in junit.read_text()
    assert "--verdict-call-timeout 1" in report.read_text()


def test_a_tls_context_is_made_once_per_bundle_and_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Loading CAs costs milliseconds of CPU per client: one context serves a process's clients,
    and a new bundle or a new ``SSL_CERT_FILE`` gets its own, trusting what it names."""
    first, second = trustme.CA(), trustme.CA()
    for name, ca in (("first.pem", first), ("second.pem", second)):
        ca.cert_pem.write_to_path(str(tmp_path / name))
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    monkeypatch.chdir(tmp_path)

    default = tls_context(None)
    assert tls_context(None) is default
    bundled = tls_context("first.pem")
    assert tls_context(str(tmp_path / "first.pem")) is bundled  # the same file, however named
    assert tls_context("second.pem") is not bundled
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "second.pem"))
    from_environment = tls_context(None)
    assert from_environment is not default

    def trusted(context: ssl.SSLContext) -> set[bytes]:
        return set(context.get_ca_certs(binary_form=True))

    assert trusted(bundled) == {_der(first)}
    assert trusted(from_environment) == {_der(second)}
    assert not trusted(default) & {_der(first), _der(second)}


def _der(ca: trustme.CA) -> bytes:
    """The CA's certificate as a context lists what it trusts."""
    certificate = x509.load_pem_x509_certificate(ca.cert_pem.bytes())
    return certificate.public_bytes(serialization.Encoding.DER)


def test_a_staging_that_drips_every_answer_stops_the_run_after_two_deadlines(
    pytester: pytest.Pytester,
) -> None:
    """A staging that sends a byte at a time to every call: the second call in a row that runs
    out its deadline stops the run with one line, instead of one deadline per call."""
    sent = Sent()
    drip = hostile_answers(sent, drip=0.2)["slow drip"]
    variant = Variant(before=lambda request: drip() if request.path == "/e" else None)
    with serve_streaming(variant) as running:
        result = pytester.runpytest_inprocess(
            *running.suite_args("--verdict-call-timeout", str(CALL_TIMEOUT))
        )
    assert running.traffic is not None
    calls = sum(running.traffic.calls.values())
    output = result.stdout.str()
    assert result.ret == pytest.ExitCode.TESTS_FAILED, output
    assert "Traceback" not in output
    result.stdout.fnmatch_lines(
        [
            "*the target stopped answering: http://127.0.0.1:*: 2 calls in a row did not finish "
            "within 1 s (--verdict-call-timeout), and none has: the target does not answer*"
        ]
    )
    assert calls <= 3, running.traffic.targets  # not one deadline per call of the run


@pytest.mark.parametrize(
    "value", [b"caf\xe9", "café".encode(), "text/\u202eevil".encode()], ids=str
)
def test_an_answer_with_a_header_that_is_not_ascii_is_kept_as_received(value: bytes) -> None:
    """A header httpx decodes (Latin-1 or UTF-8) cannot be encoded back as ASCII: the answer
    keeps the bytes it came with (it was an internal error before any check ran)."""
    request = httpx.Request("GET", "http://127.0.0.1/e")
    answer = httpx.Response(200, headers=[(b"Server", value)], content=b"{}", request=request)
    kept = with_decoded_body(answer, b"{}")
    assert (b"Server", value) in kept.headers.raw
    assert kept.content == b"{}"
