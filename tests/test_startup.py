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
