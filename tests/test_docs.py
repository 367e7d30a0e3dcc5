"""The reference pages stay true to the code: ``docs/rounds.md``'s table "Round kinds at a glance"
lists every registered kind with exactly its methods, payload keys and generator flags, and the links
within the docs and the README point at headings that exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import optsched  # noqa: F401  (registers the kinds and methods)
from optsched.core.kinds import round_kind, round_kinds
from optsched.policies.registry import methods_of

from helpers import REPO_ROOT

DOCS = REPO_ROOT / "docs"


def _read(path: Path) -> str:
    if not path.exists():
        pytest.skip(f"{path.name} is not part of this checkout")
    return path.read_text(encoding="utf-8")


def _overview() -> dict[str, list[str]]:
    """Kind -> the cells of its row in "Round kinds at a glance"."""
    text = _read(DOCS / "rounds.md")
    section = text.split("## Round kinds at a glance", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    out = {}
    for line in rows:
        cells = [c.strip() for c in line.strip("|").split(" | ")]
        out[cells[0].strip("`")] = cells
    return out


def _ticked(cell: str) -> set[str]:
    return set(re.findall(r"`([^`]+)`", cell))


def test_the_kinds_table_lists_every_kind_with_its_methods_payload_and_flags() -> None:
    rows = _overview()
    assert set(rows) == set(round_kinds())
    for kind, cells in rows.items():
        _, _decides, methods, _objective, payload, flags, _section = cells
        assert _ticked(methods) == set(methods_of(kind)), kind
        assert "exact" in _ticked(methods)
        required, optional = round_kind(kind).payload.KEYS
        assert _ticked(payload) == {*required, *optional}, kind
        named = {f.removeprefix("--").replace("-", "_") for f in re.findall(r"--[a-z-]+", flags)}
        assert named and named <= set(round_kind(kind).generator_options), kind


def _slug(heading: str) -> str:
    """The anchor a Markdown renderer (GitHub's rules) gives a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(text: str) -> set[str]:
    return {_slug(h) for h in re.findall(r"^#+ (.*)$", text, re.M)}


@pytest.mark.parametrize("page", ["README.md", "docs/architecture.md", "docs/cli.md", "docs/rounds.md",
                                  "docs/simulation.md", "docs/integration.md", "docs/perf_model.md"])
def test_links_within_a_page_point_at_its_headings(page: str) -> None:
    text = _read(REPO_ROOT / page)
    anchors = _anchors(text)
    for target in re.findall(r"\]\(#([^)]+)\)", text):
        assert target in anchors, f"{page}: no heading for #{target}"
    for target, anchor in re.findall(r"\]\(([\w./-]+\.md)(?:#([^)]+))?\)", text):
        linked = (REPO_ROOT / page).parent.joinpath(target)
        assert linked.exists(), f"{page}: {target} does not exist"
        if anchor:
            assert anchor in _anchors(linked.read_text(encoding="utf-8")), f"{page}: no heading for {target}#{anchor}"


def test_the_readme_has_exactly_the_two_set_up_commands() -> None:
    """A fresh machine needs two commands, in this order: the main job on built-in defaults, then the
    tests (``.ci/run`` runs the second verbatim); the virtual environment is a prerequisite in prose."""
    text = _read(REPO_ROOT / "README.md")
    blocks: list[tuple[str, list[str]]] = []    # (info string, lines) of every fenced block
    inside: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("```"):
            if inside is None:
                inside = []
                blocks.append((line[3:].strip(), inside))
            else:
                inside = None
        elif inside is not None:
            inside.append(line)
    shell = ["\n".join(lines).strip() for info, lines in blocks if info in ("", "bash", "sh", "shell")]
    assert shell == ['pip install -e . && optsched simulate', 'pip install -e ".[test]" && python -m pytest']
    first_screen = "\n".join(text.splitlines()[:40])
    assert "Python >= 3.11" in first_screen and "venv" in first_screen


def _readme_python_tour() -> str:
    """The README's fenced ``python`` block (its Python tour)."""
    blocks = re.findall(r"^```python\n(.*?)^```", _read(REPO_ROOT / "README.md"), flags=re.S | re.M)
    assert len(blocks) == 1, "the README has one Python tour"
    return blocks[0]


def _claim_holds(claim: str, value: object) -> bool:
    """Whether ``value`` is what one element of a tour comment says: ``'text'`` equal, ``40.38...`` a number
    whose printed digits start so, ``~2e-08`` a number of at most that order (up to 10x it), a plain number equal
    to 4 significant digits."""
    claim = claim.strip()
    if claim[:1] in "'\"":
        return value == claim[1:-1]
    if not isinstance(value, (int, float)):
        return False
    if claim.startswith("~"):
        return abs(float(value)) <= 10 * abs(float(claim[1:]))
    if claim.endswith("..."):
        return repr(float(value)).startswith(claim[:-3])
    return f"{float(value):.4g}" == f"{float(claim):.4g}"


def test_the_readme_python_tour_prints_what_its_comments_say() -> None:
    """Issue 26: run the README's Python tour statement by statement; every expression whose comment is a
    value or a tuple of values (``# ('optimal', 40.38..., ~2e-08)``) must evaluate to it."""
    import ast
    source = _readme_python_tour()
    lines = source.splitlines()
    namespace: dict[str, object] = {}
    checked = 0
    for stmt in ast.parse(source).body:
        code = ast.Module(body=[stmt], type_ignores=[])
        if not isinstance(stmt, ast.Expr):
            exec(compile(code, "README.md", "exec"), namespace)  # noqa: S102 - the README's own code
            continue
        value = eval(compile(ast.Expression(stmt.value), "README.md", "eval"), namespace)  # noqa: S307
        comment = lines[stmt.end_lineno - 1].partition("#")[2].strip()
        if not re.match(r"^\(?['\"~\d]", comment):
            continue  # prose, not a value
        claims = [c for c in comment.strip("()").split(",") if c.strip()]
        values = value if isinstance(value, tuple) else (value,)
        assert len(claims) == len(values) and all(map(_claim_holds, claims, values)), (
            f"README Python tour, line {stmt.end_lineno}: prints {values!r}, its comment says {comment!r}")
        checked += 1
    assert checked >= 1
