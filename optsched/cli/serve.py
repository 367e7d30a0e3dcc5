"""``optsched serve``: answer rounds over HTTP (:mod:`optsched.service`; needs the ``serve`` extra)."""

from __future__ import annotations

import argparse

from optsched.cli.common import PROG, err
from optsched.core.errors import ValidationError
from optsched.service import DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_TIME_LIMIT, ServiceConfig, listen_socket, serve


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``optsched serve``."""
    p.description = ("Run the solve service (docs/integration.md): POST /solve with a round answers the decision; "
                     "GET /health; GET /schemas/{round,decision,perf-params}. Needs the 'serve' extra (starlette, "
                     "uvicorn).")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port to listen on (8000)")
    p.add_argument("--workers", type=int, default=0, metavar="N",
                   help="threads that solve requests at the same time (default: one per CPU)")
    p.add_argument("--max-body-mb", type=float, default=DEFAULT_MAX_BODY_BYTES / 2 ** 20, metavar="MB",
                   help=f"largest request body in MiB ({DEFAULT_MAX_BODY_BYTES / 2 ** 20:g})")
    p.add_argument("--max-time-limit", type=float, default=DEFAULT_MAX_TIME_LIMIT, metavar="S",
                   help=f"largest time limit a request may ask for, seconds ({DEFAULT_MAX_TIME_LIMIT:g})")


def run(args: argparse.Namespace) -> int:
    """Serve until interrupted."""
    if not 0 < args.port < 65536:
        raise ValidationError(f"--port must be in 1..65535, got {args.port}")
    if not args.max_body_mb > 0:
        raise ValidationError(f"--max-body-mb must be positive, got {args.max_body_mb}")
    config = ServiceConfig(max_body_bytes=int(args.max_body_mb * 2 ** 20), max_time_limit=args.max_time_limit,
                           workers=args.workers)
    sock = listen_socket(args.host, args.port)  # bound before saying so: a busy port is one line, exit 2
    err(f"{PROG} serve: listening on http://{args.host}:{args.port} (POST /solve, GET /health, GET /schemas)")
    serve(args.host, args.port, config, log_level="info" if args.verbose else "warning", sock=sock)
    return 0
