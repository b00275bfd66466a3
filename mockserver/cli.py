"""``verdict-mock``: start the mock server from flags and ``VERDICT_MOCK_*`` variables."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from urllib.parse import quote

from contract_tests.redact import mask
from mockserver.app import create_app, state_of
from mockserver.ratelimit import RateLimit
from mockserver.scenario import DEMO_SESSIONS, ScenarioError, ScenarioWatcher
from mockserver.serve import make_server, serve_forever
from mockserver.settings import DEFAULT_API_KEY, ENV_PREFIX, LOG_LEVELS, Settings


def build_parser() -> argparse.ArgumentParser:
    env = ENV_PREFIX
    default = Settings()  # the help shows the real defaults, never copies of them
    parser = argparse.ArgumentParser(
        prog="verdict-mock",
        description="Serve a mock of the Explain API (GET /e). Every flag also reads "
        "an environment variable, shown in brackets.",
    )
    add = parser.add_argument
    add("--host", help=f"address to bind [{env}HOST] (default 127.0.0.1)")
    add("--port", type=int, help=f"port [{env}PORT] (default {default.port}; 0 picks a free one)")
    add(
        "--threads",
        type=int,
        help=f"waitress worker threads [{env}THREADS] (default {default.threads})",
    )
    add(
        "--api-key",
        dest="api_keys",
        action="append",
        metavar="KEY",
        help=f"accepted API key, repeatable [{env}API_KEYS, comma-separated] "
        f"(default {', '.join(default.api_keys)})",
    )
    add("--seed", help=f"seed of the generated verdicts [{env}SEED]")
    add("--secret", help=f"secret that signs minted session ids [{env}SECRET]")
    add(
        "--scenario",
        type=Path,
        metavar="FILE",
        help=f"YAML or JSON scenario, reloaded on change or SIGHUP [{env}SCENARIO]",
    )
    add(
        "--rate-limit",
        type=RateLimit.parse,
        metavar="N/SECONDS",
        help=f"per-key budget, e.g. 600/60, or off [{env}RATE_LIMIT] "
        f"(default {default.rate_limit})",
    )
    add(
        "--session-lifetime",
        type=float,
        metavar="SECONDS",
        help=f"session lifetime [{env}SESSION_LIFETIME] (default {default.session_lifetime:g})",
    )
    add(
        "--log-level",
        choices=LOG_LEVELS,
        help=f"log level [{env}LOG_LEVEL] (default {default.log_level})",
    )
    add(
        "--journal-size",
        type=int,
        metavar="N",
        help=f"requests kept in the journal [{env}JOURNAL_SIZE] (default {default.journal_size})",
    )
    add(
        "--accept-any-session",
        action="store_true",
        default=None,
        help=f"serve a verdict for every unknown id; hides 404s [{env}ACCEPT_ANY_SESSION]",
    )
    add(
        "--no-control",
        dest="control",
        action="store_false",
        default=None,
        help=f"turn off the /_mock/ control API [{env}CONTROL=0]",
    )
    add(
        "--no-demo-sessions",
        dest="demo_sessions",
        action="store_false",
        default=None,
        help=f"do not serve the demo-* sessions [{env}DEMO_SESSIONS=0]",
    )
    return parser


def settings_from(args: argparse.Namespace, environ: Mapping[str, str]) -> Settings:
    """Defaults, then environment variables, then flags."""
    settings = Settings().with_env(environ)
    flags = {k: v for k, v in vars(args).items() if v is not None}
    if "api_keys" in flags:
        flags["api_keys"] = tuple(flags["api_keys"])
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
    auth_key = key if key == DEFAULT_API_KEY else "$VERDICT_API_KEY"
    lines.append(
        f"  try:      curl -i -H 'Authorization: Bearer {auth_key}' "
        f"'{base_url}/e?n={quote('demo-contradicted')}'"
    )
    if settings.control:
        lines.append(f"  control:  {base_url}/_mock/health, POST {base_url}/_mock/sessions")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        settings = settings_from(args, os.environ)
        app = create_app(settings)
    except (ValueError, ScenarioError) as exc:  # one readable line, not a traceback
        parser.error(str(exc))
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    state = state_of(app)
    if settings.scenario is not None:
        watcher = ScenarioWatcher(settings.scenario, state.apply)
        watcher.start()
        if hasattr(signal, "SIGHUP"):
            signal.signal(signal.SIGHUP, lambda *_: watcher.reload())
    try:
        server = make_server(app, settings.host, settings.port, settings.threads)
    except OSError as exc:  # e.g. the port is taken
        parser.error(f"cannot listen on {settings.host}:{settings.port}: {exc.strerror or exc}")
    host = settings.host if ":" not in settings.host else f"[{settings.host}]"
    print(banner(settings, f"http://{host}:{server.effective_port}", state.api_keys), flush=True)
    serve_forever(server)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
