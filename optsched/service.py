"""The solve service: ``optsched serve`` answers rounds over HTTP, so a scheduler written in any language pays
optsched's start-up (Python, OR-Tools, numpy: about 1-2 s) once instead of on every round (issue 16).

An ASGI application on Starlette, served by uvicorn (``pip install -e ".[serve]"``); ``docs/integration.md``
is the reference. Endpoints:

* ``POST /solve``: the body is a round (``optsched.round/1``), or an envelope ``{"round": {...}, "method":
  ..., "time_limit": ..., "seed": ..., "defer_unreachable": ..., "backend": ..., "partitions": ...,
  "on_invalid_job": ...}`` (``on_invalid_job``: the mode of a round that does not state one); the
  same options may come as query parameters (``/solve?method=heuristic&time_limit=2``), each in one place
  and once only (a repeated query parameter is a 400 naming it). Answers 200 with the decision
  (``optsched.decision/1``).
* ``GET /health``: ``{"status": "ok", "version", "methods": {kind: [method, ...]}, "workers"}``.
* ``GET /schemas`` lists the JSON Schemas; ``GET /schemas/{name}`` (``round``, ``decision``,
  ``perf-params``, also as ``round.schema.json``) serves one.

Errors answer ``{"error": "optsched: error: <one line>"}``, the line ``optsched solve`` prints for the same
input: 400 for malformed JSON, a bad round or bad options (``ValidationError``, ``UnknownNameError``), 422
for a round without a feasible decision (``InfeasibleError``: the admitted guarantees cannot all be met),
413 for a body over the size cap, 404 for an unknown path or schema, 500 for an internal error (logged with
its traceback).

Rules:

* **Time limit.** The clock of a request starts when the request arrives, before its body is read, and
  covers waiting for a worker, parsing, the table, the heuristic and the solver (``clock_start`` of
  :func:`optsched.solve`); a request the limit cuts short answers 200 with status ``partial`` or
  ``heuristic-fallback``, as ``optsched solve`` does. The server caps a request's limit at
  ``max_time_limit`` (400 above it).
* **Concurrency.** Solving is CPU-bound and runs off the event loop on a pool of ``workers`` threads
  (default: the number of CPUs); requests beyond that wait for a worker (their time limit running). A
  request a worker takes with less than half its time limit left (:data:`MIN_LEFT_SHARE`) is answered
  503 with ``Retry-After`` (seconds until the earliest running request's limit ends), never a 200 with a
  decision the time left could not fill; every 200 and every 503 reports the seconds the request waited, in
  the field ``queued_seconds`` of its body (:data:`QUEUED_FIELD`; a 200's at the decision's top level, beside
  ``solve_seconds``) and in the header ``X-Optsched-Queued-Seconds`` (:data:`QUEUED_HEADER`); they count in
  its time limit, not in the decision's ``solve_seconds``. A request whose client hangs up gives its worker
  back within a moment (next rule).
* **Disconnects.** While a request waits for a worker or solves, the service looks every
  :data:`DISCONNECT_POLL_S` at whether its client hung up; if so, the request's solve is cancelled
  (``optsched.solve(cancel=...)``, :mod:`optsched.core.deadline`, "Cancellation"): a request not yet
  started is not solved, and a running one has no time left from then on, so that every step stops at
  its next look at its deadline (the table, the heuristics, building the model) and a CP-SAT search stops
  within about 0.05 s (``stop_search``). The worker is free again within a moment, the hang-up is logged
  (INFO) and nothing is answered. What does not stop early: parsing the round's JSON (before the solve
  starts), the parts of a partitioned solve (``partitions``, solved in other processes) and HiGHS run
  in-process through ``highspy`` (``backend`` ``highs`` with the ``highs`` extra: it stops at its own time
  limit, which the request's bounds) and the HiGHS run of the ``switch`` back end after a CP-SAT stall (the call
  returns at once; HiGHS stops at its limit); a CBC or ``highs`` binary process is killed within about 0.05 s
  (:mod:`optsched.formulations.hard_stop`).
* **Sharing.** Each request parses its own round and gets a fresh policy (:func:`optsched.solve`), so
  requests share no mutable state; what they share is read-only: the catalogue, the registries and pure, thread-safe
  memoised functions of the performance model.
* **Size.** A body over ``max_body_bytes`` (default 64 MiB, about 300,000 jobs) is refused with 413
  before it is parsed.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import math
import os
import socket
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, AsyncIterator, Mapping, Sequence

from optsched import __version__
from optsched.core.checks import json_int
from optsched.core.errors import InfeasibleError, OptschedError, UnknownNameError, ValidationError, one_line
from optsched.core.jsonio import parse_json_text
from optsched.core.kinds import round_kinds
from optsched.core.round import RoundProblem
from optsched.policies.options import DEFAULT_TIME_LIMIT
from optsched.policies.registry import methods_of
from optsched.rounds.rubick.admission import DEFER_OPTION as DEFER
from optsched.policies.solve import solve
from optsched.schemas import SCHEMA_NAMES, load_schema

log = logging.getLogger(__name__)

#: options of ``POST /solve`` (query parameter or envelope field) and their types
OPTIONS: dict[str, type] = {"method": str, "time_limit": float, "seed": int, "defer_unreachable": bool,
                            "backend": str, "partitions": int, "on_invalid_job": str}
#: default cap of a request body, bytes
DEFAULT_MAX_BODY_BYTES = 64 * 1024 * 1024
#: default cap of a request's time limit, seconds
DEFAULT_MAX_TIME_LIMIT = 600.0


@dataclass(frozen=True)
class ServiceConfig:
    """Limits of a service (module docstring): body size, time limit per request, solver threads."""

    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_time_limit: float = DEFAULT_MAX_TIME_LIMIT
    workers: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.max_body_bytes, bool) or not isinstance(self.max_body_bytes, int) \
                or self.max_body_bytes < 1:
            raise ValidationError(f"max_body_bytes must be a positive integer, got {self.max_body_bytes!r}")
        if isinstance(self.max_time_limit, bool) or not isinstance(self.max_time_limit, (int, float)) \
                or not self.max_time_limit > 0:
            raise ValidationError(f"max_time_limit must be a positive number of seconds, got {self.max_time_limit!r}")
        if isinstance(self.workers, bool) or not isinstance(self.workers, int) or self.workers < 0:
            raise ValidationError(f"workers must be an integer >= 0 (0: one per CPU), got {self.workers!r}")

    @property
    def threads(self) -> int:
        return self.workers or os.cpu_count() or 1


class RequestError(Exception):
    """An HTTP error answer: ``status`` and the one-line ``message``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _option(name: str, value: Any, from_query: bool) -> Any:
    """``value`` of option ``name`` as its type (:data:`OPTIONS`); query strings are converted, and in the body
    a number with an integral value is an integer (``"seed": 1.0``; :func:`~optsched.core.checks.json_int`)."""
    kind = OPTIONS[name]
    where = f"option {name!r}"
    if from_query:
        text = str(value)
        try:
            if kind is bool:
                if text.lower() not in ("true", "false", "1", "0"):
                    raise ValueError
                return text.lower() in ("true", "1")
            return kind(text)
        except ValueError:
            raise ValidationError(f"{where}: expected {kind.__name__}, got {text!r}") from None
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if kind is int:
        value = json_int(value)
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise ValidationError(f"{where}: expected {kind.__name__}, got {value!r}")
    return value


