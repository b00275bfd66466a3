"""Before any check: does the target answer like the Explain API, and does it take the key?

Two configuration mistakes look like breaches to the checks and are not: a key the target
refuses (every call answers 401, so each check of an answer fails) and a URL that is not the
Explain API at all (a web page answering 200 everywhere, a host with no ``/e``). Each is said
in one line before any check runs. Two calls to a made-up session id answer it, one with the
key and one without (so no fresh session is spent, and one call counts against the key's limit).
"""

from __future__ import annotations

import json
import uuid

import httpx

from verdict_contract.core.rates import RateLimit
from verdict_contract.core.redact import escaped
from verdict_contract.core.spec import ENDPOINT_PATH, SESSION_PARAM

from .transport import MAX_ANSWER_BYTES, CallFailed, Deadline, bounded_client, fetch

KEY_REFUSED = "the target refused the API key (401 on every call): check VERDICT_API_KEY"
NOT_THE_API = "the target does not answer like the Explain API"


def _is_json(response: httpx.Response) -> bool:
    try:
        json.loads(response.content)
    except (ValueError, UnicodeDecodeError):
        return False
    return True


def _kind(response: httpx.Response) -> str:
    media = response.headers.get("content-type", "").partition(";")[0].strip() or "no type"
    return f"{response.status_code} ({escaped(media[:60])})"  # the target's words


def mistake(
    base_url: str,
    key: str,
    session_ids: tuple[str, ...],
    timeout: float,
    ca_bundle: str | None,
    call_timeout: float,
) -> str | None:
    """The configuration mistake the target's answers show, in one line; None if none shows.

    - the key, with a made-up id, answers 401 (a valid key gets 404: auth comes first), and so
      does the first fresh session if one is given: the key is refused;
    - without a key, ``/e`` answers 2xx with a body that is not JSON: a web page, not the API;
    - with the key and without, ``/e`` answers 404, and so does a fresh session given with the
      key: nothing there checks a key, so no Explain API is at that URL.

    A call that fails or is throttled says nothing: the checks meet it and say so.
    """
    deadline = Deadline(call_timeout)
    made_up = f"verdict-contract-unknown-{uuid.uuid4().hex}"
    try:
        with bounded_client(base_url, timeout, ca_bundle, deadline) as http:

            def get(n: str, with_key: bool) -> httpx.Response:
                headers = {"Authorization": f"Bearer {key}"} if with_key else {}
                request = http.build_request(
                    "GET", ENDPOINT_PATH, params={SESSION_PARAM: n}, headers=headers
                )
                return fetch(http, request, deadline, MAX_ANSWER_BYTES)

            keyed = get(made_up, with_key=True)
            if keyed.status_code == 401:
                if all(get(n, with_key=True).status_code == 401 for n in session_ids[:1]):
                    return KEY_REFUSED
                return None
            page = keyed.is_success and not _is_json(keyed)
            if keyed.status_code != 404 and not page:
                return None
            anonymous = get(made_up, with_key=False)
            if anonymous.is_success and not _is_json(anonymous):
                return (
                    f"{NOT_THE_API}: GET /e answers {_kind(anonymous)} without an API key, where "
                    f"the Explain API answers 401 and JSON: is {base_url} the API's base URL?"
                )
            if keyed.status_code == anonymous.status_code == 404 and session_ids:
                fresh = get(session_ids[0], with_key=True)
                if fresh.status_code == 404:
                    return (
                        f"{NOT_THE_API}: GET /e answers 404 with the API key and without one, to "
                        "a fresh session too, where the Explain API answers 401 without a key: "
                        f"is {base_url} the API's base URL (the one that serves /e)?"
                    )
    except (httpx.HTTPError, CallFailed):
        return None
    return None


def probe_short_of_the_limit(
    base_url: str,
    probe: int,
    option: str,
    timeout: float,
    ca_bundle: str | None,
    call_timeout: float,
) -> str | None:
    """A verdict-mock target whose rate limit (its health answer's) lets more calls through than
    the ``probe`` sends (``option``, as the user gave it): it cannot meet the 429, and that is
    the option's mistake, not a breach. None if it can, or the health answer says nothing."""
    deadline = Deadline(call_timeout)
    try:
        with bounded_client(base_url, timeout, ca_bundle, deadline) as http:
            request = http.build_request("GET", "/_mock/health")
            stated = str(fetch(http, request, deadline, MAX_ANSWER_BYTES).json()["rate_limit"])
        limit = RateLimit.parse(stated)
    except (httpx.HTTPError, CallFailed, ValueError, KeyError, TypeError):
        return None
    if limit.budget and probe > limit.budget:
        return None
    more = f"more than {limit.budget}, or " if limit.budget else ""
    return (
        f"{option} cannot meet a 429 from this verdict-mock, whose rate limit is {stated}: "
        f"pass {more}start the mock with a smaller --rate-limit (such as 10/60)"
    )
