"""Tenants (``--tenants``): teams on one mock, each isolated from the others, over real HTTP.

Two teams and the operator share one mock process; each isolation the issue names is shown
with one request that crosses a tenant's border (and fails to) beside one that stays in it.
The same checks run with ``/e`` on the event loop and through the WSGI layers (its blocking
path, as ``flask run`` or any WSGI server calls the app).
Across processes sharing a Redis state: tests/mockserver/store/test_redistenants.py.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import running, wait_until
from tests.redisserver import redis_server
from verdict_contract.core.errors import ScenarioError, SettingsError
from verdict_contract.core.redact import KeyFinder, Secret, mask
from verdict_contract.mockserver import Settings, create_app
from verdict_contract.mockserver.cli import banner, watch_files
from verdict_contract.mockserver.model.scenario import parse_scenario
from verdict_contract.mockserver.model.tenants import load_tenants, parse_tenants
from verdict_contract.mockserver.store.backend import StateURL
from verdict_contract.mockserver.web.answers import state_of
from verdict_contract.testing.background import BackgroundServer

OPERATOR_TOKEN = "operator-token-0123456789"
OPERATOR_KEY = "operator-key-0001"
TENANTS: dict[str, Any] = {
    "tenants": {
        "pay": {"control_token": "pay-token-0123456789ab", "api_keys": ["pay-key-0001"]},
        "risk": {
            "control_token": "risk-token-0123456789a",
            "api_keys": ["risk-key-0001", "risk-key-0002"],
            "rate_limit": "2/60",
        },
    }
}
SCENARIO = "sessions:\n  scripted:\n    script: [404, 429]\n"


def token(tenant: str) -> str:
    return str(TENANTS["tenants"][tenant]["control_token"])


def key(tenant: str) -> str:
    return str(TENANTS["tenants"][tenant]["api_keys"][0])


class Teams:
    """One client per tenant (its token and key), and the operator's."""

    def __init__(self, base_url: str, server: str = "async") -> None:
        self.base_url = base_url
        self.server = server
        self.clients: dict[str, httpx.Client] = {}
        for name in ("pay", "risk", "operator"):
            control = OPERATOR_TOKEN if name == "operator" else token(name)
            self.clients[name] = httpx.Client(
                base_url=base_url, timeout=10, headers={"X-Mock-Token": control}
            )

    def explain(self, tenant: str, n: str, *, as_key: str | None = None) -> httpx.Response:
        sent = as_key or (OPERATOR_KEY if tenant == "operator" else key(tenant))
        return self.clients[tenant].get("/e", params={"n": n}, headers=_bearer(sent))

    def control(self, tenant: str, method: str, path: str, **kwargs: Any) -> httpx.Response:
        return self.clients[tenant].request(method, f"/_mock/{path}", **kwargs)

    def mint(self, tenant: str, **spec: Any) -> str:
        minted = self.control(tenant, "POST", "sessions", json=spec)
        assert minted.status_code == 201, minted.text
        return str(minted.json()["n"])

    def journal(self, tenant: str, **headers: str) -> list[dict[str, Any]]:
        read = self.control(tenant, "GET", "requests", headers=headers)
        assert read.status_code == 200, read.text
        entries: list[dict[str, Any]] = read.json()
        return entries

    def close(self) -> None:
        for client in self.clients.values():
            client.close()