def parse_solve_request(body: bytes, query: Mapping[str, str] | Sequence[tuple[str, str]],
                        config: ServiceConfig) -> tuple[Any, dict[str, Any]]:
    """The round (JSON) and the options of a ``POST /solve`` (module docstring); ``ValidationError`` for a
    malformed body, an unknown or doubly given option (a query parameter repeated, or given in the query and
    in the body), or a time limit above the server's cap. ``query``: the parameters as a mapping, or as the
    (name, value) pairs of the query string, repeats included."""
    pairs = list(query.items()) if isinstance(query, Mapping) else list(query)
    repeated = [(k, n) for k, n in Counter(k for k, _ in pairs).items() if n > 1]
    if repeated:
        k, n = repeated[0]
        raise ValidationError(f"query: parameter {k!r} given {n} times; give it once")
    query = dict(pairs)
    try:
        text = body.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValidationError(f"request body: not UTF-8 text ({exc})") from None
    data = parse_json_text(text, "request body")
    if not isinstance(data, dict):
        raise ValidationError(f"request body: expected a JSON object (a round, or {{\"round\": ...}}), got "
                              f"{type(data).__name__}")
    options: dict[str, Any] = {}
    if "round" in data and "kind" not in data:
        unknown = sorted(set(data) - {"round", *OPTIONS})
        if unknown:
            raise ValidationError(f"request body: unknown field(s) {', '.join(unknown)}; an envelope holds round and "
                                  f"the options {', '.join(OPTIONS)}")
        options = {k: _option(k, v, False) for k, v in data.items() if k != "round" and v is not None}
        data = data["round"]
    unknown = sorted(set(query) - set(OPTIONS))
    if unknown:
        raise ValidationError(f"query: unknown parameter(s) {', '.join(unknown)}; known: {', '.join(OPTIONS)}")
    for k, v in query.items():
        if k in options:
            raise ValidationError(f"option {k!r} given both in the query and in the body; give it once")
        options[k] = _option(k, v, True)
    limit = options.get("time_limit", DEFAULT_TIME_LIMIT)
    if limit > config.max_time_limit:
        raise ValidationError(f"option 'time_limit': {limit:g} s exceeds this server's cap of "
                              f"{config.max_time_limit:g} s (optsched serve --max-time-limit)")
    return data, options


