"""Two small fixes that let book/api.md render the companion's docstrings as written.

1. Short names. The docstrings name the companion's own classes as the code reads them,
   ``:class:`KVCache``` in ``companion.model`` for ``companion.attention.KVCache``. Sphinx looks
   such a name up only in the current module; when that fails, this resolves it to the one
   documented ``companion`` object with that name (and leaves it unresolved, so the nitpicky
   build still reports it, when there is none or more than one).
2. Google-style ``Returns:`` whose first line opens an inline literal that ends on a later
   line. Napoleon reads the first line as ``type: description`` and splits it at its first
   colon, inside the literal; this joins the literal's lines first (reST reads a line break in
   a paragraph as a space, so the text is unchanged).
"""

from __future__ import annotations

from docutils import nodes
from sphinx.addnodes import pending_xref
from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment

PACKAGE = "companion."


def resolve_short_name(app: Sphinx, env: BuildEnvironment, node: pending_xref, contnode: nodes.Element):
    if node.get("refdomain") != "py" or "." in node.get("reftarget", "."):
        return None
    domain = env.get_domain("py")
    name = node["reftarget"]
    matches = [full for full in domain.objects if full.startswith(PACKAGE) and full.rsplit(".", 1)[-1] == name]
    if len(matches) != 1:
        return None
    return domain.resolve_xref(env, node["refdoc"], app.builder, node["reftype"], matches[0], node, contnode)


def join_returns_literal(app: Sphinx, what: str, name: str, obj, options, lines: list[str]) -> None:
    for i, line in enumerate(lines):
        if line.strip() != "Returns:" or i + 1 >= len(lines):
            continue
        first = i + 1
        while lines[first].count("``") % 2 == 1 and first + 1 < len(lines) and lines[first + 1].strip():
            lines[first] = lines[first].rstrip() + " " + lines.pop(first + 1).strip()


def setup(app: Sphinx) -> dict:
    app.connect("missing-reference", resolve_short_name)
    app.connect("autodoc-process-docstring", join_returns_literal, priority=400)  # before napoleon
    return {"parallel_read_safe": True, "parallel_write_safe": True}