def _bearer(sent: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {sent}"}


@pytest.fixture
def tenants_file(tmp_path: Path) -> Path:
    path = tmp_path / "tenants.json"
    path.write_text(json.dumps(TENANTS))
    return path


@pytest.fixture(params=["async", "wsgi"])
def teams(request: pytest.FixtureRequest, tenants_file: Path, tmp_path: Path) -> Iterator[Teams]:
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(SCENARIO)
    settings = Settings(
        api_keys=(OPERATOR_KEY,),
        control_token=Secret(OPERATOR_TOKEN),
        tenants=tenants_file,
        scenario=scenario,
        access_log=True,
    )
    with running(create_app(settings), server=request.param) as server:
        teams = Teams(server.base_url, request.param)
        yield teams
        teams.close()


def test_a_minted_session_is_its_tenants_only(teams: Teams) -> None:
    n = teams.mint("pay")
    assert teams.explain("pay", n).status_code == 200
    assert teams.explain("risk", n).status_code == 404  # signed for pay: unknown elsewhere
    assert teams.explain("operator", n).status_code == 404


def test_each_tenant_has_its_own_copy_of_a_scripted_session(teams: Teams) -> None:
    assert teams.explain("pay", "scripted").status_code == 404  # pay's first step
    assert teams.explain("risk", "scripted").status_code == 404  # risk's first, not pay's second
    assert teams.explain("pay", "scripted").status_code == 429
    assert teams.explain("operator", "scripted").status_code == 404


def test_a_tenants_clock_moves_its_sessions_only(teams: Teams) -> None:
    ours, theirs = teams.mint("pay"), teams.mint("risk")
    moved = teams.control("pay", "POST", "clock", json={"advance": 901})
    assert moved.json() == {"skew": 901.0}
    assert teams.explain("pay", ours).status_code == 404  # expired on pay's clock
    assert teams.explain("risk", theirs).status_code == 200
    assert teams.control("risk", "POST", "clock", json={"advance": 0}).json() == {"skew": 0.0}


def test_a_tenant_reads_and_resets_its_own_journal(teams: Teams) -> None:
    teams.explain("pay", "demo-refused")
    teams.explain("risk", "demo-disputed")
    assert [e["n"] for e in teams.journal("pay")] == ["demo-refused"]
    assert [e["n"] for e in teams.journal("risk")] == ["demo-disputed"]
    assert teams.journal("operator") == []  # the operator's own tenant: neither
    assert teams.control("pay", "POST", "reset").status_code == 204
    assert teams.journal("pay") == []
    assert [e["n"] for e in teams.journal("risk")] == ["demo-disputed"]  # kept


def test_the_operator_acts_for_any_tenant_and_a_tenant_for_itself_only(teams: Teams) -> None:
    teams.explain("risk", "demo-disputed")
    seen = teams.journal("operator", **{"X-Mock-Tenant": "risk"})
    assert [e["n"] for e in seen] == ["demo-disputed"]
    listed = teams.control("operator", "GET", "tenants").json()
    assert [t["name"] for t in listed] == ["default", "pay", "risk"]
    assert listed[2]["api_keys"] == ["…0001", "…0002"]  # a key's last 4 at most
    own = teams.control("pay", "GET", "tenants").json()
    assert [t["name"] for t in own] == ["pay"]
    crossing = teams.control("pay", "GET", "requests", headers={"X-Mock-Tenant": "risk"})
    assert crossing.status_code == 403
    assert crossing.json()["error"]["code"] == "operator_only"
    unknown = teams.control("operator", "GET", "requests", headers={"X-Mock-Tenant": "nobody"})
    assert unknown.status_code == 404
    assert "pay, risk" in unknown.json()["error"]["message"]
    assert "'nobody'" in unknown.json()["error"]["message"]  # what it received, as sent


def test_a_control_error_quotes_no_secret_sent_in_a_header(teams: Teams) -> None:
    """A token or a key sent where a tenant's name, a Host or an Origin goes is masked in the
    error that quotes what it received (it was once quoted whole, another tenant's token)."""
    sent = {
        "X-Mock-Tenant": token("risk"),
        "Host": key("pay"),
        "Origin": f"http://x/{OPERATOR_TOKEN}",
    }
    secrets = KeyFinder.of(s.encode() for s in (token("risk"), key("pay"), OPERATOR_TOKEN))
    for name, value in sent.items():
        refused = teams.control("operator", "GET", "requests", headers={name: value})
        assert refused.status_code in (403, 404, 421), refused.text
        assert "received" in refused.json()["error"]["message"]
        assert not secrets.finds(refused.text), refused.text


def test_every_tenants_key_is_masked_in_every_journal_and_log_line(
    teams: Teams, caplog: pytest.LogCaptureFixture
) -> None:
    # A key sent where none belongs, alone or inside a value, is masked in whichever journal
    # keeps the request, and in the access log.
    with caplog.at_level(logging.INFO, logger="mockserver.access"):
        teams.explain("risk", key("pay"))
        teams.explain("risk", f"Bearer {key('risk')}")
        with httpx.Client(base_url=teams.base_url, timeout=10) as stranger:
            stranger.get("/e", params={"n": key("risk")})  # no key: the operator's journal
            stranger.get(f"/e/{key('pay')}.json")
            secret = {"Authorization": "Token some-other-secret"}  # no key of the mock's
            stranger.get("/e", params={"n": "some-other-secret"}, headers=secret)
            stranger.get("/e", params={"n": "a-basic-password"}, auth=("user", "a-basic-password"))
            as_user = base64.b64encode(b"sk_live_a-key-as-user:").decode().rstrip("=")  # unpadded
            basic = {"Authorization": f"Basic {as_user}"}
            stranger.get("/e", params={"n": "sk_live_a-key-as-user"}, headers=basic)
        kept = teams.journal("risk") + teams.journal("operator")
        assert wait_until(lambda: sum('"GET /' in r.getMessage() for r in caplog.records) >= 9)
    masked = [
        ("/e", "…0001"),
        ("/e", "…0001"),
        ("/e", "…0001"),
        ("/e/…json", None),
        ("/e", "…cret"),
        ("/e", "…word"),
        ("/e", "…user"),
    ]
    assert [(e["path"], e["n"]) for e in kept] == masked
    shown = json.dumps(kept) + "\n".join(r.getMessage() for r in caplog.records)
    assert "key-0001" not in shown
    assert "some-other-secret" not in shown
    assert "a-basic-password" not in shown
    assert "a-key-as-user" not in shown


def test_an_unknown_token_is_refused(teams: Teams) -> None:
    with httpx.Client(base_url=teams.base_url, timeout=10) as stranger:
        for sent in ("not-a-token-of-anyone", token("pay")[:-1], ""):
            refused = stranger.get("/_mock/requests", headers={"X-Mock-Token": sent})
            assert refused.status_code == 401, sent


def test_each_tenant_has_its_own_rate_limit(teams: Teams) -> None:
    risk = [teams.explain("risk", "demo-refused").status_code for _ in range(3)]
    assert risk == [200, 200, 429]  # risk's 2/60
    assert teams.explain("pay", "demo-refused").status_code == 200  # the mock's 6000/60
    other_key = teams.explain("risk", "demo-refused", as_key="risk-key-0002")
    assert other_key.status_code == 200  # a budget per key, as without tenants


def test_each_tenant_has_its_own_coverage(teams: Teams) -> None:
    teams.explain("pay", "demo-refused")
    assert teams.control("pay", "GET", "coverage").json()["requests"] == 1
    assert teams.control("risk", "GET", "coverage").json()["requests"] == 0


def test_the_dashboards_cookie_opens_its_tenants_view(teams: Teams) -> None:
    teams.explain("pay", "demo-refused")
    with httpx.Client(base_url=teams.base_url, timeout=10) as browser:
        opened = browser.get("/_mock/", params={"token": token("pay")})
        assert opened.status_code == 303
        journal = browser.get("/_mock/requests", headers={"Accept": "application/json"})
        assert [e["n"] for e in journal.json()] == ["demo-refused"]
        browser.cookies.clear()
        assert browser.get("/_mock/", params={"token": "wrong-token-0123456789"}).status_code == 401


def test_metrics_and_the_access_log_name_the_tenant(
    teams: Teams, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="mockserver.access"):
        teams.explain("risk", "demo-refused")
        teams.explain("pay", "demo-refused")
        teams.explain("pay", "demo-refused", as_key="nobody-key-0001")
        teams.control("pay", "GET", "requests")

        def lines() -> list[str]:  # the server's thread logs after the answer is written
            return [r.getMessage() for r in caplog.records if '"GET /' in r.getMessage()]

        assert wait_until(lambda: len(lines()) == 4)
    assert [line.split(" ")[2] for line in lines()] == ["risk", "pay", "-", "pay"]
    assert not any("key-" in line for line in lines())  # no key in any line
    scraped = httpx.get(f"{teams.base_url}/_mock/metrics", timeout=10).text
    families = {f.name: f for f in text_string_to_metric_families(scraped)}
    counted = {
        (s.labels["tenant"], s.labels["status"]): s.value
        for s in families["verdict_mock_requests"].samples
        if s.name.endswith("_total")
    }
    if teams.server == "async":  # the event loop counts what it answers
        assert counted[("risk", "200")] == 1
        assert counted[("pay", "200")] == 1
        assert counted[("default", "401")] == 1
    else:  # answers of the WSGI layers come from the app's threads: not counted
        assert counted == {}
    entries = {s.labels["tenant"] for s in families["verdict_mock_journal_entries"].samples}
    assert entries == {"default", "pay", "risk"}


def test_the_tenants_file_is_checked_line_by_line(tmp_path: Path) -> None:
    good = {"control_token": "t" * 16, "api_keys": ["k1"]}
    assert parse_tenants({"tenants": {"a-1": good}})["a-1"].api_keys == ("k1",)
    refusals = {
        "1 to 40 of a-z": {"tenants": {"Bad Name": good}},
        "not 'default'": {"tenants": {"default": good}},
        "at least 16 characters": {"tenants": {"a": {**good, "control_token": "short"}}},
        "non-empty list": {"tenants": {"a": {**good, "api_keys": []}}},
        "the fields colour": {"tenants": {"a": {**good, "colour": "red"}}},
        "b.api_keys: … is also in a's api_keys": {
            "tenants": {"a": good, "b": {**good, "control_token": "u" * 16}}
        },
        "b.control_token: …tttt is also in a's control_token": {
            "tenants": {"a": good, "b": {**good, "api_keys": ["k2"]}}
        },
        "rate_limit": {"tenants": {"a": {**good, "rate_limit": "often"}}},
        "one field, tenants": {"teams": {"a": good}},
    }
    for said, raw in refusals.items():
        with pytest.raises(ScenarioError, match=said):
            parse_tenants(raw)
    with pytest.raises(ScenarioError, match=r"… is also in the operator's api_keys") as shared:
        parse_tenants({"tenants": {"a": {**good, "api_keys": ["key-1"]}}}, ("key-1",))
    assert "ey-1" not in str(shared.value)  # a short key: not one character of it
    with pytest.raises(ScenarioError, match=r"…0001 is also in the operator's api_keys"):
        parse_tenants({"tenants": {"a": {**good, "api_keys": [OPERATOR_KEY]}}}, (OPERATOR_KEY,))
    path = tmp_path / "t.yaml"
    path.write_text("tenants:\n  a: {control_token: x\n")
    with pytest.raises(ScenarioError, match=rf"^{path}:2:"):
        load_tenants(path)
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ScenarioError, match="nested too deep"):
        load_tenants(deep)
    with pytest.raises(ScenarioError, match="not a regular file"):
        load_tenants(tmp_path)


