"""core.errors: one hierarchy, exported from the package root, raised where each problem is."""

from __future__ import annotations

import pytest

import verdict_contract
from verdict_contract import (
    InvalidVerdictError,
    MissingExtraError,
    SettingsError,
    SpecError,
    VerdictContractError,
    VerificationError,
)

SUBCLASSES = [SpecError, InvalidVerdictError, SettingsError, MissingExtraError, VerificationError]


@pytest.mark.parametrize("error", SUBCLASSES)
def test_every_error_is_a_verdict_contract_error_exported_from_the_root(error: type) -> None:
    assert issubclass(error, VerdictContractError)
    assert error.__name__ in verdict_contract.__all__
    assert getattr(verdict_contract, error.__name__) is error


def test_each_is_also_the_builtin_callers_expect() -> None:
    assert all(issubclass(e, ValueError) for e in (SpecError, InvalidVerdictError, SettingsError))
    assert issubclass(VerificationError, AssertionError)
    assert issubclass(MissingExtraError, SettingsError)  # refused when Settings(...) is built
    assert issubclass(MissingExtraError, ImportError)


def test_the_mock_and_the_factory_raise_members_of_the_one_hierarchy() -> None:
    from verdict_contract.mockserver import Settings
    from verdict_contract.mockserver.model.sessions import SpecError as MockSpecError
    from verdict_contract.testing.mocks import respx_mock

    assert MockSpecError is SpecError  # the same class, not a look-alike
    with pytest.raises(InvalidVerdictError):
        verdict_contract.make_verdict("disputed", conclusive=True)
    with respx_mock() as mock, pytest.raises(SpecError, match="never conclusive"):
        mock.mint(verdict="disputed", conclusive=True)
    with pytest.raises(SettingsError, match="rate_limit"):
        Settings(rate_limit=5)  # type: ignore[arg-type]
    with respx_mock() as mock, pytest.raises(VerificationError):
        mock.assert_called_once("nobody")


def test_the_written_out_all_matches_the_lazy_exports() -> None:
    """``__all__`` is a literal list for type checkers; it names what ``__getattr__`` serves."""
    assert sorted(verdict_contract.__all__) == sorted(verdict_contract._EXPORTS)
    assert len(set(verdict_contract.__all__)) == len(verdict_contract.__all__)
