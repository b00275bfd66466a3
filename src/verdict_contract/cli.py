"""The ``verdict-contract`` command: validate captured bodies, list the rules, run the suite."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any, cast

from .core.extras import install_hint
from .core.rules import RULES
from .core.validator import validate_verdict


def _read(source: str) -> str:
    if source == "-":
        return sys.stdin.read()
    return Path(source).read_text(encoding="utf-8")


# The statuses of the codes the mock's error answers carry (docs/mock.md): the body names the
# code only, and a newcomer knows the status ("404") better.
_ERROR_STATUSES = {
    "bad_request": 400,
    "unauthorized": 401,
    "forbidden": 403,
    "session_not_found": 404,
    "not_found": 404,
    "method_not_allowed": 405,
    "request_entity_too_large": 413,
    "rate_limited": 429,
    "internal_error": 500,
    "unavailable": 503,
    "state_unavailable": 503,
}
_ERROR_CHARS = 200


def _error_answer(body: object) -> str | None:
    """``"404 session_not_found"`` for the documented error shape, else None.

    ``{"error": {"code": ..., "message": ...}}`` with no verdict field: judged as a verdict, it
    listed eight missing properties and never said that it was the answer to a failed request.
    """
    if not isinstance(body, dict) or "verdict" in body or "schema" in body:
        return None
    error = body.get("error")
    if not isinstance(error, dict) or not isinstance(error.get("code"), str):
        return None
    code: str = error["code"][:_ERROR_CHARS]
    status = _ERROR_STATUSES.get(code)
    named = code if status is None else f"{status} {code}"
    message = error.get("message")
    quoted = repr(message[:_ERROR_CHARS]) if isinstance(message, str) else "no message"
    return f"this is an error answer ({named}), not a verdict; the service said: {quoted}"


def _validate(args: argparse.Namespace) -> int:
    try:
        body = json.loads(_read(args.file))
    except OSError as exc:
        print(f"verdict-contract: cannot read {args.file}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    except UnicodeDecodeError:
        print(f"verdict-contract: {args.file} is not UTF-8 text", file=sys.stderr)
        return 2
    except RecursionError:
        print(f"verdict-contract: {args.file} nests JSON too deeply to read", file=sys.stderr)
        return 2
    except json.JSONDecodeError as exc:
        where = "stdin" if args.file == "-" else args.file
        problem = exc.msg.removesuffix(" at")  # "Unterminated string starting at": its own "at"
        print(
            f"verdict-contract: {where} is not JSON: {problem} at line {exc.lineno} "
            f"column {exc.colno}",
            file=sys.stderr,
        )
        return 2
    error = _error_answer(body)
    if error is not None:  # said, not judged: no verdict to judge
        print(f"{args.file}: {error}")
        return 1
    violations = validate_verdict(body, strict=args.strict)
    for violation in violations:
        received = f" (received {violation.received})" if violation.received else ""
        print(
            f"{violation.path or '/'}: {violation.message}{received} "
            f"[{violation.rule}, spec {violation.clause}]"
        )
    if not violations and not args.quiet:
        print(f"{args.file}: conforms to the schema-7 verdict contract")
    return 1 if violations else 0


def _rules(args: argparse.Namespace) -> int:
    for contract_rule in RULES.values():
        mode = " (strict only)" if contract_rule.strict_only else ""
        if contract_rule.reads == "refusal":
            mode = " (reads the answer to a call without a valid key)"
        elif contract_rule.reads == "repeat":
            mode = " (reads a session's verdict and one read later)"
        print(f"{contract_rule.name:48} {contract_rule.clause:14} {contract_rule.summary}{mode}")
    return 0


def _version() -> str:
    try:
        return f"verdict-contract {metadata.version('verdict-contract')}"
    except metadata.PackageNotFoundError:  # pragma: no cover - run from an uninstalled tree
        return "verdict-contract (not installed)"


_EXIT_CODES = (
    "0 when every given session was checked and every check passed; 1 on a breach, nothing "
    "verified or an interrupted run; 4 on a usage error (a configuration mistake or an "
    "unreachable target, said in one ERROR: line); 10 when incomplete (sessions or checks left "
    "throttled; --verdict-allow-partial accepts that)"
)
"""As docs/suite.md's table has them; other codes are pytest's own."""
_SHORT_EXIT_CODES = (
    "0 passed, 1 failed (a breach, nothing verified, interrupted), 4 usage error, "
    "10 incomplete (docs/suite.md)"
)
"""The same on the one line ``check --help`` has room for."""


class _SuiteOptions:
    """Stands in for pytest's parser so the suite's own options (config.add_options) fill a help."""

    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self.group = parser.add_argument_group(
            "the suite's options (each also read from a variable)"
        )

    def getgroup(self, name: str, description: str = "") -> _SuiteOptions:
        return self

    def addoption(self, *names: str, **kwargs: Any) -> None:
        self.group.add_argument(*names, **kwargs)

    def addini(self, *args: object, **kwargs: object) -> None:
        """Ini values are pytest's business; the short help leaves them out."""