def test_a_key_in_the_wrong_place_of_the_tenants_file_is_not_echoed() -> None:
    """A key pasted as a field's name, as a tenant's name or as a rate limit: the problem (in
    the log, in the operator's health) shows at most its last 4 characters."""
    pasted = "QzKey-0123456789-abcXYZ"
    good = {"control_token": "t" * 16, "api_keys": ["k1"]}
    misplaced = {
        "a field's name": {"tenants": {"a": {**good, pasted: ["k2"]}}},
        "a tenant's name": {"tenants": {pasted: good}},
        "a rate limit": {"tenants": {"a": {**good, "rate_limit": pasted}}},
    }
    for where, raw in misplaced.items():
        with pytest.raises(ScenarioError) as refused:
            parse_tenants(raw)
        problem = str(refused.value)
        assert not KeyFinder.of([pasted.encode()]).finds(problem), (where, problem)
        assert mask(pasted) in problem, (where, problem)
    shown = {"tenants": {"a": {**good, "colour": "red"}}}
    with pytest.raises(ScenarioError, match="the fields colour;"):  # too plain to be a key
        parse_tenants(shown)
    with pytest.raises(ScenarioError, match="rate limit 'often' is not"):  # too short
        parse_tenants({"tenants": {"a": {**good, "rate_limit": "often"}}})


