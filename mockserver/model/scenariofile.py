"""Reading a scenario file without trusting it: bounded before anything is built from it.

A scenario comes from a path anyone may point at a FIFO, a device or a folder, and a small YAML
file can name a huge value through aliases (a "billion laughs": nine levels of nine aliases are
387 million strings in 500 bytes). So only a regular file is read, at most
:data:`MAX_SCENARIO_BYTES` of it, and its YAML is refused as it is composed once its aliases
would expand it past twice its length (at least :data:`MIN_EXPANDED`) or it nests past
:data:`MAX_DEPTH`: before any Python value, schema check or message is made of it.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Final, TypeVar, cast

import yaml
from yaml.composer import ComposerError
from yaml.error import Mark
from yaml.events import AliasEvent, NodeEvent, ScalarEvent

from verdict_contract.core.errors import ScenarioError

MAX_SCENARIO_BYTES: Final = 16 * 1024 * 1024  # the largest file read (docs/servers.md, bounds)
MIN_EXPANDED: Final = 1024 * 1024  # what aliases may expand any YAML file to: nodes and characters
MAX_DEPTH: Final = 64  # the deepest nesting of lists and mappings (a scenario needs a handful)

# What a file that is not regular is, by its type letter in ``ls -l``.
_KINDS = {"d": "a directory", "p": "a FIFO", "c": "a device", "b": "a device", "s": "a socket"}


def _check_regular(mode: int) -> None:
    if not stat.S_ISREG(mode):
        kind = _KINDS.get(stat.filemode(mode)[0], "not a file")
        raise ScenarioError(f"not a regular file ({kind}); a scenario is a YAML or JSON file")


def read_text(path: Path) -> str:
    """The text of ``path``: a regular file of at most :data:`MAX_SCENARIO_BYTES`, as UTF-8;
    checked again once opened (the path may have been swapped), opened non-blocking (so a FIFO
    swapped in never waits for a writer)."""
    limit = MAX_SCENARIO_BYTES
    try:
        _check_regular(os.stat(path).st_mode)
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
        with os.fdopen(os.open(path, flags), "rb") as file:
            _check_regular(os.fstat(file.fileno()).st_mode)
            data = file.read(limit + 1)
    except OSError as exc:
        raise ScenarioError(f"cannot read: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise ScenarioError(f"larger than {limit} bytes, the most a scenario file may hold")
    return data.decode("utf-8")


class _BoundedLoader(yaml.SafeLoader):
    """A SafeLoader that counts what the document expands to while composing it: a node 1, a
    scalar its characters too, an alias all its anchor holds (as a reader of the value walks it)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._expanded = 0
        # Twice the file's length: a file without aliases never reaches it (a node or a scalar's
        # character takes one of the file's at least), so it refuses only what aliases multiply.
        self._limit = max(MIN_EXPANDED, 2 * len(stream))
        self._depth = 0
        self._sizes: dict[str, int] = {}  # an anchor's expanded size, once it is composed

    def _count(self, weight: int, event: yaml.Event) -> None:
        self._expanded += weight
        if self._expanded > self._limit:
            raise _refusal(
                f"the document expands to more than {self._limit} nodes and characters through "
                "its aliases (*name); write the values out, or use fewer aliases",
                event,
            )

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        event: yaml.Event = self.peek_event()  # type: ignore[no-untyped-call]
        if isinstance(event, AliasEvent):
            anchor = str(event.anchor)
            if anchor in self.anchors and anchor not in self._sizes:
                raise _refusal(
                    f"the alias *{anchor} is inside its own anchor: it holds itself", event
                )
            self._count(self._sizes.get(anchor, 0), event)
            return super().compose_node(parent, index)
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise _refusal(f"nested more than {MAX_DEPTH} deep", event)
        before = self._expanded
        self._count(1 + (len(event.value) if isinstance(event, ScalarEvent) else 0), event)
        node = super().compose_node(parent, index)
        self._depth -= 1
        if isinstance(event, NodeEvent) and event.anchor is not None:
            self._sizes[str(event.anchor)] = self._expanded - before
        return node


