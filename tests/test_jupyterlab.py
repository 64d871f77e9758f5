"""The chapters as a learner opens them in JupyterLab (jupyterlab-myst), not only on the
site.

JupyterLab cannot resolve Sphinx roles: a ``{cite}`` shows "Citation Not Found", a
``{term}`` links to ``#``, a ``{doc}`` to a missing file, a ``{py:obj}`` stays raw text.
The chapters use plain links instead (``_ext/plain_links.py`` resolves their anchors on
the site and fails the build on a missing one). Solutions are folded in JupyterLab as
they are on the site (``tools/fold_solutions.py``).
"""

import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "book").glob("*.ipynb"))
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "_ext"))

import fold_solutions  # noqa: E402
from plain_links import entry_url  # noqa: E402

ROLE = re.compile(r"\{(cite(:[a-z]+)?|term|doc|py:[a-z]+|ref|numref|eq|download)\}`")
LINK = re.compile(r"\]\(([^)\s]+)\)")


def markdown(path: Path) -> str:
    nb = json.loads(path.read_text(encoding="utf-8"))
    return "\n".join(
        "".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_roles_jupyterlab_cannot_render(path):
    text = markdown(path)
    found = sorted({m.group(0) for m in ROLE.finditer(text)})
    assert not found, (
        f"{path.name} uses {found}: JupyterLab cannot render these roles; write a "
        "plain link, [text](glossary.md#term-...), [`name`](api.md#companion....), "
        "or the "
        "paper's address"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_links_go_to_files_that_exist(path):
    missing = []
    for target in LINK.findall(markdown(path)):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        file = target.split("#", 1)[0]
        if not (path.parent / file).exists():
            missing.append(target)
    assert not missing, f"{path.name} links to files that do not exist: {missing}"


def test_every_reference_is_cited_by_a_chapter():
    from docutils.nodes import make_id
    from pybtex.database import parse_file

    text = "\n".join(markdown(p) for p in NOTEBOOKS)
    links = set(LINK.findall(text))
    uncited = []
    for key, entry in parse_file(ROOT / "book" / "references.bib").entries.items():
        url = entry_url(entry.fields)
        if url not in links and f"references.md#{make_id('cite-' + key)}" not in links:
            uncited.append(key)
    assert not uncited, (
        f"references.bib lists works no chapter links to: {uncited}; the bibliography "
        "shows every entry, so cite each one (its url, doi or arXiv address) or drop it"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_solutions_are_folded_in_jupyterlab(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    assert fold_solutions.solution_cells(nb), f"{path.name}: no solution cells found"
    problems = fold_solutions.problems(nb)
    assert not problems, (
        f"{path.name}: {problems[:3]}; run "
        f".venv/bin/python tools/fold_solutions.py book/{path.name}"
    )