def test_a_key_or_a_token_is_one_tenants_in_one_role() -> None:
    """A key that is a token too, another tenant's or the operator's, would give whoever holds
    the key control of that tenant (or of all); a name holding 8 characters of a key or token in
    a row would show it in metrics, the banner and the access log."""
    key, token, operator_token = (
        "pQ7-ci-2026-a8f3c9d1e7",
        "pQ7-tok-0123456789",
        "Xw9-tok-9876543210",
    )
    pay = {"control_token": token, "api_keys": [key]}
    operator = (("xw9-key-0001-mnop", "verdict-mock-local-key"), Secret(operator_token))
    public = "verdict-mock-local-key"  # the default key: the banner prints it, a name may hold it
    risk = {"control_token": "risk-token-0123456789", "api_keys": ["o"]}
    team = {"control_token": "r" * 16, "api_keys": ["v1"]}
    accepted = {"pay": pay, "risk": risk, "verdict-mock-team": team}
    assert list(parse_tenants({"tenants": accepted}, *operator, public)) == list(accepted)
    refused = {
        "another's key as a token": {"pay": pay, "risk": {**pay, "control_token": key}},
        "another's token as a key": {"pay": pay, "risk": {**pay, "api_keys": [token]}},
        "its own key as its token": {"pay": {"control_token": key, "api_keys": [key]}},
        "the operator's token as a key": {"pay": {**pay, "api_keys": [operator_token]}},
        "a name holding its key": {"pq7-ci-2026": {**pay, "api_keys": ["pq7-ci-2026-a8f3c9"]}},
        "a name holding its token": {
            "pq7-tok-0123": {**pay, "control_token": "pq7-tok-0123456789"}
        },
        "a name holding the operator's key": {"xw9-key-0001": pay},
    }
    secrets = [key, token, operator_token, "pq7-ci-2026-a8f3c9", "pq7-tok-0123456789"]
    secrets.append("xw9-key-0001-mnop")
    for why, tenants in refused.items():
        with pytest.raises(ScenarioError) as refusal:
            parse_tenants({"tenants": tenants}, *operator, public)
        problem = str(refusal.value)
        assert "belongs to one tenant" in problem or "holds 8 characters" in problem, why
        assert not KeyFinder.of(s.encode() for s in secrets).finds(problem), (why, problem)