def check_help() -> str:
    """``verdict-contract check --help``: the suite's own short help, the URL first."""
    from verdict_contract.contract_tests import config  # imports pytest: only when asked

    parser = argparse.ArgumentParser(
        prog="verdict-contract check",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        usage="verdict-contract check [URL] [options] [pytest options]",
        description="Run the contract suite against the Explain API at URL; without a URL, "
        "against the bundled mock. Options not listed here go to pytest (pytest --help). "
        f"Exit codes: {_SHORT_EXIT_CODES}.",
        epilog="e.g. VERDICT_API_KEY=... verdict-contract check https://staging.example "
        "--verdict-session-id ID",
    )
    parser.add_argument(
        "url",
        nargs="?",
        metavar="URL",
        help="base URL of the service (its /e is checked), e.g. https://staging.example",
    )
    config.add_options(cast(Any, _SuiteOptions(parser)))
    return parser.format_help()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="verdict-contract",
        description="Check Explain API verdicts against the schema-7 contract.",
        epilog=f"exit codes of check and run (docs/suite.md): {_EXIT_CODES}. validate exits 0 "
        "when the body conforms, 1 when it does not (or is an error answer), 2 when it cannot "
        "be read.",
    )
    parser.add_argument("--version", action="version", version=_version())
    commands = parser.add_subparsers(dest="command", required=True)
    validate = commands.add_parser("validate", help="validate a captured verdict body")
    validate.add_argument("file", help="a JSON file, or - for standard input")
    validate.add_argument(
        "--strict", action="store_true", help="also report properties the schema does not document"
    )
    validate.add_argument("-q", "--quiet", action="store_true", help="print violations only")
    validate.set_defaults(handler=_validate)
    rules = commands.add_parser("rules", help="list the contract rules and their spec clauses")
    rules.set_defaults(handler=_rules)
    commands.add_parser(
        "check",
        help="run only the contract suite against URL (the bundled mock without one): "
        "verdict-contract check [URL] [pytest and --verdict-* options]",
    )
    commands.add_parser(
        "run",
        help="run the contract suite with pytest options: verdict-contract run --base-url URL "
        "--verdict-api-key KEY [pytest options]",
    )
    return parser


USAGE_ERROR = 4
"""pytest's exit code for a usage error, which the suite gives every configuration mistake."""


def _asks_for_workers(pytest_args: Sequence[str]) -> bool:
    """Whether pytest is asked for xdist's workers (``-n 2``, ``-nauto``, ``--numprocesses``)."""
    return any(
        arg in ("-n", "--numprocesses", "--dist") or arg.startswith(("--numprocesses=", "--dist="))
        or (arg.startswith("-n") and arg[2:].isalnum())
        for arg in pytest_args
    )  # fmt: skip


