"""``flask --app verdict_contract.mockserver run`` (werkzeug's server) serves every control call."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.helpers import bearer, clean_environ, free_port, stop_process, wait_until
from verdict_contract.mockserver import DEFAULT_API_KEY


def _answers(base: str) -> bool:
    try:
        return httpx.get(f"{base}/_mock/health", timeout=1).status_code == 200
    except httpx.TransportError:
        return False


@pytest.mark.skipif(
    shutil.which("flask", path=str(Path(sys.executable).parent)) is None,
    reason="flask's script is not installed next to this Python",
)
def test_flask_run_supports_every_control_call(tmp_path: Path) -> None:
    port = free_port()
    flask = str(Path(sys.executable).parent / "flask")
    proc = subprocess.Popen(
        [flask, "--app", "verdict_contract.mockserver", "run", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
        env=clean_environ(),
        cwd=tmp_path,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        assert wait_until(lambda: proc.poll() is not None or _answers(base), step=0.1)
        with httpx.Client(base_url=base, timeout=10) as http:
            minted = http.post("/_mock/sessions", json={"verdict": "refused", "script": [503]})
            assert minted.status_code == 201
            n = minted.json()["n"]
            assert (
                http.get("/e", params={"n": n}, headers=bearer(DEFAULT_API_KEY)).status_code == 503
            )
            assert http.get("/_mock/sessions").status_code == 200
            assert len(http.get("/_mock/requests").json()) == 1
            assert http.post("/_mock/reset").status_code == 204
            assert http.get("/_mock/requests").json() == []
            assert http.delete("/_mock/requests").status_code == 204
            assert http.get("/_mock/openapi.json").status_code == 200
            too_big = http.post("/_mock/sessions", content=b" " * (2 * 1024 * 1024))
            assert too_big.status_code == 413
            assert too_big.json()["error"]["code"] == "request_entity_too_large"
            foreign = http.get("/_mock/health", headers={"Host": "evil.example"})
            assert foreign.status_code == 421
    finally:
        stop_process(proc)
