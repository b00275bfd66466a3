"""A shared state's credentials never leave the mock: probes, health, answers, logs, journal.

A real ``redis-server`` asks for a password; the mock is given it in each form redis-py takes
(``user:pw@``, ``?password=``, ``?ssl_password=`` beside it), and everything anyone who can reach
the mock reads is searched for it: ``readyz`` and ``health`` from a foreign ``Host``, ``/e``'s
503 once Redis is gone, and the log lines of the outage.
"""

from __future__ import annotations

import logging
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from tests.helpers import running
from tests.redisserver import redis_server
from verdict_contract.mockserver import Settings, create_app
from verdict_contract.mockserver.store.backend import StateURL, secrets_of

PASSWORD = "s3cretpw-9f8e7d6c"
FOREIGN = {"Host": "attacker.example"}


def _fragments(secret: str) -> list[str]:
    """Every run of 8 characters of ``secret``: none may show anywhere."""
    return [secret[i : i + 8] for i in range(len(secret) - 7)]


@pytest.mark.parametrize(
    "form",
    [
        "redis://127.0.0.1:{port}/0?password={pw}",
        "redis://default:{pw}@127.0.0.1:{port}/0",
        "unix://{sock}?db=0&password={pw}",
    ],
    ids=["query", "userinfo", "unix socket"],
)
def test_no_answer_probe_or_log_line_shows_the_redis_password(
    form: str, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    sock = tmp_path / "redis.sock"
    options = ("--requirepass", PASSWORD, "--unixsocket", str(sock), "--unixsocketperm", "700")
    with redis_server(*options, password=PASSWORD) as redis:
        url = StateURL.parse(form.format(port=redis.port, pw=PASSWORD, sock=sock))
        place = (
            f"unix://{sock}?db=0" if url.startswith("unix") else f"redis://127.0.0.1:{redis.port}/0"
        )
        settings = Settings(
            port=0, state=url, secret="credentials-test", api_keys=("k" * 24,), access_log=True
        )
        keyed = {"Authorization": f"Bearer {settings.api_keys[0]}"}
        shown: list[str] = [repr(settings), str(settings.state.label)]
        with (
            caplog.at_level(logging.INFO),
            running(create_app(settings), server="async") as server,
            httpx.Client(base_url=server.base_url, timeout=10) as http,
        ):
            ready = http.get("/_mock/readyz", headers=FOREIGN)
            assert ready.status_code == 200
            assert ready.json()["state"] == place
            shown += [ready.text, http.get("/_mock/health").text]
            for sent in (PASSWORD, f"x{PASSWORD[3:11]}y"):  # a client sends it, or a part
                assert http.get("/e", params={"n": sent}, headers=keyed).status_code == 404
                assert http.get(f"/nowhere/{sent}", headers=keyed).status_code == 404
            shown.append(http.get("/_mock/requests").text)
            redis.stop()
            keyless = http.get("/e", params={"n": "x"})  # as anyone can send it: the store
            assert keyless.status_code == 401  # is not asked, its URL not shown
            shown.append(keyless.text)
            down = http.get("/e", params={"n": "x"}, headers=keyed)
            assert down.status_code == 503
            not_ready = http.get("/_mock/readyz", headers=FOREIGN)
            assert not_ready.status_code == 503
            shown += [down.text, not_ready.text, http.get("/_mock/health").text]
        mocks = (r for r in caplog.records if not r.name.startswith("httpx"))  # not the test's
        shown += [record.getMessage() + repr(record.__dict__) for record in mocks]
    assert any("state store down" in text for text in shown)  # the outage was logged
    everything = "\n".join(shown)
    for fragment in _fragments(PASSWORD):
        assert fragment not in everything


def test_a_label_keeps_the_place_and_drops_every_credential() -> None:
    """Scheme, hosts, ports, path and db: what an operator needs to tell stores apart."""
    cases = {
        "redis://127.0.0.1:16379/0?password=s3cretpw": "redis://127.0.0.1:16379/0",
        "rediss://cache:6380/2?ssl_password=pem-pass&ssl_cert_reqs=none": "rediss://cache:6380/2",
        "unix:///run/redis.sock?db=3&password=abcdefgh": "unix:///run/redis.sock?db=3",
        "redis+sentinel://:sentpass@a:26379,b:26379/primary/1": (
            "redis+sentinel://a:26379,b:26379/primary/1"
        ),
        "redis+cluster://user:pw@node:7000": "redis+cluster://node:7000",
    }
    for raw, label in cases.items():
        url = StateURL.parse(raw)
        assert url.label == label
        assert repr(url) == repr(label)
        assert label in repr(Settings(state=url, secret="x"))
    assert sorted(secrets_of("redis://u:p4ss@h:1/0?password=q&auth_token=t&db=2")) == [
        "p4ss",
        "q",
        "t",
    ]


def test_a_url_refused_at_start_is_quoted_without_its_credentials() -> None:
    with pytest.raises(ValueError, match="not a state URL") as refused:
        StateURL.parse("http://user:hunter2hunter2@cache.internal/?password=hunter2hunter2")
    assert "hunter2" not in str(refused.value)


@pytest.mark.parametrize(
    "raw",
    [
        "redis://:Zq9/Pw0rdSecretXYZ@127.0.0.1:6391/0",
        "redis://:1234/Pw0rdSecretXYZ@127.0.0.1/0",
        "redis+sentinel://:Secret_pw?Pw0rdSecretXYZ@127.0.0.1:26392/mymaster",
        "redis+cluster://:Secret_pw#Pw0rdSecretXYZ@127.0.0.1:7000",
        "rediss://Secret_user?Pw0rdSecretXYZ:pw@127.0.0.1:6380/0",
        "redis+sentinel://:Sup3r?a=Pw0rdSecretXYZ@127.0.0.1:26392/mymaster",
        "redis://user:Sup3r?x=Pw0rdSecretXYZ@127.0.0.1:6379/0",
    ],
)
def test_a_user_or_password_holding_a_url_delimiter_is_refused_without_showing_it(raw: str) -> None:
    """A generated password often holds a "/", "?" or "#", each of which ends a URL's host."""
    with pytest.raises(ValueError) as refused:
        StateURL.parse(raw)
    scheme = raw.partition("://")[0]
    assert str(refused.value) == (
        f"'{scheme}://…': the user or password holds a '/', '?' or '#'; write them as %2F, "
        "%3F and %23"
    )
    userinfo, _, place = raw.partition("://")[2].rpartition("@")
    encoded = StateURL.parse(f"{scheme}://{quote(userinfo, safe=':')}@{place}")
    assert "Pw0rd" not in encoded.label


def test_an_at_sign_in_a_query_value_is_a_password_not_a_host() -> None:
    url = StateURL.parse("redis://127.0.0.1:6379/0?password=p@ssw0rd-123")
    assert url.label == "redis://127.0.0.1:6379/0"


def test_a_shared_state_on_the_default_secret_is_warned_with_the_line_to_fix_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The default secret is derived from the seed: ids forgeable, keys predictable, and any
    other mock on defaults joins the state. One warning, with the command that fixes it."""
    with redis_server() as redis:
        url = StateURL.parse(redis.url)
        with caplog.at_level(logging.WARNING, logger="mockserver.state"):
            create_app(Settings(port=0, state=url))
        (warned,) = [r.getMessage() for r in caplog.records if "signing secret" in r.getMessage()]
        assert "VERDICT_MOCK_SECRET=$(python3 -c 'import secrets;" in warned
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="mockserver.state"):
            create_app(Settings(port=0, state=url, secret="one-of-our-own"))
        assert not [r for r in caplog.records if "signing secret" in r.getMessage()]


def test_a_wrong_path_or_method_keeps_its_answer_while_the_store_is_down() -> None:
    """The journal of a request the API does not take is best effort: a 404 stays a 404 and a
    405 a 405 (not a 500 turned into a 400), a keyless ``/e`` a 401, while ``/e`` with a key
    says 503."""
    with redis_server() as redis:
        settings = Settings(port=0, state=StateURL.parse(redis.url), secret="down")
        with (
            running(create_app(settings), server="async") as server,
            httpx.Client(base_url=server.base_url, timeout=10) as http,
        ):
            redis.stop()
            assert http.get("/nope").status_code == 404
            assert http.get("/").status_code == 404
            assert http.post("/e").status_code == 405
            assert http.get("/e", params={"n": "x"}).status_code == 401
            keyed = {"Authorization": f"Bearer {settings.api_keys[0]}"}
            assert http.get("/e", params={"n": "x"}, headers=keyed).status_code == 503
