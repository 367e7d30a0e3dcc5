"""Start-up (issue 26, item 4): ``optsched --version`` and ``--help`` import neither the solvers nor
numpy, since the packages ``optsched`` and ``optsched.core`` import their names on first use (PEP 562)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("numpy", "ortools", "pulp", "scipy", "optsched.policies", "optsched.rounds")


def _imported_after(code: str) -> set[str]:
    script = f"import sys\n{code}\nprint(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    return set(out.stdout.split())


def test_version_and_help_import_no_solver() -> None:
    for code in ("import optsched.cli as c\nc.main(['--version'])", "import optsched.cli as c\nc.main(['--help'])"):
        loaded = _imported_after(code)
        assert not [m for m in HEAVY if m in loaded], code


def test_the_package_names_still_resolve() -> None:
    loaded = _imported_after("import optsched\nassert optsched.solve and optsched.RubickRound and optsched.Job\n"
                             "from optsched import *\nassert RoundProblem and PolicyOptions and make_policy")
    assert "optsched.policies" in loaded
    kinds = subprocess.run([sys.executable, "-c", "from optsched.core.kinds import round_kinds; print(round_kinds())"],
                           cwd=REPO, capture_output=True, text=True, check=True, env={"PYTHONPATH": str(REPO)})
    assert "rubick" in kinds.stdout  # the registry registers the built-in kinds on first use


def test_a_heuristic_solve_imports_no_solver_library() -> None:
    """Issue 26, item 4: the solve path imports what it uses. A heuristic solve of a Rubick round imported
    OR-Tools (with pandas), networkx, pulp and SciPy, 0.83 s of a 1 s limit (``python -X importtime``): the
    exact formulations, the Crius operator graphs and SciPy's LP are now imported when they are used."""
    loaded = _imported_after("import optsched\nfrom optsched.rounds.rubick.generate import generate_rubick_round\n"
                             "optsched.solve(generate_rubick_round(4, 8, 12, 0), 'heuristic', 5.0)")
    assert not [m for m in ("ortools", "pulp", "networkx", "scipy", "pandas") if m in loaded]
    exact = _imported_after("import optsched\nfrom optsched.rounds.rubick.generate import generate_rubick_round\n"
                            "optsched.solve(generate_rubick_round(4, 8, 12, 0), 'exact', 5.0)")
    assert "ortools" in exact