def test_a_tenant_refused_is_named_masked_at_its_line(tmp_path: Path) -> None:
    """A key written where a tenant's name goes (a level too far out) is not echoed by the
    problem its entry has; the line says where it is."""
    path = tmp_path / "tenants.yaml"
    path.write_text("tenants:\n  pay:\n    control_token: short\n    api_keys: [k]\n"
                    "  pay-ci-2026-a8f3c9d1e7:\n    control_token: short\n")  # fmt: skip
    with pytest.raises(ScenarioError, match=rf"^{path}:3:5: tenants.pay.control_token: "):
        load_tenants(path)
    path.write_text("tenants:\n  pay-ci-2026-a8f3c9d1e7:\n    control_token: short\n")
    with pytest.raises(ScenarioError, match=rf"^{path}:3:5: tenants.…d1e7.control_token: "):
        load_tenants(path)


def test_the_documented_tenants_file_is_one_the_mock_takes(tmp_path: Path) -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "servers.md").read_text()
    section = page[page.index("## Tenants: teams on one mock") :]
    example = section[section.index("```yaml\n") + 8 : section.index("```\n", 10)]
    path = tmp_path / "tenants.yaml"
    path.write_text(example)
    tenants = load_tenants(path)
    assert sorted(tenants) == ["payments", "risk"]
    assert str(tenants["risk"].rate_limit) == "600/60"


def test_tenants_need_the_operators_token_and_refuse_a_proxy(tenants_file: Path) -> None:
    with pytest.raises(SettingsError, match="control"):
        Settings(tenants=tenants_file)
    with pytest.raises(SettingsError, match="--proxy-to"):
        create_app(
            Settings(
                tenants=tenants_file,
                control_token=Secret(OPERATOR_TOKEN),
                proxy_to="http://127.0.0.1:9",
            )
        )
    shared = {"tenants": {"a": {"control_token": OPERATOR_TOKEN, "api_keys": ["k1"]}}}
    tenants_file.write_text(json.dumps(shared))
    with pytest.raises(
        ScenarioError, match=r"a.control_token: …\S{4} is also in the operator's control"
    ):
        create_app(Settings(tenants=tenants_file, control_token=Secret(OPERATOR_TOKEN)))


