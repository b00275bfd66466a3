"""core/parsing.py: one reader per kind of typed value, shared by the mock and the suite."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from verdict_contract.core.parsing import (
    host_name,
    number,
    one_of,
    parse_bool,
    port,
    positive_int,
    seconds,
    whole_number,
)


@pytest.mark.parametrize(
    ("read", "raw", "value"),
    [
        (parse_bool, " On ", True),
        (parse_bool, "", False),
        (whole_number, "-3", -3),
        (number, "2.5", 2.5),
        (positive_int, "1", 1),
        (port, "0", 0),
        (port, "65535", 65535),
        (seconds, "0.5", 0.5),
        (one_of("async", "waitress"), " Waitress ", "waitress"),
        (host_name, "Mock.Example", "mock.example"),
    ],
)
def test_a_value_as_typed_is_read(read: Callable[[str], object], raw: str, value: object) -> None:
    assert read(raw) == value


@pytest.mark.parametrize(
    ("read", "raw", "said"),
    [
        (parse_bool, "maybe", "'maybe' is not a boolean"),
        (whole_number, "1.5", "'1.5' is not a whole number"),
        (number, "soon", "'soon' is not a number"),
        (positive_int, "0", "'0': must be at least 1"),
        (port, "65536", "'65536' is not a port"),
        (port, "http", "'http' is not a port"),
        (seconds, "0", "'0': must be a positive number of seconds"),
        (seconds, "inf", "'inf': must be a positive number of seconds"),
        (seconds, "nan", "'nan': must be a positive number of seconds"),
        (one_of("async", "waitress"), "uvicorn", "'uvicorn' is not one of async, waitress"),
        (host_name, "http://mock.example", "'http://mock.example' is not a host name"),
        (host_name, "user@mock.example", "'user@mock.example' is not a host name"),
    ],
)
def test_a_mistake_is_said_with_the_value(
    read: Callable[[str], object], raw: str, said: str
) -> None:
    with pytest.raises(ValueError, match="^" + said.replace("(", r"\(")):
        read(raw)
