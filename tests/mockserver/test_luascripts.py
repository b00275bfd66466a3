"""The shared state's KEYS and ARGV, and its journal entries, go through Redis field by field.

Each field is set to a value of its own and read back by name on the other side: a slot read
in the wrong place (a key for another, an argument one off) fails the field's test.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

import pytest
import redis

from tests.mockserver.entries import ENTRY, EXPECTED
from tests.redisserver import redis_server
from verdict_contract.mockserver.store.backend import StateURL
from verdict_contract.mockserver.store.journal import decode_entry
from verdict_contract.mockserver.store.luascripts import (
    AppendArgs,
    BatchArgs,
    DecideArgs,
    DecideKeys,
    JournalKeys,
    KindArgs,
    LoadArgs,
    LoadKeys,
    flat,
    for_each_request,
    preamble,
)
from verdict_contract.mockserver.store.redisstate import RedisBackend

PAIRS: list[tuple[type[Any], type[Any]]] = [
    (DecideKeys, BatchArgs),
    (JournalKeys, AppendArgs),
    (LoadKeys, LoadArgs),
]
FIELDS = [
    pytest.param(keys, args, kind, name, id=f"{args.__name__}.{kind}.{name}")
    for keys, args in PAIRS
    for kind, fields in (("key", keys._fields), ("arg", args._fields))
    for name in fields
]


@pytest.fixture(scope="module")
def client() -> Iterator[redis.Redis]:
    with redis_server() as server:
        made = redis.Redis.from_url(server.url, decode_responses=True)
        yield made
        made.close()


def _echo(keys: type[NamedTuple], args: type[NamedTuple]) -> str:
    """The script's own preamble, then every local it read, in the fields' order."""
    names = [f"{name}_key" for name in keys._fields] + list(args._fields)
    return preamble(keys, args) + "return {" + ", ".join(names) + "}"


@pytest.mark.parametrize(("keys", "args", "kind", "name"), FIELDS)
def test_each_key_and_argument_reaches_the_script_under_its_name(
    client: redis.Redis, keys: type[Any], args: type[Any], kind: str, name: str
) -> None:
    prefix = "{t}:"  # one slot, as the mock's keys
    key_values = {field: f"{prefix}k-{field}" for field in keys._fields}
    arg_values = {field: "" for field in args._fields}
    marked = f"<{name}>"
    if kind == "key":
        key_values[name] = prefix + marked
    else:
        arg_values[name] = marked
    keys_list, argv = flat(keys(**key_values), args(**arg_values))
    echoed = client.eval(_echo(keys, args), len(keys_list), *keys_list, *argv)
    seen = dict(zip([f"{f}_key" for f in keys._fields] + list(args._fields), echoed, strict=True))
    where = f"{name}_key" if kind == "key" else name
    assert [local for local, value in seen.items() if marked in value] == [where]


REQUEST_FIELDS = [("kind", name) for name in KindArgs._fields] + [
    ("request", name) for name in DecideArgs._fields if name != "kind"
]


@pytest.mark.parametrize(("where", "name"), REQUEST_FIELDS)
def test_each_request_and_kind_argument_reaches_the_script_under_its_name(
    client: redis.Redis, where: str, name: str
) -> None:
    """A batch: the shared arguments, a group per kind of request, a group per request naming
    its kind; each field is read from its own group (one slot off, a group read twice, or a
    request given another's kind, fails)."""
    keys = DecideKeys(*(f"{{t}}:k-{field}" for field in DecideKeys._fields))
    shared = BatchArgs(*(f"<shared {field}>" for field in BatchArgs._fields))._replace(
        kinds_count="2"
    )
    blank_kind = KindArgs(*("" for _ in KindArgs._fields))
    kinds = [blank_kind, blank_kind]
    requests = [DecideArgs("", "2"), DecideArgs("", "1"), DecideArgs("", "2")]
    if where == "kind":
        kinds = [blank_kind._replace(**{name: f"<kind {i}>"}) for i in (1, 2)]
        expected = ["<kind 2>", "<kind 1>", "<kind 2>"]
    else:
        requests = [r._replace(**{name: f"<request {i}>"}) for i, r in enumerate(requests)]
        expected = ["<request 0>", "<request 1>", "<request 2>"]
    fields = [field for field in (*KindArgs._fields, *DecideArgs._fields) if field != "kind"]
    echo = preamble(DecideKeys, BatchArgs) + "local seen = {}\n"
    echo += for_each_request(f"seen[#seen + 1] = {{{', '.join(fields)}}}\n")
    echo += "return seen"
    argv = [*shared, *(v for kind in kinds for v in kind), *(v for r in requests for v in r)]
    echoed = client.eval(echo, len(keys), *keys, *argv)
    assert len(echoed) == len(requests)
    for seen, marked in zip(echoed, expected, strict=True):
        named = dict(zip(fields, seen, strict=True))
        assert [field for field, value in named.items() if value] == [name]
        assert named[name] == marked


SHARED_FIELDS = [name for name in EXPECTED if name != "violations"]


@pytest.fixture(scope="module")
def backend() -> Iterator[RedisBackend]:
    with redis_server() as server:
        made = RedisBackend(StateURL.parse(server.url), "round-trip", 10)
        yield made
        made.close()


@pytest.mark.parametrize("name", SHARED_FIELDS)
def test_each_entry_field_comes_back_from_redis_in_its_place(
    backend: RedisBackend, name: str
) -> None:
    backend.clear_journal()
    backend.record(ENTRY)
    (entry,) = backend.entries()
    assert getattr(entry, name) == EXPECTED[name]
    stored = backend.sync.lindex(backend.keys.journal, 0)
    assert isinstance(stored, str)
    assert decode_entry(stored) == entry


def test_an_entry_from_the_ring_reads_back_as_untrusted(backend: RedisBackend) -> None:
    backend.clear_journal()
    backend.record(ENTRY._replace(time=1.0, untrusted=True))
    backend.record(ENTRY._replace(time=2.0))
    assert [entry.untrusted for entry in backend.entries()] == [True, False]