def solve_request(data: Any, options: Mapping[str, Any], clock_start: float,
                  cancel: threading.Event | None = None) -> dict[str, Any]:
    """Parse the round ``data`` and solve it with ``options`` (module docstring), the time limit counted
    from ``clock_start`` and the solve ended early once ``cancel`` is set (``optsched.solve``); the decision as
    JSON. Raises what :func:`optsched.solve` raises."""
    problem = RoundProblem.from_dict(data, on_invalid_job=options.get("on_invalid_job"))
    extras = {DEFER: True} if options.get("defer_unreachable") else {}
    decision = solve(problem, options.get("method", "exact"), options.get("time_limit", DEFAULT_TIME_LIMIT),
                     options.get("seed", 0), clock_start=clock_start, partitions=options.get("partitions"),
                     backend=options.get("backend", "auto"), cancel=cancel, **extras)
    return decision.to_dict()


#: a request a worker takes with less than this share of its time limit left is answered 503 (module
#: docstring, "Concurrency"): what is left would not buy a decision worth returning
MIN_LEFT_SHARE = 0.5
#: the response header that reports the seconds a request waited for a worker
QUEUED_HEADER = "X-Optsched-Queued-Seconds"
#: the field of a 200's decision (top level, beside ``solve_seconds``) and of a 503's body that reports them
QUEUED_FIELD = "queued_seconds"
#: seconds between two looks, while a request is waiting or solving, at whether its client hung up
DISCONNECT_POLL_S = 0.1
#: the status logged for a request whose client hung up (nginx's "client closed request"; nobody receives it)
CLIENT_CLOSED = 499


class TooLate(Exception):
    """A request that waited for a worker until less than :data:`MIN_LEFT_SHARE` of its time limit was left;
    ``retry_after``: whole seconds until the earliest running request's limit ends."""

    def __init__(self, waited: float, limit: float, workers: int, retry_after: int) -> None:
        self.waited = waited
        super().__init__(f"the request waited {waited:.2f} s of its {limit:g} s time limit for one of this server's "
                         f"{workers} worker(s), too long to solve in what is left; retry after {retry_after} s "
                         "(or start the server with more --workers)")
        self.retry_after = retry_after


class Abandoned(Exception):
    """A request whose client hung up: not solved, or its solve cancelled (module docstring, "Disconnects")."""


