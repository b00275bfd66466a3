"""The plugin's fixtures, run in a pytester project as an integrator would use them."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

INTEGRATOR_TESTS = """
import asyncio
import httpx
import pytest
from respx.models import AllMockedAssertionError


def test_live_mock(verdict_mock):
    n = verdict_mock.mint(verdict="refused", conclusive=True)
    answer = httpx.get(verdict_mock.url(n),
                       headers={"Authorization": f"Bearer {verdict_mock.api_key}"})
    assert answer.status_code == 200
    assert answer.json()["verdict"] == "refused"
    assert [r["n"] for r in verdict_mock.requests] == [n]


def test_journal_is_cleared_between_tests(verdict_mock):
    assert verdict_mock.requests == []


def test_respx_sync_and_async(verdict_respx):
    n = verdict_respx.mint(verdict="disputed", script=[429])
    headers = {"Authorization": f"Bearer {verdict_respx.api_key}"}
    assert httpx.get(verdict_respx.url(n), headers=headers).status_code == 429

    async def call():
        async with httpx.AsyncClient() as client:
            return await client.get(verdict_respx.url(n), headers=headers)

    answer = asyncio.run(call())
    assert answer.json()["verdict"] == "disputed"
    assert verdict_respx.router.calls.call_count == 2


def test_respx_leaves_other_hosts_to_respx_defaults(verdict_respx):
    with pytest.raises(AllMockedAssertionError):
        httpx.get("https://elsewhere.invalid/")


def test_make_verdict(make_verdict):
    assert make_verdict("insufficient")["conclusive"] is False


def test_once_per_kind(verdict_kind, verdict_mock):
    n = verdict_mock.mint(verdict=verdict_kind)
    body = httpx.get(verdict_mock.url(n), headers=verdict_mock.headers).json()
    assert (body["verdict"], body["conclusive"]) == verdict_kind
"""


def test_fixtures_work_in_an_integrator_project(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_integration=INTEGRATOR_TESTS)
    result = pytester.runpytest("-p", "no:cacheprovider", "-v")
    result.assert_outcomes(passed=12)
    result.stdout.fnmatch_lines(
        [
            "*test_once_per_kind[[]contradicted.conclusive[]] PASSED*",
            "*test_once_per_kind[[]contradicted.inconclusive[]] PASSED*",
            "*test_once_per_kind[[]refused.conclusive[]] PASSED*",
            "*test_once_per_kind[[]refused.inconclusive[]] PASSED*",
            "*test_once_per_kind[[]insufficient[]] PASSED*",
        ]
    )


def test_settings_fixture_can_be_overridden(pytester: pytest.Pytester) -> None:
    pytester.makeconftest("""
import pytest
from verdict_contract.mockserver import Settings

@pytest.fixture(scope="session")
def verdict_mock_settings():
    return Settings(port=0, api_keys=("team-key-0123456789",), demo_sessions=False)
""")
    pytester.makepyfile("""
def test_key(verdict_mock):
    assert verdict_mock.api_key == "team-key-0123456789"
    assert "demo-refused" not in verdict_mock.state.named
""")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_a_failed_assert_on_the_mocks_headers_prints_no_key(pytester: pytest.Pytester) -> None:
    """pytest diffs two dicts item by item; the mock's headers are compared by their repr."""
    pytester.makepyfile("""
import pytest

@pytest.mark.verdict_mock(api_keys=["team-key-0123456789"])
def test_headers(verdict_respx):
    assert verdict_respx.headers == {"Authorization": "x"}
""")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-vv")
    result.assert_outcomes(failed=1)
    assert "{'Authorization': 'Bearer …6789'} == {'Authorization': 'x'}" in result.stdout.str()
    explained = [line for line in result.outlines if line.startswith("E ")]  # not the source
    assert explained
    assert not [line for line in explained if "key-0123" in line]


