"""A mock's keys in Redis expire when it is idle, and say whose they are.

Every key a mock writes carries a TTL of ``--state-ttl`` that each request and control call
renews in the same round trip; an operator reads the mock's name (``--state-name``) in the key,
never its secret. No test waits for a TTL to pass: Redis's ``PTTL`` shows it.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
import redis
from redis.crc import key_slot

from tests.redisserver import redis_server
from verdict_contract.core.errors import SettingsError
from verdict_contract.mockserver import Settings
from verdict_contract.mockserver.store.backend import StateURL
from verdict_contract.mockserver.store.redisstate import Keys
from verdict_contract.testing.mocks import VerdictMock, live_mock

KEY = "expiry-test-key-0001"
SECRET = "expiry-test-secret-d41d8cd98f00"
TTL = 3600.0
EVERY_KEY = {*Keys._fields, "steps"}
"""The names of a mock's keys, after its prefix (a session's steps: ``steps:<id>``): what
each test's traffic writes."""


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    with redis_server() as server:
        yield server.url


@pytest.fixture
def client(server_url: str) -> Iterator[redis.Redis]:
    made = redis.Redis.from_url(server_url, decode_responses=True)
    made.flushall()  # each test counts every key in the server
    yield made
    made.close()


def settings(url: str, **extra: object) -> Settings:
    given: dict[str, object] = {"port": 0, "state": StateURL.parse(url), "secret": SECRET}
    given |= {"api_keys": (KEY,), "state_ttl": TTL, **extra}
    return Settings(**given)  # type: ignore[arg-type]


def traffic(mock: VerdictMock) -> None:
    """Touch every key: mint (scripts, minted), limits, journal, ring, clock, expiry marks."""
    mock.reset()
    n = mock.mint(script=[503, 503])
    assert httpx.get(mock.url(n), headers=mock.headers).status_code == 503
    assert httpx.get(mock.url("demo-contradicted"), headers=mock.headers).status_code == 200
    assert httpx.get(mock.url("no-key-sent")).status_code == 401  # the ring
    assert httpx.get(f"{mock.base_url}/elsewhere").status_code == 404
    mock.advance(5)
    mock.expire(n)


def _name(key: str) -> str:
    return key.partition("}:")[2].partition(":")[0]


def ttls(client: redis.Redis) -> dict[str, int]:
    return {key: int(client.pttl(key)) for key in client.scan_iter(count=1000)}


def test_every_key_of_a_mock_has_a_ttl_within_the_setting_after_traffic(
    server_url: str, client: redis.Redis
) -> None:
    with live_mock(settings(server_url)) as mock:
        traffic(mock)
    found = ttls(client)
    assert {_name(key) for key in found} == EVERY_KEY
    assert all(0 < ttl <= TTL * 1000 for ttl in found.values()), found


def test_a_request_renews_every_key_of_the_mock(server_url: str, client: redis.Redis) -> None:
    with live_mock(settings(server_url)) as mock:
        traffic(mock)
        for key in client.scan_iter(count=1000):
            client.pexpire(key, 5000)
        assert httpx.get(mock.url("demo-contradicted"), headers=mock.headers).status_code == 200
        renewed = ttls(client)
        assert {_name(key) for key in renewed} == EVERY_KEY
        assert all(ttl > 5000 for ttl in renewed.values()), renewed


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda m: httpx.get(f"{m.base_url}/_mock/requests"), id="journal read"),
        pytest.param(lambda m: httpx.get(f"{m.base_url}/_mock/health"), id="health"),
        pytest.param(lambda m: httpx.post(f"{m.base_url}/_mock/sessions", json={}), id="mint"),
        pytest.param(lambda m: httpx.get(f"{m.base_url}/nowhere"), id="wrong path"),
    ],
)
def test_a_control_call_renews_every_key_of_the_mock(
    server_url: str, client: redis.Redis, call: object
) -> None:
    with live_mock(settings(server_url)) as mock:
        traffic(mock)
        for key in client.scan_iter(count=1000):
            client.pexpire(key, 5000)
        call(mock)  # type: ignore[operator]
        renewed = ttls(client)
        assert renewed
        assert all(ttl > 5000 for ttl in renewed.values()), renewed


def test_the_ttl_is_the_setting(server_url: str, client: redis.Redis) -> None:
    with live_mock(settings(server_url, state_ttl=90)) as mock:
        traffic(mock)
    assert all(80_000 < ttl <= 90_000 for ttl in ttls(client).values())