def test_without_tenants_the_mock_is_one_tenant() -> None:
    app = create_app(Settings(control_token=Secret(OPERATOR_TOKEN)))
    with BackgroundServer(app) as server, httpx.Client(base_url=server.base_url) as client:
        listed = client.get("/_mock/tenants", headers={"X-Mock-Token": OPERATOR_TOKEN})
        assert [t["name"] for t in listed.json()] == ["default"]
        scraped = client.get("/_mock/metrics").text
        assert "tenant=" not in scraped  # no label: the series are as they were


def test_a_scenario_reload_keeps_whose_each_key_is(tenants_file: Path) -> None:
    settings = Settings(
        api_keys=(OPERATOR_KEY,), control_token=Secret(OPERATOR_TOKEN), tenants=tenants_file
    )
    state = state_of(create_app(settings))
    state.apply(parse_scenario({"api_keys": ["operator-key-0002"]}, 0.0))
    assert state.key_finder.finds("operator-key-0002")  # masked in logs as the operator's key now
    assert state.tenant_of(f"Bearer {key('pay')}").tenant_name == "pay"  # its own keys kept
    assert state.tenants["pay"].key_bytes == (key("pay").encode(),)


def test_the_tenants_file_is_reloaded_when_it_changes(tenants_file: Path) -> None:
    settings = Settings(api_keys=(OPERATOR_KEY,), control_token=Secret(OPERATOR_TOKEN))
    app = create_app(replace(settings, tenants=tenants_file))
    state = state_of(app)
    with running(app) as server:
        teams = Teams(server.base_url)
        watchers = watch_files(state)
        try:
            teams.explain("pay", "demo-refused")
            grown = json.loads(json.dumps(TENANTS))
            grown["tenants"]["ops"] = {"control_token": "ops-token-0123456789ab", "api_keys": ["o"]}
            grown["tenants"]["pay"]["rate_limit"] = "1/60"
            tenants_file.write_text(json.dumps(grown))
            assert wait_until(lambda: "ops" in state.tenants)
            ops = {"X-Mock-Token": "ops-token-0123456789ab"}
            assert httpx.get(f"{server.base_url}/_mock/requests", headers=ops).json() == []
            assert [e["n"] for e in teams.journal("pay")] == ["demo-refused"]  # pay's kept
            assert teams.explain("pay", "demo-refused").status_code == 429  # its new 1/60
            tenants_file.write_text('{"tenants": {"default": {}}}')  # refused: the last stays
            health = teams.control("operator", "GET", "health")
            assert wait_until(
                lambda: teams.control("operator", "GET", "health").json()["tenants_problem"]
            )
            problem = teams.control("operator", "GET", "health").json()["tenants_problem"]
            assert "tenant name 'default'" in problem
            assert "tenants_problem" not in teams.control("pay", "GET", "health").json()
            assert "ops" in state.tenants
            assert health.status_code == 200
        finally:
            for watcher in watchers:
                watcher.stop()
            teams.close()


@pytest.mark.parametrize("store", ["memory", "redis"])
def test_a_name_given_to_another_team_starts_afresh(
    store: str, tenants_file: Path, request: pytest.FixtureRequest
) -> None:
    """A tenant's state is of its name and its token: the name removed, then given to another
    team (its own token and key), holds none of the first team's journal or sessions, in this
    process or in Redis; a tenant kept with its token keeps its own (the reload test above)."""
    settings = Settings(api_keys=(OPERATOR_KEY,), control_token=Secret(OPERATOR_TOKEN))
    if store == "redis":
        server = request.getfixturevalue("redis_url")
        settings = replace(settings, state=StateURL.parse(server), secret="tenant-reuse")
    app = create_app(replace(settings, tenants=tenants_file))
    state = state_of(app)
    with running(app) as server:
        teams = Teams(server.base_url)
        try:
            minted = teams.mint("risk")
            assert teams.explain("risk", minted).status_code == 200
            others = json.loads(json.dumps(TENANTS))
            del others["tenants"]["risk"]
            state.load_tenants(parse_tenants(others, (OPERATOR_KEY,), Secret(OPERATOR_TOKEN)))
            new: dict[str, Any] = {"control_token": "new-risk-token-0123456", "api_keys": ["k"]}
            others["tenants"]["risk"] = new
            state.load_tenants(parse_tenants(others, (OPERATOR_KEY,), Secret(OPERATOR_TOKEN)))
            as_new = {"X-Mock-Token": new["control_token"]}
            journal = httpx.get(f"{server.base_url}/_mock/requests", headers=as_new)
            assert journal.json() == []
            again = teams.explain("risk", minted, as_key="k")
            assert again.status_code == 404  # signed for the first team's risk
            assert teams.control("risk", "GET", "requests").status_code == 401  # its old token
        finally:
            teams.close()