PER_TEST_SETTINGS = """
import httpx
import pytest
import requests

KEY = "team-key-0123456789"


def statuses(mock, get, count):
    n = mock.mint(verdict="refused")
    return [get(mock.url(n), headers=mock.headers).status_code for _ in range(count)]


@pytest.mark.verdict_mock(rate_limit="2/60")
def test_strict_live(verdict_mock):
    assert statuses(verdict_mock, httpx.get, 3) == [200, 200, 429]


def test_default_live(verdict_mock):
    assert statuses(verdict_mock, httpx.get, 3) == [200, 200, 200]


@pytest.mark.verdict_mock(rate_limit="2/60", api_keys=[KEY])
def test_strict_respx(verdict_respx):
    assert verdict_respx.api_key == KEY
    assert statuses(verdict_respx, httpx.get, 3) == [200, 200, 429]


@pytest.mark.verdict_mock(rate_limit="1/60")
def test_strict_responses(verdict_responses):
    assert statuses(verdict_responses, requests.get, 2) == [200, 429]


def test_default_respx(verdict_respx):
    assert statuses(verdict_respx, httpx.get, 3) == [200, 200, 200]


@pytest.mark.verdict_mock(api_keys=[KEY], demo_sessions=False)
class TestAClassOfItsOwn:
    def test_key(self, verdict_mock):
        assert verdict_mock.api_key == KEY
        assert "demo-refused" not in verdict_mock.state.named

    @pytest.mark.verdict_mock(api_keys=["closest-marker-wins-0123"])
    def test_closest_marker_wins(self, verdict_mock):
        assert verdict_mock.api_key == "closest-marker-wins-0123"
"""


@pytest.mark.parametrize("order", ["as-written", "reversed"])
def test_each_test_gets_exactly_the_settings_it_asked_for(
    pytester: pytest.Pytester, order: str
) -> None:
    pytester.makepyfile(test_settings=PER_TEST_SETTINGS)
    ids = [
        "test_settings.py::test_strict_live",
        "test_settings.py::test_default_live",
        "test_settings.py::test_strict_respx",
        "test_settings.py::test_strict_responses",
        "test_settings.py::test_default_respx",
        "test_settings.py::TestAClassOfItsOwn",
    ]
    args = ["-p", "no:cacheprovider"]
    if order == "reversed":
        args += list(reversed(ids))
    result = pytester.runpytest(*args)
    result.assert_outcomes(passed=7)


def test_a_settings_fixture_override_and_a_marker_combine(pytester: pytest.Pytester) -> None:
    pytester.makeconftest("""
import pytest
from verdict_contract.mockserver import Settings

@pytest.fixture
def verdict_mock_settings():
    return Settings(port=0, api_keys=("conftest-key-0123456789",), rate_limit="1/60")
""")
    pytester.makepyfile("""
import pytest

def test_from_the_fixture(verdict_mock):
    assert verdict_mock.api_key == "conftest-key-0123456789"
    assert str(verdict_mock.state.limit) == "1/60"

@pytest.mark.verdict_mock(rate_limit="off")
def test_marker_on_top(verdict_mock):
    assert verdict_mock.api_key == "conftest-key-0123456789"
    assert str(verdict_mock.state.limit) == "off"
""")
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)


