"""mockserver.cycle: a request's phases move only as the table allows."""

from __future__ import annotations

import pytest

from verdict_contract.mockserver.server.asyncserver import BUSY, Phase, PhaseError, RequestCycle


@pytest.mark.parametrize(
    "path",
    [
        [Phase.QUEUED, Phase.DONE],  # answered on the loop
        [Phase.QUEUED, Phase.DELAYED, Phase.DONE],  # a scripted delay (or the client left)
        [Phase.QUEUED, Phase.DECIDING, Phase.DONE],  # the app, on a thread
        [Phase.QUEUED, Phase.DECIDING, Phase.DELAYED, Phase.DONE],  # --state
        [Phase.DONE],  # cut while reading
    ],
)
def test_the_phases_of_a_request(path: list[Phase]) -> None:
    cycle = RequestCycle()
    for phase in path:
        cycle.to(phase)
    assert cycle.phase is Phase.DONE


@pytest.mark.parametrize(
    ("path", "wrong"),
    [
        ([], Phase.DECIDING),  # decided before the request was read whole
        ([Phase.QUEUED, Phase.DONE], Phase.DONE),  # a second answer
        ([Phase.QUEUED, Phase.DELAYED], Phase.DECIDING),
        ([Phase.QUEUED, Phase.DECIDING, Phase.DELAYED], Phase.DECIDING),
        ([Phase.DONE], Phase.QUEUED),
    ],
)
def test_a_move_out_of_turn_is_refused(path: list[Phase], wrong: Phase) -> None:
    cycle = RequestCycle()
    for phase in path:
        cycle.to(phase)
    with pytest.raises(PhaseError, match=f"to {wrong.name}"):
        cycle.to(wrong)


def test_a_completed_request_holds_its_body_and_method() -> None:
    cycle = RequestCycle()
    cycle.body += b"ab"
    cycle.body += b"cd"
    cycle.complete("POST", keep_alive=True)
    assert (bytes(cycle.body), cycle.method, cycle.phase) == (b"abcd", "POST", Phase.QUEUED)
    assert cycle.phase not in BUSY
    cycle.to(Phase.DELAYED)
    assert cycle.phase in BUSY
