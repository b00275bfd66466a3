"""The one exception hierarchy of verdict-contract, exported from the package root.

Catch :class:`VerdictContractError` for any of them. Each subclass is also the builtin its
callers would expect (``ValueError`` for a bad value, ``AssertionError`` for a failed check),
so ``pytest.raises(ValueError)`` and ``except AssertionError`` keep working.
"""

from __future__ import annotations


class VerdictContractError(Exception):
    """Base class of every error this package raises on purpose."""


class SpecError(VerdictContractError, ValueError):
    """A session request or scenario entry that cannot be honoured (the control API's 422)."""


class ScenarioError(VerdictContractError, ValueError):
    """A scenario file that cannot be loaded; the message names the file and the problem."""


class InvalidVerdictError(VerdictContractError, ValueError):
    """A verdict body was asked for that breaks the contract (pass ``valid=False`` to allow)."""


class SettingsError(VerdictContractError, ValueError):
    """A mock setting that would make every later request fail, refused at construction."""


class MissingExtraError(SettingsError, ImportError):
    """A setting needs a package of an extra that is not installed; the message names the extra.

    Also an ``ImportError``, which is what it stands for.
    """


class StateUnavailable(VerdictContractError):
    """The mock's shared state (``--state``) did not answer in time, or refused to be written
    (full, a read-only replica): a 503 that names it.

    ``code`` is the error code the 503 carries; ``retry`` says whether retrying soon can help
    (a store that timed out or is down: yes, with ``Retry-After``; one that refuses writes: no).
    """

    def __init__(
        self, label: str, reason: str, code: str = "state_unavailable", retry: bool = True
    ) -> None:
        what = "did not answer" if retry else "refuses writes"
        super().__init__(f"the mock's shared state ({label}) {what}: {reason}")
        self.label = label
        self.reason = reason
        self.code = code
        self.retry = retry


class VerificationError(VerdictContractError, AssertionError):
    """A journal check (``assert_called_once`` and friends) that did not hold."""