def start_or_refuse(data: Any, options: Mapping[str, Any], started: float, running: dict[int, float],
                    workers: int, cancel: threading.Event | None = None) -> tuple[dict[str, Any], float]:
    """Run on a worker: :class:`Abandoned` when ``cancel`` is already set (the client hung up while the request
    waited), :class:`TooLate` when the request has waited until less than :data:`MIN_LEFT_SHARE` of its time limit
    is left, else :func:`solve_request` (ended early once ``cancel`` is set) and the seconds it waited (module
    docstring)."""
    now = time.perf_counter()
    waited = now - started
    if cancel is not None and cancel.is_set():
        raise Abandoned()
    limit = float(options.get("time_limit", DEFAULT_TIME_LIMIT))
    if limit - waited < MIN_LEFT_SHARE * limit:
        ends = [end for end in list(running.values()) if end > now]
        raise TooLate(waited, limit, workers, max(1, math.ceil(min(ends) - now)) if ends else 1)
    key = id(data)
    running[key] = started + limit
    try:
        return solve_request(data, options, started, cancel), waited
    finally:
        running.pop(key, None)


def with_queued(decision: Mapping[str, Any], queued: float) -> dict[str, Any]:
    """The decision's JSON with :data:`QUEUED_FIELD` (``queued`` seconds, to the millisecond) right after
    ``solve_seconds`` (module docstring, "Concurrency")."""
    out: dict[str, Any] = {}
    for key, value in decision.items():
        out[key] = value
        if key == "solve_seconds":
            out[QUEUED_FIELD] = round(queued, 3)
    out.setdefault(QUEUED_FIELD, round(queued, 3))
    return out


def _status_of(exc: Exception) -> int:
    if isinstance(exc, InfeasibleError):
        return 422
    if isinstance(exc, OptschedError):
        return 400
    return 500


def create_app(config: ServiceConfig | None = None) -> Any:
    """The ASGI application (module docstring). Needs ``starlette`` (extra ``serve``)."""
    try:
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import JSONResponse, Response
        from starlette.routing import Route
    except ImportError:  # pragma: no cover - exercised only without the extra
        raise ValidationError("the solve service needs starlette and uvicorn: pip install 'optsched[serve]'") from None
    config = config or ServiceConfig()
    pool: dict[str, ThreadPoolExecutor] = {}
    running: dict[int, float] = {}  # request id -> when its time limit ends (time.perf_counter())

    def error(status: int, message: str) -> Any:
        return JSONResponse({"error": f"optsched: error: {one_line(message)}"}, status_code=status)

    async def read_body(request: Request) -> bytes:
        length = request.headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > config.max_body_bytes:
            raise RequestError(413, f"request body of {int(length)} bytes exceeds this server's cap of "
                                    f"{config.max_body_bytes} bytes (optsched serve --max-body-mb)")
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > config.max_body_bytes:
                raise RequestError(413, f"request body exceeds this server's cap of {config.max_body_bytes} bytes "
                                        "(optsched serve --max-body-mb)")
            chunks.append(chunk)
        return b"".join(chunks)

    async def run_until_disconnect(request: Request, data: Any, options: Mapping[str, Any], started: float,
                                   cancel: threading.Event) -> tuple[dict[str, Any], float]:
        """:func:`start_or_refuse` on a worker, ``cancel`` set as soon as the client hangs up (or this task is
        cancelled): then :class:`Abandoned`, once the worker has let the request go."""
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(pool["solve"], start_or_refuse, data, options, started, running,
                                      config.threads, cancel)
        try:
            while True:
                done, _ = await asyncio.wait({future}, timeout=DISCONNECT_POLL_S)
                if done:
                    return future.result()
                if await request.is_disconnected():
                    cancel.set()
                    with contextlib.suppress(Exception):  # what a cancelled solve returns or raises: nobody reads it
                        await future
                    raise Abandoned()
        except asyncio.CancelledError:
            cancel.set()  # this task cancelled (the server shutting down, the connection lost): the worker stops soon
            raise

    async def solve_endpoint(request: Request) -> Any:
        started = time.perf_counter()  # the time limit covers the wait for a worker and the parsing
        cancel = threading.Event()  # set when the client hangs up: the solve stops (module docstring)
        try:
            body = await read_body(request)
            data, options = parse_solve_request(body, request.query_params.multi_items(), config)
            decision, queued = await run_until_disconnect(request, data, options, started, cancel)
        except Abandoned:
            log.info("client of POST /solve disconnected after %.2f s; its solve was cancelled",
                     time.perf_counter() - started)
            return Response(status_code=CLIENT_CLOSED)
        except TooLate as exc:
            return JSONResponse({"error": f"optsched: error: {one_line(str(exc))}",
                                 QUEUED_FIELD: round(exc.waited, 3)}, status_code=503,
                                headers={"Retry-After": str(exc.retry_after), QUEUED_HEADER: f"{exc.waited:.3f}"})
        except RequestError as exc:
            return error(exc.status, exc.message)
        except Exception as exc:  # noqa: BLE001 - every failure becomes one HTTP answer
            status = _status_of(exc)
            if status == 500:
                log.exception("internal error while solving a request")
                return error(500, f"internal error: {type(exc).__name__}: {exc}")
            return error(status, str(exc))
        return JSONResponse(with_queued(decision, queued), headers={QUEUED_HEADER: f"{queued:.3f}"})

    async def health(request: Request) -> Any:
        return JSONResponse({"status": "ok", "version": __version__, "workers": config.threads,
                             "methods": {kind: list(methods_of(kind)) for kind in round_kinds()}})

    async def schemas(request: Request) -> Any:
        return JSONResponse({"schemas": [f"/schemas/{n}" for n in SCHEMA_NAMES]})

    async def schema(request: Request) -> Any:
        name = request.path_params["name"].removesuffix(".json").removesuffix(".schema")
        try:
            return JSONResponse(load_schema(name))
        except UnknownNameError as exc:
            return error(404, str(exc))

    async def not_found(request: Request, exc: Exception) -> Any:
        status = getattr(exc, "status_code", 404)
        return error(status, f"{request.method} {request.url.path}: {getattr(exc, 'detail', 'not found')}; "
                             "endpoints: POST /solve, GET /health, GET /schemas, GET /schemas/{name}")

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        pool["solve"] = ThreadPoolExecutor(max_workers=config.threads, thread_name_prefix="optsched-solve")
        try:
            yield
        finally:
            pool.pop("solve").shutdown(wait=False, cancel_futures=True)

    routes = [Route("/solve", solve_endpoint, methods=["POST"]), Route("/health", health, methods=["GET"]),
              Route("/schemas", schemas, methods=["GET"]), Route("/schemas/{name}", schema, methods=["GET"])]
    return Starlette(routes=routes, lifespan=lifespan, exception_handlers={404: not_found, 405: not_found})