def test_a_key_or_token_gone_from_the_file_stays_masked(
    tenants_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A stale client may still send a removed tenant's key or token (another process sharing
    the state may not have reloaded yet): the journal and the access log mask it still."""
    gone = ("Qz-retired-token-98765", "Zx-retired-key-4321")  # no 8 characters of another's
    both = json.loads(json.dumps(TENANTS))
    both["tenants"]["risk"] = {"control_token": gone[0], "api_keys": [gone[1]]}
    tenants_file.write_text(json.dumps(both))
    settings = Settings(api_keys=(OPERATOR_KEY,), control_token=Secret(OPERATOR_TOKEN))
    app = create_app(replace(settings, tenants=tenants_file, access_log=True))
    with running(app) as server, caplog.at_level(logging.INFO):
        del both["tenants"]["risk"]
        state_of(app).load_tenants(parse_tenants(both, (OPERATOR_KEY,), Secret(OPERATOR_TOKEN)))
        for secret in gone:  # sent where the mock would show it: as the session id
            sent = httpx.get(f"{server.base_url}/e", params={"n": secret}, headers=_bearer("x"))
            assert sent.status_code == 401
        operator = {"X-Mock-Token": OPERATOR_TOKEN}
        journal = httpx.get(f"{server.base_url}/_mock/requests", headers=operator).json()
    assert len(journal) == 2
    logged = [r.getMessage() for r in caplog.records if r.name.startswith("mockserver")]
    assert any("GET /e?n=" in line for line in logged)  # the access log was on
    shown = json.dumps(journal) + "\n".join(logged)  # (httpx logs the test's own URLs)
    assert not KeyFinder.of(secret.encode() for secret in gone).finds(shown), shown


def test_past_1000_removed_secrets_the_oldest_are_unmasked_and_said(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The bound on what stays masked keeps the newest, in the file's order, and says so."""
    many = {
        f"t{i}": {
            "control_token": f"tok-{i}-{'q' * 20}",
            "api_keys": [f"key-{i}-{k:04d}-{'z' * 12}" for k in range(339)],
        }
        for i in range(3)
    }
    path = tmp_path / "tenants.json"
    path.write_text(json.dumps({"tenants": many}))
    settings = Settings(api_keys=(OPERATOR_KEY,), control_token=Secret(OPERATOR_TOKEN))
    state = state_of(create_app(replace(settings, tenants=path)))
    with caplog.at_level(logging.WARNING, logger="mockserver.state"):
        state.load_tenants({})  # 1,020 keys and tokens removed at once
    assert [r.getMessage() for r in caplog.records] == [
        "20 keys or tokens of tenants removed long ago unmasked"
    ]
    assert len(state.retired) == 1000
    assert many["t2"]["control_token"] in state.retired  # the last ones: kept
    assert many["t0"]["api_keys"][0] not in state.retired  # the first 20: dropped, said


def test_the_banner_names_the_tenants(tenants_file: Path) -> None:
    settings = Settings(control_token=Secret(OPERATOR_TOKEN), tenants=tenants_file)
    state = state_of(create_app(settings))
    text = banner(settings, "http://127.0.0.1:8080", state.api_keys, (), tuple(state.tenants))
    assert "  tenants:  pay, risk, each with its own keys and control token" in text
    assert token("pay") not in text
    assert key("pay") not in text
    assert "tenants:" not in banner(Settings(), "http://127.0.0.1:8080", state.api_keys)


def test_a_tenants_repr_shows_no_key(tenants_file: Path) -> None:
    (tenant,) = [t for t in load_tenants(tenants_file).values() if t.name == "pay"]
    shown = f"{tenant!r} {tenant} {[tenant]}"
    assert "pay-key" not in shown
    assert token("pay")[:8] not in shown
    assert "…0001" in shown


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    with redis_server() as server:
        yield server.url