def test_a_wrong_marker_is_one_readable_line(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
import pytest

@pytest.mark.verdict_mock(rate_limits="2/60")
def test_typo(verdict_mock):
    pass

@pytest.mark.verdict_mock(rate_limit=5)
def test_wrong_type(verdict_respx):
    pass
""")
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(errors=2)
    output = result.stdout.str()
    assert (
        "@pytest.mark.verdict_mock: unknown setting(s) 'rate_limits' (did you mean "
        "'rate_limit'?); the mock's settings are" in output
    )
    assert "'access_log'" not in output  # not the whole list of the server's settings
    assert "@pytest.mark.verdict_mock: Settings(rate_limit=...): received 5; documented" in output
    assert "During handling" not in output  # one readable line, no chained traceback


def test_a_marker_that_needs_a_missing_extra_is_one_readable_line(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest("""
import verdict_contract.core.extras as extras

extras.is_installed = lambda package: package not in ("redis", "hiredis")  # [redis] not installed
""")
    pytester.makepyfile("""
import pytest

@pytest.mark.verdict_mock(state="redis://127.0.0.1:1/0")
def test_in_process(verdict_respx):
    pass

@pytest.mark.verdict_mock(state="redis://127.0.0.1:1/0")
def test_over_http(verdict_mock):
    pass
""")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(errors=2)
    output = result.stdout.str()
    line = "verdict_mock_settings or @pytest.mark.verdict_mock: --state redis://127.0.0.1:1/0"
    # each error is the line alone (the short summary repeats it after "ERROR", as wide as the
    # terminal is)
    assert [text.startswith(line) for text in result.stdout.lines].count(True) == 2
    assert "install verdict-contract[redis]" in output
    assert "Traceback" not in output  # the line alone
    assert "plugin.py:" not in output


SHARED_STATE_TESTS = """
import os
import time

import pytest
import redis

URL = os.environ["VERDICT_TEST_STATE"]
seen = []


def connected():
    with redis.Redis.from_url(URL) as asking:
        return len(asking.client_list()) - 1


@pytest.mark.verdict_mock(state=URL, secret="first")
def test_first(verdict_respx):
    verdict_respx.advance(1)  # a call to the shared state
    seen.append(connected())
    assert seen[0] > 0


@pytest.mark.verdict_mock(state=URL, secret="second")
def test_second(verdict_respx):
    verdict_respx.advance(1)
    deadline = time.monotonic() + 10
    while connected() > seen[0] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert connected() == seen[0]  # the first mock, put out of the session's, is closed
"""


class _SessionMocksKept:
    """A plugin that keeps the session's in-process mocks (as the tests saw them)."""

    def __init__(self) -> None:
        self.mocks: list[object] = []

    def pytest_runtest_call(self, item: pytest.Item) -> None:
        self.mocks.append(item.funcargs["verdict_inprocess_mocks"])  # type: ignore[attr-defined]


def test_in_process_mocks_on_a_shared_state_close_their_connections(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The session keeps an in-process mock per settings: one it puts out (past its bound), and
    every one when the session ends, closes its Redis connections (else left to the garbage
    collector, and its ResourceWarning to whichever test it ran in)."""
    import redis

    from tests.helpers import wait_until
    from tests.redisserver import redis_server
    from verdict_contract import plugin

    monkeypatch.setattr(plugin, "MAX_IN_PROCESS_MOCKS", 1)
    with redis_server() as server:
        monkeypatch.setenv("VERDICT_TEST_STATE", server.url)
        pytester.makepyfile(SHARED_STATE_TESTS)
        kept = _SessionMocksKept()  # so that no garbage collector closes them in our stead
        result = pytester.runpytest("-p", "no:cacheprovider", plugins=[kept])  # this process
        result.assert_outcomes(passed=2)
        assert kept.mocks

        def connected() -> int:
            with redis.Redis(port=server.port) as asking:
                return len(asking.client_list()) - 1

        assert wait_until(lambda: connected() == 0, timeout=10), "the session's mocks are open"


def test_no_output_of_the_plugin_shows_a_key(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = "integrator-secret-key-0123456789"
    monkeypatch.setenv("INTEGRATOR_KEY", key)  # so the test's own source does not show it
    pytester.makepyfile("""
import os

import httpx
import pytest

@pytest.mark.verdict_mock(api_keys=[os.environ["INTEGRATOR_KEY"]])
def test_fails_with_locals(verdict_mock, verdict_responses, verdict_mock_settings):
    state = verdict_mock.state
    settings = state.settings
    n = verdict_mock.mint()
    headers = verdict_mock.headers
    httpx.get(verdict_mock.url(n), headers=headers)
    verdict_mock.assert_not_called(n)

@pytest.mark.verdict_mock(api_keys=[os.environ["INTEGRATOR_KEY"]])
def test_fails_on_a_call_made_with_the_headers(verdict_respx):
    n = verdict_respx.mint(script=[429])
    assert httpx.get(verdict_respx.url(n), headers=verdict_respx.headers).status_code == 200
""")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-l", "-vv")
    result.assert_outcomes(failed=2)
    output = result.stdout.str() + result.stderr.str()
    assert "expected exactly 0 request(s)" in output
    assert re.search(r"settings +=  ?Settings\(", output)  # -l printed the locals...
    assert re.search(r"headers +=  ?\{'Authorization': 'Bearer …6789'\}", output)
    # the assert's explanation (which escapes the ellipsis)
    assert re.search(r"headers=\{'Authorization': 'Bearer (…|\\u2026)6789'\}", output)
    assert key not in output  # ...with the key masked


SECRET = "kq7Zp2Lw9RtX4mVb8NcY1sHd"  # no 8 characters of it in a row occur in pytest's output


def _fragments(text: str) -> list[str]:
    """The 8-character runs of :data:`SECRET` in ``text``."""
    return [SECRET[i : i + 8] for i in range(len(SECRET) - 7) if SECRET[i : i + 8] in text]


def test_a_key_sent_elsewhere_than_authorization_shows_in_no_report(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client that sends its key as a parameter or another header (the habit the coverage
    report flags): the entry's repr, and pytest's diff of two entries, mask it."""
    monkeypatch.setenv("INTEGRATOR_KEY", SECRET)
    pytester.makepyfile("""
import os

import httpx
import pytest

KEY = os.environ["INTEGRATOR_KEY"]

@pytest.mark.verdict_mock(api_keys=[KEY])
def test_repr(verdict_respx):
    n = verdict_respx.mint()
    httpx.get(verdict_respx.url(n), params={"api_key": KEY}, headers={"X-Api-Key": KEY})
    assert verdict_respx.journal[-1].status == 200

@pytest.mark.verdict_mock(api_keys=[KEY])
def test_diff(verdict_respx):
    n = verdict_respx.mint()
    httpx.get(verdict_respx.url(n), params={"key": KEY})
    httpx.get(verdict_respx.url(n) + "&" + KEY)  # a bare ?<key>
    first, second = verdict_respx.journal
    assert first == second
""")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-l", "-vv")
    result.assert_outcomes(failed=2)
    output = result.stdout.str() + result.stderr.str()
    assert "request=SentRequest(method='GET', url='https://" in output  # the repr was shown
    assert re.search(r"\('x-api-key', '(…|\\u2026)1sHd'\)", output)
    assert _fragments(output) == []


def test_a_key_setting_refused_shows_no_key_under_l(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A key the settings refuse, from an override and from ``Settings.parse``: one line, and
    ``pytest -l`` prints no local that holds it."""
    monkeypatch.setenv("INTEGRATOR_KEY", SECRET + " ")
    pytester.makeconftest("""
import os

import pytest
from verdict_contract.plugin import default_settings

@pytest.fixture
def verdict_mock_settings(pytestconfig):
    return default_settings(pytestconfig, api_keys=[os.environ["INTEGRATOR_KEY"]])
""")
    pytester.makepyfile("""
import os

from verdict_contract.mockserver import Settings

def test_override(verdict_respx):
    pass

def test_parse():
    Settings.parse(api_keys=[os.environ["INTEGRATOR_KEY"]])
""")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-l", "-vv")
    result.assert_outcomes(failed=1, errors=1)
    output = result.stdout.str() + result.stderr.str()
    assert output.count("cannot be sent in an Authorization header") >= 2
    assert _fragments(output) == []


def test_the_seed_option_reproduces_the_bodies(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("""
import httpx

def test_body(verdict_respx):
    n = verdict_respx.mint(verdict="refused")
    body = httpx.get(verdict_respx.url(n), headers=verdict_respx.headers).json()
    print("BODY", body["provenance"]["build"], body["summary"])
""")

    def body(*options: str) -> str:
        result = pytester.runpytest("-p", "no:cacheprovider", "-s", *options)
        result.assert_outcomes(passed=1)
        return next(line.partition("BODY")[2] for line in result.outlines if "BODY" in line)

    default = body()
    assert body() == default  # the same bodies on every run
    seeded = body("--verdict-seed", "run-42")
    assert seeded != default
    pytester.makeini("[pytest]\nverdict_seed = run-42\n")
    assert body() == seeded  # the seed, from the option or the ini file, reproduces them


def test_every_option_the_plugin_adds_starts_with_verdict(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    section = result.stdout.str().split("verdict-contract mock fixtures:")[1].split("\n\n")[0]
    flags = [word for word in section.split() if word.startswith("--")]
    assert flags
    assert all(flag.startswith("--verdict-") for flag in flags), flags


def test_fixtures_and_per_test_settings_work_under_xdist(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_integration=INTEGRATOR_TESTS, test_settings=PER_TEST_SETTINGS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2")
    result.assert_outcomes(passed=19)


def test_loading_the_plugin_imports_neither_the_mock_nor_its_libraries() -> None:
    heavy = ("flask", "waitress", "faker", "respx", "responses", "verdict_contract.mockserver")
    code = (
        "import sys, verdict_contract.plugin\n"
        f"print(sorted(m for m in sys.modules if m.startswith({heavy!r})))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


def test_an_override_changes_only_what_it_names(pytester: pytest.Pytester) -> None:
    pytester.makeconftest("""
import pytest
from verdict_contract.mockserver import Settings

@pytest.fixture(scope="session")
def verdict_mock_settings():
    return Settings(api_keys=("team-key-0123456789",))  # no port, no seed: the README's style
""")
    pytester.makepyfile("""
from verdict_contract.mockserver.factory import make_verdict as factory

def test_keeps_a_free_port_and_the_seed(verdict_mock, make_verdict):
    assert verdict_mock.api_key == "team-key-0123456789"
    assert verdict_mock.state.settings.port == 0
    assert not verdict_mock.base_url.endswith(":8080")
    assert verdict_mock.state.settings.seed == "run-42"
    assert make_verdict("refused") == factory("refused", seed="run-42")
    assert make_verdict("refused") != factory("refused")
""")
    result = pytester.runpytest("-p", "no:cacheprovider", "--verdict-seed", "run-42")
    result.assert_outcomes(passed=1)


def test_default_settings_builds_on_the_plugins_defaults(pytester: pytest.Pytester) -> None:
    pytester.makeconftest("""
import pytest
from verdict_contract.plugin import default_settings

@pytest.fixture(scope="module")
def verdict_mock_settings(pytestconfig):
    return default_settings(pytestconfig, rate_limit="1/60")
""")
    pytester.makepyfile("""
def test_on_top_of_the_defaults(verdict_mock):
    settings = verdict_mock.state.settings
    assert (settings.port, settings.seed, str(settings.rate_limit)) == (0, "s-7", "1/60")
""")
    pytester.makeini("[pytest]\nverdict_seed = s-7\n")
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


BASE_URL_TESTS = """
import httpx
import pytest
import requests


@pytest.mark.verdict_mock(base_url="https://api.example/v2")
def test_respx_at_the_clients_own_host(verdict_respx):
    n = verdict_respx.mint(verdict="refused")
    url = f"https://api.example/v2/e?n={n}"
    assert httpx.get(url, headers=verdict_respx.headers).json()["verdict"] == "refused"
    assert verdict_respx.base_url == "https://api.example/v2"


@pytest.mark.verdict_mock(base_url="http://billing.internal:8080/explain/")
def test_responses_at_the_clients_own_host(verdict_responses):
    n = verdict_responses.mint(verdict="disputed")
    url = f"http://billing.internal:8080/explain/e?n={n}"
    assert requests.get(url, headers=verdict_responses.headers).json()["verdict"] == "disputed"


def test_the_default_host_stays(verdict_respx):
    assert verdict_respx.base_url == "https://verdict.mock"


@pytest.mark.verdict_mock(base_url="api.example/v2")
def test_no_scheme(verdict_respx):
    pass


"""
MODULE_WIDE_BASE_URL = """
import httpx
import pytest

pytestmark = pytest.mark.verdict_mock(base_url="https://api.example/v2")


def test_in_process(verdict_respx):
    n = verdict_respx.mint(verdict="refused")
    assert httpx.get(f"https://api.example/v2/e?n={n}", headers=verdict_respx.headers).is_success


def test_over_real_http(verdict_mock):
    n = verdict_mock.mint(verdict="refused")
    assert verdict_mock.base_url.startswith("http://127.0.0.1:")
    assert httpx.get(verdict_mock.url(n), headers=verdict_mock.headers).is_success
"""


def test_a_marker_chooses_the_base_url_of_the_in_process_mocks(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_base_url=BASE_URL_TESTS)
    result = pytester.runpytest("-p", "no:cacheprovider", "-rA")
    result.assert_outcomes(passed=3, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*@pytest.mark.verdict_mock: base_url 'api.example/v2' is not an http(s) URL with a "
            "host, such as https://api.example/v2*",
        ]
    )
    assert "Traceback" not in result.stdout.str()


def test_a_module_wide_base_url_moves_the_in_process_mocks_and_not_the_live_one(
    pytester: pytest.Pytester,
) -> None:
    """A ``pytestmark`` (or conftest) base URL is for the in-process fixtures; ``verdict_mock``
    serves at its own address under it, as it always does."""
    pytester.makepyfile(test_module_wide=MODULE_WIDE_BASE_URL)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)