def test_keys_carry_the_mocks_name_and_share_one_slot(server_url: str, client: redis.Redis) -> None:
    with live_mock(settings(server_url, state_name="ci-job-4711")) as mock:
        traffic(mock)
    keys = list(client.scan_iter(count=1000))
    assert keys
    assert all(key.startswith("verdict-mock:{ci-job-4711.") for key in keys), keys
    assert len({key_slot(key.encode()) for key in keys}) == 1


def test_two_names_with_one_secret_are_two_mocks(server_url: str, client: redis.Redis) -> None:
    with (
        live_mock(settings(server_url, state_name="one", rate_limit="1/60")) as one,
        live_mock(settings(server_url, state_name="two", rate_limit="1/60")) as two,
    ):
        one.reset()
        two.reset()
        for mock in (one, two):
            assert httpx.get(mock.url("demo-contradicted"), headers=mock.headers).status_code == 200
        assert len(one.journal) == len(two.journal) == 1


def test_the_secret_is_in_no_key_and_no_value(server_url: str, client: redis.Redis) -> None:
    with live_mock(settings(server_url, state_name="named")) as mock:
        traffic(mock)
    with live_mock(settings(server_url)) as mock:  # unnamed: the prefix is a digest
        traffic(mock)
    raw = redis.Redis.from_url(server_url)
    keys = list(raw.scan_iter(count=1000))
    stored = b"".join(key + (raw.dump(key) or b"") for key in keys)
    raw.close()
    assert len(keys) == 2 * len(EVERY_KEY)
    for part in (SECRET, SECRET[:12], SECRET[-12:], KEY):
        assert part.encode() not in stored


def test_the_state_name_and_ttl_are_checked() -> None:
    with pytest.raises(SettingsError, match="state_ttl"):
        Settings(state_ttl=0)
    for bad in ("a{b", "a}b", "with space", "a:b", "x" * 65, ""):
        with pytest.raises(SettingsError, match="state_name"):
            Settings(state_name=bad)
    with pytest.raises(SettingsError, match="secret"):
        Settings(secret="s3cret-s3cret", state_name="job-s3cret-s3cret")


def _get(mock: VerdictMock, key: str) -> int:
    headers = {"Authorization": f"Bearer {key}"}
    return httpx.get(mock.url("demo-contradicted"), headers=headers).status_code


def test_a_key_made_between_renewals_gets_its_ttl_as_it_is_made(
    server_url: str, client: redis.Redis
) -> None:
    # /e renews every key only when due (the list it journals to renewed over a second ago):
    # a key it makes in between (the rate-limit counts, here deleted to be made again) must
    # not be left without a TTL, or an idle mock would leave it behind for ever
    other = "expiry-test-key-0002"
    with live_mock(settings(server_url, api_keys=(KEY, other))) as mock:
        assert _get(mock, KEY) == 200  # makes the journal: every key renewed
        (limits,) = [k for k in client.scan_iter(count=1000) if k.endswith(":limits")]
        client.delete(limits)
        clock = limits.replace(":limits", ":clock")
        client.pexpire(clock, 5000)  # a marker: untouched unless every key is renewed
        client.pexpire(limits.replace(":limits", ":journal"), int(TTL * 1000) + 30_000)  # fresh,
        assert _get(mock, other) == 200  # by the test, not by timing: no renewal due
        assert 0 < client.pttl(limits) <= TTL * 1000
        assert client.pttl(clock) <= 5000  # so the count's own PEXPIRE gave it its TTL


def test_a_request_renews_once_the_journal_is_renewed_over_a_second_ago(
    server_url: str, client: redis.Redis
) -> None:
    with live_mock(settings(server_url)) as mock:
        traffic(mock)
        clock = next(k for k in client.scan_iter(count=1000) if k.endswith(":clock"))
        client.pexpire(clock, 5000)
        journal = clock.replace(":clock", ":journal")
        client.pexpire(journal, int(TTL * 1000) + 30_000)  # fresh for 30 s: by the test, not timing
        assert _get(mock, KEY) == 200
        assert client.pttl(clock) <= 5000  # the journal's TTL is fresh: not renewed
        client.pexpire(journal, int(TTL * 1000) - 1001)  # as a second and a bit later
        assert _get(mock, KEY) == 200
        assert client.pttl(clock) > 5000
