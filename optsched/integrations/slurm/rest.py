"""Reading Slurm through slurmrestd (``optsched slurm-agent --slurmrestd URL``; ``docs/integration.md``, "Slurm").

slurmrestd's GET endpoints ``/slurm/v0.0.38/nodes`` and ``/slurm/v0.0.38/jobs`` answer the JSON that ``sinfo
--json`` and ``squeue --json`` print (Slurm 22.05 builds both from the same OpenAPI v0.0.38 parser; measured: the
same nodes and jobs field for field), so :func:`~.reader.parse_nodes` and :func:`~.reader.parse_jobs` read them
and one round builder serves both. Authentication is Slurm's JWT, found the way Slurm's REST clients find it:
the token in ``SLURM_JWT`` (``export $(scontrol token)``), sent as ``X-SLURM-USER-TOKEN``, with
``X-SLURM-USER-NAME`` (slurmrestd 22.05 answers 401 without it, measured): the given user, else the user the
token names (its ``sun`` claim, read without verifying: slurmctld verifies it).

Only reads go through slurmrestd; the agent applies with ``scontrol`` (:class:`~.client.SlurmClient`) because
slurmrestd v0.0.38 answers 200 even when it rejects a job update (the agent could not tell an applied action
from a refused one) and has no requeue endpoint (``preempt`` and ``reconfigure`` need ``requeuehold``).
Every GET is logged with its latency (DEBUG). A failure (connection refused, timeout, an HTTP error, a body
that is not JSON or that carries ``errors``) is :class:`~.client.SlurmUnavailable` with slurmrestd's message.
Unix-socket listeners (``unix:/path``) are not supported: give an ``http://`` or ``https://`` URL.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from optsched.core.errors import ValidationError
from optsched.integrations.slurm.client import COMMAND_TIMEOUT_S, SlurmUnavailable

log = logging.getLogger(__name__)

#: the OpenAPI plugin slurmrestd must load (``slurmrestd -s openapi/v0.0.38``; without slurmdbd the default
#: set fails to load its dbv0.0.38 part)
API_VERSION = "v0.0.38"
TOKEN_ENV = "SLURM_JWT"


@dataclass(frozen=True)
class SlurmRestReader:
    """GETs nodes and jobs from slurmrestd at ``url`` (module docstring) with JWT ``token`` as user ``user`` (None:
    the token's). :meth:`from_env` takes the token from ``SLURM_JWT``."""

    url: str
    token: str
    user: str | None = None
    timeout_s: float = COMMAND_TIMEOUT_S

    def __post_init__(self) -> None:
        if not self.url.startswith(("http://", "https://")):
            raise ValidationError(f"--slurmrestd {self.url!r}: give an http:// or https:// URL such as "
                                  "http://127.0.0.1:6820 (unix sockets are not supported)")
        if not self.token:
            raise ValidationError(f"--slurmrestd: no JWT: set {TOKEN_ENV} (export $(scontrol token)), the token "
                                  "slurmrestd authenticates the agent by")
        if self.user is None:
            token_user(self.token)  # names its user, or one error now

    @classmethod
    def from_env(cls, url: str, user: str | None = None, timeout_s: float = COMMAND_TIMEOUT_S) -> "SlurmRestReader":
        """The reader of ``url`` with the token of ``$SLURM_JWT`` (a :class:`ValidationError` when it is unset)."""
        return cls(url, os.environ.get(TOKEN_ENV, "").strip(), user, timeout_s)

    def get(self, endpoint: str) -> dict[str, Any]:
        """The JSON of ``GET /slurm/v0.0.38/<endpoint>``; :class:`SlurmUnavailable` on any failure."""
        address = f"{self.url.rstrip('/')}/slurm/{API_VERSION}/{endpoint}"
        headers = {"X-SLURM-USER-TOKEN": self.token, "Accept": "application/json"}
        headers["X-SLURM-USER-NAME"] = self.user or token_user(self.token)
        request = urllib.request.Request(address, headers=headers)
        start = time.perf_counter()
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                status, body = response.status, response.read()
        except urllib.error.HTTPError as exc:
            status, body = exc.code, exc.read()
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise SlurmUnavailable(f"slurm: slurmrestd GET {address} failed: {reason} (is slurmrestd up?)") from None
        log.debug("slurm: slurmrestd GET %s -> %d in %.1f ms", endpoint, status, 1000 * (time.perf_counter() - start))
        try:
            data = json.loads(body)
        except (json.JSONDecodeError, UnicodeDecodeError):
            first = body[:80].decode("utf-8", "replace").strip().splitlines()
            raise SlurmUnavailable(f"slurm: slurmrestd GET {address}: HTTP {status}, no JSON "
                                   f"({first[0] if first else 'empty body'!r})") from None
        errors = data.get("errors") or [] if isinstance(data, dict) else []
        if status != 200 or errors or not isinstance(data, dict):
            said = "; ".join(_error_text(e) for e in errors) or "no error given"
            raise SlurmUnavailable(f"slurm: slurmrestd GET {address}: HTTP {status}: {said}")
        return data

    def nodes_json(self) -> dict[str, Any]:
        """What ``sinfo --json`` prints: ``{"nodes": [...]}``."""
        return self.get("nodes")

    def jobs_json(self) -> dict[str, Any]:
        """What ``squeue --json`` prints: ``{"jobs": [...]}``."""
        return self.get("jobs")


def token_user(token: str) -> str:
    """The user a Slurm JWT names (its ``sun`` claim); a :class:`ValidationError` when the token has none."""
    try:
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        return str(claims["sun"])
    except (IndexError, ValueError, KeyError, TypeError):
        raise ValidationError("--slurmrestd: the JWT in SLURM_JWT names no user (no 'sun' claim): give "
                              "--slurmrestd-user NAME") from None


def _error_text(error: Any) -> str:
    if isinstance(error, dict):
        parts = [str(error[k]) for k in ("description", "error") if error.get(k)]
        return " ".join(parts) or json.dumps(error)
    return str(error)
