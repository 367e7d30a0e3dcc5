"""Crius Algorithm 1 (Cell-based job scheduling, Sec. 6.1) on one round, with search depth and
opportunistic execution; a function of (round, table) -> :class:`~optsched.rounds.crius.decision.Schedule`.

Algorithm 1 is event-driven (SchedArrival for arrivals, SchedDeparture for completions). A round sees
its queued jobs as arrivals and its free GPUs as departures' releases, and runs, on a virtual copy of
the cluster (every change is virtual until the decision is returned, Algorithm 1 lines 8 and 13):

0. Deadlines (deadline objective, Sec. 8.5: "strict deadline guarantees for each scheduled job"):
   dropped running jobs are suspended, and so is every running deadline job whose current Cell misses
   its deadline (it may not stay; admission did not drop it, so some Cell meets the deadline). After
   step 1 each of the latter (by submission) is rescaled -- a scheduling choice of its own, of one
   scaling, so when ``D >= 1`` -- to its best-weight Cell that meets the deadline and fits as is (it
   counts as rescaled), else stays
   suspended (our choice: rescaling costs less than suspension, and it is the paper's only way to
   keep the job within its deadline; suspending first leaves step 1 the room admission assumed).
1. **Opportunistic execution**: the protected pending job (:mod:`~optsched.rounds.crius.admission`)
   starts on its candidate Cell that costs least: the best-weight Cell that fits as is, else the Cell
   with the largest ``weight - sum(suspended weights + preempt penalty)`` when opportunistic jobs on its
   GPU type are suspended, least weight first (then latest submitted), until it fits; suspended jobs
   that still fit where they ran afterwards are kept.
2. **SchedArrival**: every other queued job, by submission time then name, gets
   ``CellBasedSched(job)`` and is pended when it returns no choice.
3. **SchedDeparture** (line 12, "extra scheduling for utilizing released resource"): ``CellBasedSched()``,
   one scheduling choice: at most ``D`` upgrades, each the one of largest gain among the jobs that hold
   a Cell (running or placed this round) to a candidate Cell of more weight that fits when the job's
   own GPUs are released. (The text runs it "if there are no pending jobs"; the pseudocode, followed
   here, runs it always: a job pended this round found no room.)

``CellBasedSched(job)`` (lines 14-20): the choices are the job's candidate Cells that fit as they are
and, when ``D > 0``, the ones that fit after ``ScaleResource`` rescales jobs holding Cells; ``BestPerf``
takes the choice of the largest gain (``weight - losses of rescaled jobs - penalties``), ties to the one
without rescaling, and applies it virtually (``VirtualAlloc``: the jobs placed so far count as running
for every later choice).

``ScaleResource(job, Cell)`` (the search depth ``D``, Sec. 6.1: "a hyperparameter called search depth,
which is the maximum job scaling times for generating a scheduling choice in Algorithm 1 line 18"):
a depth-first search over sequences of at most ``D`` rescalings -- per scheduling choice, not per
round -- of jobs that hold GPUs of the Cell's type: running jobs and jobs placed earlier in the round
("This exploration tries to scale the GPU types and numbers of both running jobs and new-coming
jobs"); a rescaling moves one such job to another of its candidate Cells with fewer GPUs of that
type (fewer GPUs, or another type) where it fits. Constants of our own, not the paper's (it does
not say how the choices are enumerated): at every step the :data:`BRANCHING` moves of least loss per
freed GPU that fit are tried, and ScaleResource is tried on at most :data:`SCALED_CELLS` of the job's
candidate Cells (best weight first); the search stops at the first sequence after which the Cell
fits along a branch and keeps the best gain found; its cost grows as ``BRANCHING ** D``. A search
that fails for a (GPU type, part size, parts) fails again until some rescaling succeeds, so it is
remembered. Over a round this rescales at most ``D`` running jobs per scheduling choice
(:func:`~optsched.rounds.crius.choice.depth_bound`).

Every placement is best fit (:class:`~optsched.heuristics.placement.NodeLedger`: a part goes to the
node of its type with the fewest free GPUs that holds it, the job's current nodes first). The result
passes :func:`~optsched.rounds.crius.feasibility.violations`. With a ``deadline`` the steps stop taking
jobs once it passes (the schedule is then incomplete, status ``partial``).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from optsched.core.deadline import Deadline
from optsched.heuristics.crius_state import EPS, CellState
from optsched.rounds.crius.admission import CriusAdmission, admit
from optsched.rounds.crius.decision import Schedule
from optsched.rounds.crius.problem import CriusRound
from optsched.rounds.crius.table import CriusTable

#: moves tried at each step of ScaleResource (our constant: the paper does not say how choices are enumerated)
BRANCHING = 3
#: candidate Cells of a job ScaleResource is tried on (our constant, likewise)
SCALED_CELLS = 4


def _protect(st: CellState, j: int) -> None:
    """Step 1 of the module docstring."""
    t = st.t
    rows = [int(r) for r in st.rows(j)]
    for r in rows:
        if st.put(j, r):
            return
    best: tuple[float, int, list[int]] | None = None
    for r in rows:
        gtype = t.gpu_type[r]
        victims = [v for v in (t.index_of(n) for n in st.a.opportunistic)
                   if st.choice[v] is not None and t.gpu_type[st.choice[v].row] == gtype]  # type: ignore[union-attr]
        victims.sort(key=lambda v: (st.weight(v), -st.submit[v][0], st.submit[v][1]))
        weights = [st.weight(v) for v in victims]
        snap = st.snapshot([j, *victims])
        taken = 0
        placed = False
        for v in victims:
            st.put(v, None)
            taken += 1
            if st.put(j, r):
                placed = True
                break
        st.rollback(snap)
        if placed:
            gain = float(t.value[r]) - sum(weights[:taken]) - taken * st.p.preempt_cost
            if best is None or gain > best[0] + EPS:
                best = (gain, r, victims[:taken])
    if best is None:
        return
    _, r, taken_jobs = best
    for v in taken_jobs:
        st.put(v, None)
    st.put(j, r)
    for v in taken_jobs:
        st.keep(v)
    if any(st.choice[v] is None for v in taken_jobs):
        st.pinned.add(j)


def _moves(st: CellState, gtype: str, exclude: set[int]) -> list[tuple[float, int, int, float]]:
    """Rescalings that free GPUs of ``gtype``: (loss per freed GPU, job, row, loss), least first. Any job that
    holds a Cell (running or placed earlier in the round) may be rescaled (:meth:`CellState.movable`)."""
    t = st.t
    out: list[tuple[float, int, int, float]] = []
    for v in range(len(st.choice)):
        c = st.choice[v]
        if c is None or v in exclude or not st.movable(v) or t.gpu_type[c.row] != gtype:
            continue
        cur_w, cur_g = float(t.value[c.row]), int(t.gpus[c.row])
        for r in st.rows(v):
            r = int(r)
            freed = cur_g - (int(t.gpus[r]) if t.gpu_type[r] == gtype else 0)
            if freed <= 0 or r == c.row:
                continue
            loss = cur_w - float(t.value[r]) + st.change_cost(v)
            out.append((loss / freed, v, r, loss))
    out.sort()
    return out


def _scale(st: CellState, j: int, row: int, deadline: Deadline | None,
           moves: dict[str, list[tuple[float, int, int, float]]], dead: set[tuple[int, int]]
           ) -> tuple[float, list[tuple[int, int]]] | None:
    """ScaleResource for job ``j`` on ``row`` (module docstring): the best (gain, moves) found, or None.
    ``moves`` keeps :func:`_moves` per GPU type for one CellBasedSched call (the search changes only the
    jobs it moves, which it excludes, so the list holds along every branch); ``dead`` the moves to
    another GPU type that did not fit at the root of a search (every search of the call starts from the
    same state and only takes GPUs of other types, so they never fit deeper either)."""
    t = st.t
    gtype = t.gpu_type[row]
    if gtype not in moves:
        moves[gtype] = _moves(st, gtype, {j})
    listed = moves[gtype]
    target = float(t.value[row])
    best: list[tuple[float, list[tuple[int, int]]]] = []

    def dfs(depth: int, moved: list[tuple[int, int]], loss: float) -> None:
        if deadline is not None and deadline.expired():
            return
        tried = 0
        gone = {v for v, _ in moved}
        floor = best[0][0] + EPS - target + loss if best else None
        for _, v, r, step_loss in listed:
            if tried >= BRANCHING:
                break
            if (floor is not None and -step_loss <= floor) or v in gone or (v, r) in dead:
                continue
            snap = st.snapshot([v])
            if not st.put(v, r):
                if depth == 0 and t.gpu_type[r] != gtype:
                    dead.add((v, r))
                continue
            tried += 1
            path = [*moved, (v, r)]
            snap_j = st.snapshot([j])
            if st.put(j, row):
                gain = target - loss - step_loss
                if not best or gain > best[0][0] + EPS:
                    best[:] = [(gain, path)]
                    floor = gain + EPS - target + loss
                st.rollback(snap_j)
            elif depth + 1 < st.p.search_depth:
                dfs(depth + 1, path, loss + step_loss)
                floor = best[0][0] + EPS - target + loss if best else None
            st.rollback(snap)

    if st.p.search_depth > 0:
        dfs(0, [], 0.0)
    return best[0] if best else None


def _cell_based_sched(st: CellState, j: int, failed: set[tuple[str, int, int]], deadline: Deadline | None) -> bool:
    """CellBasedSched(job) (module docstring); True when the job got a Cell."""
    t = st.t
    rows = [int(r) for r in st.rows(j)]
    direct = None
    for r in rows:
        if st.put(j, r):
            direct = r
            break
    best_gain = float(t.value[direct]) if direct is not None else 0.0
    if direct is not None:
        st.put(j, None)
    plan: tuple[int, list[tuple[int, int]]] | None = None
    if st.p.search_depth > 0:
        tried = 0
        moves: dict[str, list[tuple[float, int, int, float]]] = {}
        dead: set[tuple[int, int]] = set()
        for r in rows:
            if tried >= SCALED_CELLS or float(t.value[r]) <= best_gain + EPS:
                break
            key = (t.gpu_type[r], int(t.unit[r]), int(t.parts[r]))
            if key in failed:
                continue
            tried += 1
            got = _scale(st, j, r, deadline, moves, dead)
            if got is None:
                failed.add(key)
            elif got[0] > best_gain + EPS:
                best_gain, plan = got[0], (r, got[1])
    if plan is not None:
        r, moves = plan
        before = set(st.rescaled)
        snap = st.snapshot([j, *(v for v, _ in moves)])
        if all(st.put(v, vr) for v, vr in moves) and st.put(j, r):  # replays the search: it fits
            for v, _ in moves:
                st.mark_changed(v)
            failed.clear()
            return True
        st.rollback(snap)  # pragma: no cover - the search found this sequence on the same state
        st.rescaled = before
    if direct is not None:
        st.put(j, direct)
        return True
    return False


def _upgrade(st: CellState, deadline: Deadline | None) -> None:
    """CellBasedSched() of SchedDeparture (module docstring): at most ``D`` upgrades, largest gain first."""
    t = st.t
    for _ in range(st.p.search_depth):
        best: tuple[float, int, int] | None = None
        for j in range(len(st.choice)):
            if deadline is not None and deadline.expired():
                return
            if not st.movable(j):
                continue
            cur = float(t.value[st.choice[j].row])  # type: ignore[union-attr]
            for r in st.rows(j):
                r = int(r)
                gain = float(t.value[r]) - cur - st.change_cost(j)
                if gain <= EPS or (best is not None and gain <= best[0] + EPS):
                    break
                snap = st.snapshot([j])
                fits = st.put(j, r)
                st.rollback(snap)
                if fits:
                    best = (gain, j, r)
                    break
        if best is None:
            return
        _, j, r = best
        st.put(j, r)
        st.mark_changed(j)


def _late_running(problem: CriusRound, table: CriusTable, admission: CriusAdmission) -> list[int]:
    """Running deadline jobs (deadline objective) whose current Cell misses the deadline and that are not
    dropped, by submission (step 0 of the module docstring)."""
    if not problem.deadline_aware:
        return []
    return sorted((j for j, job in enumerate(problem.jobs)
                   if job.deadline is not None and table.current_row[j] >= 0 and job.name not in admission.dropped
                   and not table.deadline_ok[table.current_row[j]]),
                  key=lambda j: (problem.jobs[j].submit_time, problem.jobs[j].name))


def algorithm1(problem: CriusRound, table: CriusTable, admission: CriusAdmission | None = None, *,
               deadline: Deadline | None = None,
               row_filter: Callable[[int, np.ndarray], np.ndarray] | None = None) -> Schedule:
    """Crius Algorithm 1 on the round (module docstring); ``row_filter(j, rows)`` narrows the Cells job index
    ``j`` may take (every choice, rescaling included: the ablations of Sec. 8.6, :mod:`.crius_ablations`)."""
    admission = admission or admit(problem, table)
    st = CellState(problem, table, admission)
    st.row_filter = row_filter
    complete = True
    for name in admission.dropped:
        j = table.index_of(name)
        if st.choice[j] is not None:
            st.put(j, None)
    late = _late_running(problem, table, admission)
    for j in late:
        st.put(j, None)
    pended: list[str] = []
    if admission.protected is not None:
        _protect(st, table.index_of(admission.protected))
    for j in late:
        for r in st.rows(j):
            if problem.search_depth <= 0:
                break
            if st.put(j, int(r)):
                st.mark_changed(j)
                break
    failed: set[tuple[str, int, int]] = set()
    order = sorted((job.submit_time, job.name, j) for j, job in enumerate(problem.jobs)
                   if st.choice[j] is None and not st.running[j] and job.name not in admission.dropped
                   and job.name != admission.protected)
    for _, name, j in order:
        if deadline is not None and deadline.expired():
            complete = False
            break
        if not _cell_based_sched(st, j, failed, deadline):
            pended.append(name)
    if complete:
        _upgrade(st, deadline)
        complete = not (deadline is not None and deadline.expired())
    choices = {table.jobs[j]: c for j, c in enumerate(st.choice) if c is not None}
    msg = []
    if pended:
        msg.append(f"pended: {len(pended)} job(s)")
    if not complete:
        msg.append("partial: the time limit ran out during Algorithm 1; the jobs it had not reached wait or keep "
                   "their Cells")
    return Schedule(choices, admission, "; ".join(msg), complete)


__all__ = ["BRANCHING", "SCALED_CELLS", "algorithm1"]