def _refusal(problem: str, event: yaml.Event) -> ComposerError:
    """A refusal of the document, placed as PyYAML places its own errors."""
    return ComposerError(None, None, problem, cast(Mark | None, event.start_mark))


def decode(path: Path, text: str) -> object:
    """The data of a scenario's text: JSON by the file's suffix, else bounded YAML."""
    if path.suffix == ".json":
        return json.loads(text)
    return yaml.load(text, Loader=_BoundedLoader)  # noqa: S506 (a SafeLoader)


Where = tuple[str | int, ...]
"""A path into a file's data: ``("sessions", "a", "script", 0)``."""


class ProblemAt(ScenarioError):
    """A problem with the value at ``where`` in the data, so its file can say which line."""

    def __init__(self, message: str, where: Where) -> None:
        super().__init__(message)
        self.where = where


def line_and_column(text: str, where: Where) -> tuple[int, int] | None:
    """Where the value at ``where`` starts in YAML (or JSON) ``text``, 1-based (the nearest
    enclosing value when the path goes further than the file: a missing key), or None."""
    try:
        node = yaml.compose(text, Loader=_BoundedLoader)
    except yaml.YAMLError:
        return None
    if node is None:
        return None
    for part in where:
        children: list[yaml.Node] = []
        if isinstance(node, yaml.MappingNode):
            children = [v for k, v in node.value if str(k.value) == str(part)]
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
            children = node.value[part : part + 1]
        if not children:
            break
        node = children[0]
    return node.start_mark.line + 1, node.start_mark.column + 1


Parsed = TypeVar("Parsed")


def load(path: Path, parse: Callable[[object], Parsed]) -> Parsed:
    """What ``parse`` makes of the file's data (YAML, or JSON by its suffix). A problem is one
    line, ``FILE:LINE:COLUMN: what`` when the place is known (as compilers say it, for editors)."""
    text = ""
    try:
        text = read_text(path)
        return parse(decode(path, text))
    except (yaml.YAMLError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise syntax_error(path, exc) from None
    except RecursionError:  # JSON nested deeper than Python's parser or the schema check goes
        raise ScenarioError(f"{path}: nested too deep") from None
    except ProblemAt as exc:
        place = line_and_column(text, exc.where)
        where = f"{path}:{place[0]}:{place[1]}" if place else str(path)
        raise ScenarioError(f"{where}: {exc}") from None
    except ScenarioError as exc:
        raise ScenarioError(f"{path}: {exc}") from None
    except (TypeError, ValueError, KeyError) as exc:  # YAML's, not JSON's (!!int key, a date)
        raise ScenarioError(f"{path}: unsupported value: {_TOKEN.sub('…', str(exc))}") from None


_TOKEN: Final = re.compile(r"'[^'\s]{8,}'|\"[^\"\s]{8,}\"|[*&!][^\s'\"]{7,}")
"""What a parser quotes or names of a token (*tok, !tok, &tok) of 8 characters: maybe a key."""


def syntax_error(path: Path, exc: Exception) -> ScenarioError:
    """A file that does not parse, with its line and column when the parser knows them: of
    PyYAML's two, where the construct began (an unclosed ``{``) first, then where it gave up."""
    kind = "JSON" if path.suffix == ".json" else "YAML"
    if isinstance(exc, json.JSONDecodeError):
        return ScenarioError(f"{path}:{exc.lineno}:{exc.colno}: not valid JSON: {exc.msg}")
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        problem, context = exc.problem_mark, exc.context_mark  # 0-based, both
        text = str(exc.problem)
        first = problem
        if exc.context and context is not None:
            if (context.line, context.column) < (problem.line, problem.column):
                first = context
                text = (
                    f"{exc.context} (from here): {text} at {problem.line + 1}:{problem.column + 1}"
                )
            else:
                text = f"{exc.context}: {text}"
        text = _TOKEN.sub("…", text)
        return ScenarioError(
            f"{path}:{first.line + 1}:{first.column + 1}: not valid {kind}: {text}"
        )
    first_line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return ScenarioError(f"{path}: not valid {kind}: {first_line}")