def run_suite(pytest_args: Sequence[str]) -> int:
    """Run the installed contract suite with pytest; arguments go to pytest unchanged."""
    if _asks_for_workers(pytest_args) and importlib.util.find_spec("xdist") is None:
        hint = install_hint("parallel")
        print(
            f"ERROR: -n needs the pytest-xdist package, which is not installed: {hint}",
            file=sys.stderr,
        )
        return USAGE_ERROR
    # A fresh interpreter: here contract_tests is already imported, which would keep pytest
    # from rewriting the asserts of the suite's modules. No conftest.py is loaded but the
    # suite's own, as a plugin: with --pyargs pytest would load those of the directory it runs
    # from, where a project's own (its `--base-url`, its hooks) has no business in the suite.
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "verdict_contract.suite",
        "--noconftest",
        "-p",
        "verdict_contract.contract_tests.conftest",
        "--pyargs",
        "verdict_contract.contract_tests",
        *pytest_args,
    ]
    return supervise(command, interactive=bool({"--pdb", "--trace"} & set(pytest_args)))


GRACE_SECONDS = 10.0
"""How long a cancelled run may take to write its JUnit XML and report before it is killed."""
CANCELLED = 1
"""A cancelled run exits as an interrupted one (the gate's FAILED)."""


def supervise(command: list[str], interactive: bool = False, grace: float = GRACE_SECONDS) -> int:
    """Run ``command`` (pytest) as a child, and stop it cleanly when this process is cancelled.

    SIGINT (Ctrl-C) or SIGTERM (a CI's cancel), sent to this process or to its process group, is
    passed on to the child alone, which ends its run as interrupted: the test in flight stops,
    the JUnit XML and the report are written. The child runs in a process group of its own (its
    xdist workers with it), so whatever is left of it after ``grace`` seconds, or when the
    signal comes again, is killed: nothing keeps sending requests once this command has exited.
    ``interactive`` (``--pdb``) keeps the child on the terminal, in this process group.
    """
    received: list[int] = []

    def note(signum: int, _frame: object) -> None:
        received.append(signum)

    previous = {s: signal.signal(s, note) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        child = subprocess.Popen(command, start_new_session=not interactive)  # noqa: S603 - ours
        code = _wait(child, received, grace, own_group=not interactive)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if not received:
        return code
    return CANCELLED


def _wait(
    child: subprocess.Popen[bytes], received: list[int], grace: float, own_group: bool
) -> int:
    """The child's exit code; on a signal, forward it, wait ``grace`` seconds, then kill."""
    forwarded = 0
    deadline: float | None = None
    while True:
        try:
            code = child.wait(timeout=0.1)
            break
        except subprocess.TimeoutExpired:
            pass
        if received and not forwarded:
            forwarded = len(received)
            name = signal.Signals(received[0]).name
            print(
                f"verdict-contract: {name} received: stopping the run (the JUnit XML and the "
                f"report are still written; killed if not done within {grace:g} s)",
                file=sys.stderr,
                flush=True,
            )
            child.send_signal(received[0])
            deadline = time.monotonic() + grace
        elif deadline is not None and (len(received) > forwarded or time.monotonic() > deadline):
            print("verdict-contract: the run did not stop in time: killed", file=sys.stderr)
            _kill(child, own_group)
            code = child.wait()
            break
    if received and own_group:
        _kill(child, own_group)  # its workers, should any outlive it
    return code


def _kill(child: subprocess.Popen[bytes], own_group: bool) -> None:
    try:
        if own_group:
            os.killpg(child.pid, signal.SIGKILL)
        else:
            child.kill()
    except (ProcessLookupError, PermissionError):
        pass  # already gone


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["run"]:  # everything after `run` belongs to pytest
        return run_suite(argv[1:])
    if argv[:1] == ["check"]:  # a URL, then everything belongs to pytest
        rest = argv[1:]
        if {"-h", "--help"} & set(rest[: rest.index("--") if "--" in rest else None]):
            print(check_help(), end="")
            return 0
        if rest and not rest[0].startswith("-"):
            rest = ["--base-url", rest[0], *rest[1:]]
        return run_suite(rest)
    args = build_parser().parse_args(argv)
    try:
        status: int = args.handler(args)
        sys.stdout.flush()
    except BrokenPipeError:  # `verdict-contract rules | head`: the reader has had enough
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # Python's docs' way
        return 1
    return status


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