def listen_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host``:``port`` and listening, so that a busy port or a bad address fails before
    the service says it listens; ``ValidationError`` (one line naming the address and the reason) otherwise."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                             flags=socket.AI_PASSIVE)[0]
    except (OSError, UnicodeError) as exc:
        raise ValidationError(f"cannot listen on {host}:{port} (unknown host: {exc})") from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does: restarts reuse the port
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        reason = exc.strerror or str(exc)
        hint = "; pick another port or stop what uses it" if exc.errno == errno.EADDRINUSE else ""
        raise ValidationError(f"cannot listen on {host}:{port} ({reason[:1].lower()}{reason[1:]}){hint}") from None
    return sock


def serve(host: str = "127.0.0.1", port: int = 8000, config: ServiceConfig | None = None, *,
          log_level: str = "warning", sock: socket.socket | None = None) -> None:
    """Run the service with uvicorn until interrupted (``optsched serve``), on ``sock`` when given (from
    :func:`listen_socket`: the address is known to be free before anything is printed), else on ``host``:``port``
    (bound here; a busy port is a ``ValidationError``)."""
    try:
        import uvicorn
    except ImportError:
        raise ValidationError("the solve service needs starlette and uvicorn: pip install 'optsched[serve]'") from None
    sock = sock or listen_socket(host, port)
    server = uvicorn.Server(uvicorn.Config(create_app(config), log_level=log_level))
    with sock:
        server.run(sockets=[sock])


__all__ = ["Abandoned", "CLIENT_CLOSED", "DEFAULT_MAX_BODY_BYTES", "DEFAULT_MAX_TIME_LIMIT", "DISCONNECT_POLL_S",
           "MIN_LEFT_SHARE", "OPTIONS", "QUEUED_FIELD", "QUEUED_HEADER",
           "RequestError", "ServiceConfig", "TooLate", "create_app", "listen_socket", "parse_solve_request", "serve",
           "solve_request", "start_or_refuse", "with_queued"]
