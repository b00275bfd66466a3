"""``verdict-mock``: start the mock server from flags and ``VERDICT_MOCK_*`` variables."""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import signal
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any
from urllib.parse import quote

from verdict_contract.core.redact import mask
from verdict_contract.mockserver.app import create_app
from verdict_contract.mockserver.backend import StateUnavailable
from verdict_contract.mockserver.guard import exposure_warning
from verdict_contract.mockserver.scenario import DEMO_SESSIONS, ScenarioError, ScenarioWatcher
from verdict_contract.mockserver.serve import make_server, serve_forever
from verdict_contract.mockserver.settings import (
    DEFAULT_API_KEY,
    Settings,
    env_var,
    options,
    shown_default,
)
from verdict_contract.mockserver.web import state_of
from verdict_contract.mockserver.workers import is_worker, run_workers


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
    parser = argparse.ArgumentParser(
        prog="verdict-mock",
        description="Serve a mock of the Explain API (GET /e). Every flag also reads "
        "an environment variable, shown in brackets.",
    )
    for name, option, default in options():
        flag = option.flag(name, default)
        text = f"{option.help} [{env_var(name)}] (default {shown_default(option, default)})"
        if isinstance(default, bool):
            action = "store_false" if default else "store_true"
            parser.add_argument(flag, dest=name, action=action, default=None, help=text)
        else:
            parser.add_argument(
                flag,
                dest=name,
                type=_flag_type(option.parse),
                action="append" if option.repeatable else "store",
                metavar=option.metavar,
                help=text,
            )
    return parser


def settings_from(args: argparse.Namespace, environ: Mapping[str, str]) -> Settings:
    """Defaults, then environment variables, then flags."""
    settings = Settings().with_env(environ)
    flags = {k: v for k, v in vars(args).items() if v is not None}
    for name, option, _ in options():
        if option.repeatable and name in flags:
            flags[name] = tuple(flags[name])
    return replace(settings, **flags)


def banner(settings: Settings, base_url: str, api_keys: Sequence[str]) -> str:
    key = api_keys[0]
    shown = key if key == DEFAULT_API_KEY else mask(key)
    lines = [
        f"verdict-mock serving the Explain API on {base_url}",
        f"  API key:  {shown}" + (f" (+{len(api_keys) - 1} more)" if len(api_keys) > 1 else ""),
    ]
    if settings.demo_sessions:
        lines.append(f"  demo ids: {', '.join(DEMO_SESSIONS)}")
    # Pasted into a shell as printed: a literal key single-quoted, the variable double-quoted.
    header = (
        shlex.quote(f"Authorization: Bearer {key}")
        if key == DEFAULT_API_KEY
        else '"Authorization: Bearer $VERDICT_API_KEY"'
    )
    url = shlex.quote(f"{base_url}/e?n={quote('demo-contradicted')}")
    lines.append(f"  try:      curl -i -H {header} {url}")
    if settings.proxy_to is not None:
        lines.append(f"  proxying: GET /e to {settings.proxy_to}, answers checked by the contract")
    if settings.control:
        lines.append(f"  control:  {base_url}/_mock/health, POST {base_url}/_mock/sessions")
        lines.append(f"  dashboard: {base_url}/_mock/")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        settings = settings_from(args, os.environ)
        app = create_app(settings)
    except (ValueError, ScenarioError, StateUnavailable) as exc:  # one line, not a traceback
        parser.error(str(exc))
    warning = exposure_warning(settings)
    if warning:
        print(warning, file=sys.stderr, flush=True)
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    state = state_of(app)
    host = settings.host if ":" not in settings.host else f"[{settings.host}]"
    if settings.workers > 1 and not is_worker():  # this process only starts and watches them
        given = list(sys.argv[1:] if argv is None else argv)
        return run_workers(
            given, settings, lambda port: banner(settings, f"http://{host}:{port}", state.api_keys)
        )
    if settings.scenario is not None:
        watcher = ScenarioWatcher(settings.scenario, state.apply)
        watcher.start()
        if hasattr(signal, "SIGHUP"):
            signal.signal(signal.SIGHUP, lambda *_: watcher.reload())
    try:
        server = make_server(app, settings.host, settings.port, settings.threads)
    except OSError as exc:  # e.g. the port is taken
        parser.error(f"cannot listen on {settings.host}:{settings.port}: {exc.strerror or exc}")
    print(banner(settings, f"http://{host}:{server.effective_port}", state.api_keys), flush=True)
    serve_forever(server)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
