"""``verdict-mock``: start the mock server from flags and ``VERDICT_MOCK_*`` variables."""

from __future__ import annotations

import argparse
import errno
import gc
import logging
import os
import shlex
import signal
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from importlib import metadata
from typing import Any
from urllib.error import HTTPError
from urllib.parse import quote
from urllib.request import urlopen

from verdict_contract.core.extras import install_hint, is_installed
from verdict_contract.core.redact import mask
from verdict_contract.core.suggest import SuggestingParser

from .model.scenario import DEMO_SESSIONS, FileWatcher, ScenarioError, load_scenario
from .server.asyncserver import AsyncServer
from .server.logs import announce
from .server.logs import configure as configure_logging
from .server.workers import parent_pid, run_workers
from .settings import DEFAULT_API_KEY, Settings, documented_default, env_var, from_env, options
from .state import MockState
from .store.backend import StateUnavailable
from .web.answers import state_of
from .web.app import create_app
from .web.guard import exposure_warning


def _flag_type(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """The parser as argparse wants it: its ValueError message shown as it is."""

    def convert(raw: str) -> Any:
        try:
            return parse(raw)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return convert


def build_parser() -> argparse.ArgumentParser:
    """One flag per setting, derived from the fields of :class:`Settings`."""
    parser = SuggestingParser(
        prog="verdict-mock",
        description="Serve a mock of the Explain API (GET /e). Every flag also reads "
        "an environment variable, shown in brackets.",
    )
    version = f"verdict-mock {metadata.version('verdict-contract')}"  # for bug reports
    parser.add_argument("--version", action="version", version=version)
    for name, option, default in options():
        flag = option.flag(name, default)
        text = f"{option.help} [{env_var(name)}] (default {documented_default(option, default)})"
        if isinstance(default, bool):
            action = "store_false" if default else "store_true"
            parser.add_argument(flag, dest=name, action=action, default=None, help=text)
        else:
            plural = f"--{name.replace('_', '-')}"  # also as uvicorn spells its list flags
            parser.add_argument(
                *(flag, plural) if option.repeatable and plural != flag else (flag,),
                dest=name,
                type=_flag_type(option.parse),
                action="append" if option.repeatable else "store",
                metavar=option.metavar,
                help=text,
            )
    return parser


def settings_from(args: argparse.Namespace, environ: Mapping[str, str]) -> Settings:
    """Defaults, then environment variables, then flags: merged first, then checked once, so a
    setting and the one it needs may come from a flag and a variable."""
    flags = {name: value for name, value in vars(args).items() if value is not None}
    return Settings(**(from_env(environ) | flags))  # type: ignore[arg-type]  # parsed values


SESSION_PLACEHOLDER = "<session id>"
"""What the proxy's banner puts in its ``curl`` line for ``n``: a session of the upstream's."""


def _try_line(base_url: str, n: str, key: str, public: bool) -> str:
    """The banner's ``curl``, pasted into a shell as printed: a literal key single-quoted, the
    variable double-quoted (so the shell expands it)."""
    header = f"Authorization: Bearer {key}" if public else "Authorization: Bearer $VERDICT_API_KEY"
    authorization = shlex.quote(header) if public else f'"{header}"'
    return f"  try:      curl -i -H {authorization} {shlex.quote(f'{base_url}/e?n={n}')}"


def banner(
    settings: Settings,
    base_url: str,
    api_keys: Sequence[str],
    session_ids: Sequence[str] = (),
    tenants: Sequence[str] = (),
) -> str:
    """What ``verdict-mock`` prints on start: where, which key, and lines to paste;
    ``session_ids``: the named sessions served (none with ``--proxy-to``: /e goes upstream)."""
    upstream, key = settings.proxy_to, api_keys[0]
    public = key == DEFAULT_API_KEY  # the public default key is printed as is
    more = f" (+{len(api_keys) - 1} more)" if len(api_keys) > 1 else ""
    key_line = f"  API key:  {key if public else mask(key)}{more}"
    ours = f"one of the keys given with --api-key, {env_var('api_keys')} or the scenario's api_keys"
    lines = [f"verdict-mock serving the Explain API on {base_url}"]
    if upstream is not None:  # no demo or scenario id is served
        lines.append(
            f"  proxying: GET /e to {upstream}/e (same query), answers checked by the contract"
        )
        if settings.upstream_key is not None:  # the app sends a key of the mock's; never shown
            lines.append(f"{key_line}; the proxy sends --upstream-key upstream instead")
            where = f"{ours} (the proxy sends its --upstream-key upstream)"
        else:
            public = False
            where = f"a key of {upstream}"
            lines.append(f"  API key:  the client's own, passed upstream as is: {where}")
        lines.append(_try_line(base_url, SESSION_PLACEHOLDER, key, public))
        lines.append(
            f"  session:  {SESSION_PLACEHOLDER} is one of {upstream}'s sessions; the mock's demo "
            "and scenario sessions are not served while it proxies"
        )
    else:
        where = ours
        lines.append(key_line)
        if settings.demo_sessions:
            lines.append(f"  demo ids: {', '.join(DEMO_SESSIONS)}")
        example = "demo-contradicted" if settings.demo_sessions else next(iter(session_ids), None)
        if example is not None:
            lines.append(_try_line(base_url, quote(example, safe=""), key, public))
        elif settings.control:
            token = (
                ' -H "X-Mock-Token: $VERDICT_MOCK_CONTROL_TOKEN"' if settings.control_token else ""
            )
            lines.append(
                "  sessions: none named (--no-demo-sessions, no scenario); mint one, then fetch "
                f"its n: curl -s -X POST -H 'Content-Type: application/json'{token} -d '{{}}' "
                f"{base_url}/_mock/sessions"
            )
        else:
            lines.append("  sessions: none (--no-demo-sessions, no scenario, no control API)")
    if not public:
        lines.append(f"  key:      $VERDICT_API_KEY is {where}: export it first")
    if settings.record is not None:  # with --proxy-to only
        lines.append(f"  recording: each session seen, to {settings.record}")
    if tenants:  # the operator's own first: the others by name
        lines.append(
            f"  tenants:  {', '.join(tenants[1:])}, each with its own keys and control token "
            f"(--tenants {settings.tenants}); the key and token above are the operator's"
        )
    if settings.control:
        if upstream is not None:  # minted sessions would not be served either
            lines.append(
                f"  control:  {base_url}/_mock/health (the proxy's counters), "
                f"{base_url}/_mock/requests (the journal)"
            )
        else:
            lines.append(f"  control:  {base_url}/_mock/health, POST {base_url}/_mock/sessions")
        if settings.control_token is None:
            lines.append(f"  dashboard: {base_url}/_mock/")
        else:
            lines.append(
                f"  dashboard: {base_url}/_mock/?token=<the control token> once; the browser "
                f"then keeps a cookie, so a reload or a bookmark of {base_url}/_mock/ works"
            )
    return "\n".join(lines)


def loop_note(platform: str = sys.platform) -> str | None:
    """A line when the mock's own server runs on asyncio's loop because uvloop is missing."""
    if platform == "win32" or is_installed("uvloop"):
        return None
    return (
        "note: uvloop is not installed, so asyncio's own loop serves (slower under load): "
        + install_hint("server")
    )


class EarlyHangups:
    """SIGHUP from the first line of start: while the mock starts (a long first scenario load),
    a hangup is noted instead of ending the process, and asked of the watcher once it runs."""

    def __init__(self) -> None:
        self.hung_up = False
        # a signal handler is the main thread's to set (main() may run elsewhere: tests)
        self.handled = (
            hasattr(signal, "SIGHUP") and threading.current_thread() is threading.main_thread()
        )
        if self.handled:
            signal.signal(signal.SIGHUP, self._note)

    def _note(self, *_: object) -> None:
        self.hung_up = True


def watch_files(state: MockState, early: EarlyHangups | None = None) -> list[FileWatcher[Any]]:
    """Reload the scenario and the tenants file when they change or on SIGHUP (one during
    start, ``early``: now), each on its watcher's thread: the handler only asks, as the main
    thread's loop a parse would stall. Neither given: SIGHUP ends the process, as any's."""
    settings, watchers = state.settings, list[FileWatcher[Any]]()
    if settings.scenario is not None:
        watchers.append(
            FileWatcher(settings.scenario, load_scenario, state.apply, report=state.report_scenario)
        )
    if settings.tenants is not None:
        watchers.append(
            FileWatcher(
                settings.tenants,
                state.read_tenants,
                state.load_tenants,
                name="tenants file",
                report=state.report_tenants,
            )
        )
    if not watchers:  # SIGHUP does what it does to any process (ends it)
        if early is not None and early.handled:
            signal.signal(signal.SIGHUP, signal.SIG_DFL)
            if early.hung_up:
                os.kill(os.getpid(), signal.SIGHUP)
        return watchers
    for watcher in watchers:
        watcher.start()

    def reload_all(*_: object) -> None:
        for watcher in watchers:
            watcher.request_reload()

    if hasattr(signal, "SIGHUP"):
        signal.signal(signal.SIGHUP, reload_all)
    if early is not None and early.hung_up:
        reload_all()
    return watchers


PROBE_SECONDS = 1.0
"""How long the probe of a taken port waits for an answer (a program that never answers HTTP)."""


def _is_verdict_mock(base_url: str) -> bool:
    """Whether a verdict-mock answers at ``base_url``: any answer of its, by its Server header."""
    server: str | None
    try:
        with urlopen(f"{base_url}/_mock/health", timeout=PROBE_SECONDS) as answer:  # noqa: S310
            server = answer.headers.get("Server")
    except HTTPError as refused:  # --no-control (404), a control token (401): a mock's all the same
        server = refused.headers.get("Server")
    except (OSError, ValueError):  # no HTTP there, or no answer in time
        return False
    return server == "verdict-mock"


def _cannot_listen(settings: Settings, exc: OSError) -> int:
    """Say in one line (and one hint) why the port cannot be had; the usage would bury it."""
    cannot = f"verdict-mock: error: cannot listen on {settings.host}:{settings.port}"
    if exc.errno != errno.EADDRINUSE:
        print(f"{cannot}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    wildcard = settings.host in ("", "0.0.0.0", "::")  # noqa: S104 - read, not bound
    host = "127.0.0.1" if wildcard else settings.host
    base_url = f"http://{host if ':' not in host else f'[{host}]'}:{settings.port}"
    if _is_verdict_mock(base_url):
        problem = f"a verdict-mock already answers there ({base_url}/)"
        hint = "use that one, or start this one with --port 0 for a free port (the banner shows it)"
    else:
        problem = "the port is in use by another program"
        hint = "stop it, or pick another --port; --port 0 takes a free one (the banner shows it)"
    print(f"{cannot}: {problem}", file=sys.stderr)
    print(f"hint: {hint}", file=sys.stderr)
    return 2


def main(argv: Sequence[str] | None = None) -> int:
    """``verdict-mock``: Ctrl-C at any moment, starting included, stops it quietly (exit 0)."""
    try:
        return _main(argv)
    except KeyboardInterrupt:
        return 0


def _main(argv: Sequence[str] | None) -> int:
    early = EarlyHangups()
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        settings = settings_from(args, os.environ)
    except ValueError as exc:  # one line, not a traceback
        parser.error(str(exc))
    configure_logging(settings.log_level, settings.log_format)  # before the state logs a word
    worker = parent_pid() is not None  # its parent says the start's warnings, once for all
    logging.disable(logging.WARNING if worker else logging.NOTSET)
    try:
        app = create_app(settings)
    except (ValueError, ScenarioError, StateUnavailable) as exc:
        parser.error(str(exc))
    logging.disable(logging.NOTSET)
    for warning in () if worker else (exposure_warning(settings), loop_note()):
        if warning:
            print(warning, file=sys.stderr, flush=True)
    state = state_of(app)
    host = settings.host if ":" not in settings.host else f"[{settings.host}]"

    def banner_at(port: int) -> str:
        base = f"http://{host}:{port}"
        return banner(settings, base, state.api_keys, tuple(state.named), tuple(state.tenants))

    if settings.workers > 1 and parent_pid() is None:  # this process only starts and watches them
        return run_workers(list(sys.argv[1:] if argv is None else argv), settings, banner_at)
    watch_files(state, early)
    try:
        server = AsyncServer(app, settings.host, settings.port, settings.threads)
    except OSError as exc:  # e.g. the port is taken
        return _cannot_listen(settings, exc)
    try:
        if parent_pid() is not None:  # to its group's parent, who announces the group
            print(banner_at(server.effective_port), flush=True)
        else:
            announce(banner_at(server.effective_port), settings.log_format)
    except KeyboardInterrupt:  # before serving: the listener is released here
        server.close()
        raise
    serve_forever(server)
    return 0


def serve_forever(server: AsyncServer) -> None:
    """Serve in the foreground until interrupted. What exists by now lives as long as the
    process: ``gc.freeze()`` keeps full collections, frequent under load, from walking it."""
    try:  # Ctrl-C at once after the banner (a --workers group's first second) stops it too
        gc.collect()
        gc.freeze()
        server.run()
    except KeyboardInterrupt:
        logging.getLogger("mockserver.server").info("stopped")
