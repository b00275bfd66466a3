"""One contract for every state store: the memory store and Redis pass the same test class.

:class:`StoreContract` drives a mock over real HTTP; each subclass gives it another store by
overriding one fixture (``state_url``), the way itsdangerous re-runs a test class against
another serializer. A rule kept by one store and dropped by the other fails here. Time moves by
the mock's clock (``POST /_mock/clock``), never by sleeping.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.redisserver import redis_server
from verdict_contract.core.errors import VerificationError
from verdict_contract.core.rates import RateLimit
from verdict_contract.mockserver import Settings
from verdict_contract.mockserver.model import scripts
from verdict_contract.mockserver.store import journal
from verdict_contract.mockserver.store.backend import StateURL
from verdict_contract.testing.mocks import VerdictMock, live_mock

KEY = "store-contract-key-0001"
AUTH = {"Authorization": f"Bearer {KEY}"}
STEPS_KEPT = 3
"""The script bound of these tests, in one-step scripts of no headers (each costs STEP_BYTES and
SCRIPT_BYTES)."""


class StoreContract:
    """What every state backend must do, seen through the control API and ``/e``."""

    @pytest.fixture
    def state_url(self) -> str:
        raise NotImplementedError("a store's test class names its state")

    @pytest.fixture
    def mock(self, state_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[VerdictMock]:
        # a small script bound, read when the mock is made: a full store in a few mints
        one = scripts.STEP_BYTES + scripts.SCRIPT_BYTES
        monkeypatch.setattr(scripts, "MAX_SCRIPT_BYTES", STEPS_KEPT * one)
        settings = Settings(
            port=0,
            state=StateURL.parse(state_url),
            secret=f"contract-{id(self)}",
            api_keys=(KEY,),
            rate_limit=RateLimit(3, 60.0),
            journal_size=5,
        )
        with live_mock(settings) as mock:
            yield mock

    @pytest.fixture
    def http(self, mock: VerdictMock) -> Iterator[httpx.Client]:
        with httpx.Client(base_url=mock.base_url, timeout=30) as client:
            assert client.post("/_mock/reset").status_code == 204
            yield client

    @staticmethod
    def explain(http: httpx.Client, n: str) -> int:
        return http.get("/e", params={"n": n}, headers=AUTH).status_code

    @staticmethod
    def mint(http: httpx.Client, **spec: Any) -> httpx.Response:
        return http.post("/_mock/sessions", json=spec)

    @staticmethod
    def journal(http: httpx.Client) -> list[dict[str, Any]]:
        response = http.get("/_mock/requests")
        assert response.status_code == 200, response.text
        entries: list[dict[str, Any]] = response.json()
        return entries

    @staticmethod
    def advance(http: httpx.Client, seconds: float) -> None:
        response = http.post("/_mock/clock", json={"advance": seconds})
        assert response.status_code == 200, response.text

    # -- rate limits ----------------------------------------------------------------------------
    def test_a_limit_lets_exactly_its_budget_through(self, http: httpx.Client) -> None:
        assert [self.explain(http, "demo-contradicted") for _ in range(5)] == [200] * 3 + [429] * 2

    def test_the_window_resets_when_the_mocks_clock_passes_it(self, http: httpx.Client) -> None:
        assert [self.explain(http, "demo-contradicted") for _ in range(4)][-1] == 429
        self.advance(http, 59)
        assert self.explain(http, "demo-contradicted") == 429
        self.advance(http, 1)
        assert [self.explain(http, "demo-contradicted") for _ in range(4)] == [200] * 3 + [429]

    # -- scripts and their bound ----------------------------------------------------------------
    def test_each_step_is_used_once_in_order(self, http: httpx.Client) -> None:
        minted = self.mint(http, script=[503, 429])
        assert minted.status_code == 201, minted.text
        n = minted.json()["n"]
        assert [self.explain(http, n) for _ in range(3)] == [503, 429, 200]

    def test_a_full_store_refuses_a_new_script_and_drops_no_old_one(
        self, http: httpx.Client
    ) -> None:
        kept = [self.mint(http, script=[503]) for _ in range(STEPS_KEPT)]
        assert [r.status_code for r in kept] == [201] * STEPS_KEPT
        refused = self.mint(http, script=[503])
        assert refused.status_code == 409, refused.text
        assert refused.json()["error"]["code"] == "script_store_full"
        assert "POST /_mock/reset" in refused.json()["error"]["message"]
        # every script minted before the refusal is still whole
        assert [self.explain(http, r.json()["n"]) for r in kept] == [503] * STEPS_KEPT
        # an answered step is freed: there is room again
        assert self.mint(http, script=[503]).status_code == 201

    def test_health_shows_the_script_bounds_use(self, http: httpx.Client) -> None:
        n = self.mint(http, script=[503, 503]).json()["n"]
        script = scripts.SCRIPT_BYTES  # the script's own, freed with its last step
        held = http.get("/_mock/health").json()["script_bytes"]
        assert held == 2 * scripts.STEP_BYTES + script
        self.explain(http, n)
        assert http.get("/_mock/health").json()["script_bytes"] == scripts.STEP_BYTES + script
        self.explain(http, n)
        assert http.get("/_mock/health").json()["script_bytes"] == 0
        assert http.post("/_mock/reset").status_code == 204
        assert http.get("/_mock/health").json()["script_bytes"] == 0

    # -- journal --------------------------------------------------------------------------------
    def test_the_journal_keeps_the_newest_in_order_and_clears(self, http: httpx.Client) -> None:
        for index in range(8):
            self.explain(http, f"j{index}")
        assert [e["n"] for e in self.journal(http)] == [f"j{index}" for index in range(3, 8)]
        assert http.get("/_mock/health").json()["journal_entries"] == 5
        assert http.delete("/_mock/requests").status_code == 204
        assert self.journal(http) == []
        self.explain(http, "after")
        assert [e["n"] for e in self.journal(http)] == ["after"]

    def test_an_entry_names_its_fields(self, http: httpx.Client) -> None:
        self.explain(http, "demo-contradicted")
        (entry,) = self.journal(http)
        assert entry["method"] == "GET"
        assert entry["path"] == "/e"
        assert entry["n"] == "demo-contradicted"
        assert entry["status"] == 200
        assert entry["outcome"] == "verdict"
        assert entry["fault"] is None
        assert KEY not in str(entry)
        assert entry["authorization"].endswith(KEY[-4:])

    def test_a_flood_from_any_web_page_evicts_no_real_entry(self, http: httpx.Client) -> None:
        real = [f"real{index}" for index in range(3)]
        for n in real:
            self.explain(http, n)
        for index in range(550):  # what a no-cors fetch sends: no key, any path
            assert http.get(f"/x{index}").status_code == 404
            assert http.get("/e", params={"n": f"flood{index}"}).status_code == 401
        entries = self.journal(http)
        assert [e["n"] for e in entries if e["n"] in real] == real
        flood = [e for e in entries if e["n"] not in real]
        assert len(flood) == journal.UNTRUSTED_KEPT  # the ring's bound, and its newest
        assert {e["status"] for e in flood} == {401, 404}
        assert flood[-1]["n"] == "flood549"
        assert any(e["path"] == "/x549" for e in flood)

    # -- clock, expiry, reset ---------------------------------------------------------------------
    def test_the_clock_is_moved_by_the_control_api(self, http: httpx.Client) -> None:
        moved = http.post("/_mock/clock", json={"advance": 120})
        assert moved.json()["skew"] == pytest.approx(120)
        moved = http.post("/_mock/clock", json={"advance": 30})
        assert moved.json()["skew"] == pytest.approx(150)

    def test_a_session_expires_after_15_minutes_of_the_mocks_clock(
        self, http: httpx.Client
    ) -> None:
        n = self.mint(http).json()["n"]
        self.advance(http, 15 * 60 - 5)
        assert self.explain(http, n) == 200
        self.advance(http, 10)
        assert self.explain(http, n) == 404
        assert self.journal(http)[-1]["outcome"] == "expired"

    def test_a_session_is_expired_from_its_lifetime_on_not_a_second_later(
        self, http: httpx.Client
    ) -> None:
        """Half a second past 15 minutes is expired, on every store: a store whose check is off
        by a second (``> life + 1``, Python's or Lua's) answers 200 there. Only the host's own
        time between the mint and the call adds to the age, so the check can only get easier."""
        n = self.mint(http).json()["n"]
        self.advance(http, 15 * 60 + 0.5)
        assert self.explain(http, n) == 404

    def test_reset_forgets_limits_journal_scripts_and_clock(self, http: httpx.Client) -> None:
        n = self.mint(http, script=[503]).json()["n"]
        for _ in range(4):
            self.explain(http, "demo-contradicted")
        self.advance(http, 100)
        assert http.post("/_mock/reset").status_code == 204
        assert self.journal(http) == []
        health = http.get("/_mock/health").json()
        assert (health["journal_entries"], health["script_bytes"]) == (0, 0)
        assert http.post("/_mock/clock", json={"advance": 0}).json()["skew"] == 0
        assert self.explain(http, n) == 200  # its script went with the reset
        assert [self.explain(http, "demo-contradicted") for _ in range(2)] == [200, 200]

    # -- scripts left --------------------------------------------------------------------------
    def test_every_minted_scripts_unused_steps_are_told(
        self, mock: VerdictMock, http: httpx.Client
    ) -> None:
        first, second = (self.mint(http, script=[status]).json()["n"] for status in (503, 429))
        assert self.explain(http, first) == 503
        with pytest.raises(VerificationError, match=r"1 session\(s\) have steps left") as left:
            mock.assert_all_scripts_used()
        assert "1 step(s) left: 429\n" in str(left.value)
        assert self.explain(http, second) == 429
        mock.assert_all_scripts_used()  # the demo sessions' scripts are not minted ones


class TestMemoryStore(StoreContract):
    @pytest.fixture
    def state_url(self) -> str:
        return "memory"


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    with redis_server() as server:
        yield server.url


class TestRedisStore(StoreContract):
    @pytest.fixture
    def state_url(self, redis_url: str) -> str:
        return redis_url
