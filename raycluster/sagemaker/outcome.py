"""How the head tells its worker hosts that the job ended, and how: one small HTTP answer on the cluster's
network (``layout.OUTCOME_PORT``), behind the job's Ray token as Ray's own servers are.

Ray offers no public key-value store that a process can reach without becoming a Ray driver, and the
dashboard (where Ray's public APIs answer) listens on the head's loopback only.
"""

from __future__ import annotations

import hmac
import json
import logging
import os
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from raycluster.errors import UsageError
from raycluster.layout import OUTCOME_PORT

log = logging.getLogger(__name__)

PATH = "/raycluster/outcome"


def job_token() -> str | None:
    """The job's Ray auth token, as the entry point set it up (``RAY_AUTH_TOKEN_PATH``); None when the
    cluster runs without one (``entry.insecure``)."""
    path = os.environ.get("RAY_AUTH_TOKEN_PATH")
    if not path:
        return None
    token = Path(path).read_text().strip()
    if not token:  # `Bearer ` would then pass: an empty token is no token, and never "no auth"
        raise UsageError(f"the Ray auth token at {path} is empty: ship the job's token with its code")
    return token


class OutcomeServer:
    """On the head: answers 204 until ``publish``, then the outcome as JSON; 401 without the token."""

    def __init__(self, ip: str, port: int = OUTCOME_PORT):
        token, outcome = job_token(), {}
        self.polled: dict[str, float] = {}
        """When each worker host last asked (monotonic), by its address."""
        self.told: set[str] = set()
        """The worker hosts that have read the published outcome."""
        polled, told = self.polled, self.told

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                polled[self.client_address[0]] = time.monotonic()
                given = self.headers.get("Authorization", "")
                if token is not None and not hmac.compare_digest(given, f"Bearer {token}"):
                    self.send_response(401)
                    self.end_headers()
                    return
                if self.path != PATH or not outcome:
                    self.send_response(404 if self.path != PATH else 204)
                    self.end_headers()
                    return
                told.add(self.client_address[0])
                body = json.dumps(outcome).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:  # one line per poll would drown the host's log
                pass

        self._outcome = outcome
        self._server = ThreadingHTTPServer((ip, port), Handler)
        threading.Thread(target=self._server.serve_forever, name="outcome", daemon=True).start()

    def publish(self, outcome: dict) -> None:
        self._outcome.update(outcome)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def read_outcome(head_ip: str, timeout: float = 2.0, port: int = OUTCOME_PORT) -> dict | None:
    """On a worker host: the head's outcome, None while the job runs. Raises OSError when the head does not
    answer, which the caller tolerates for ``entry.lost_after_s``."""
    token = job_token()
    request = urllib.request.Request(f"http://{head_ip}:{port}{PATH}")
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read()) if response.status == 200 else None
