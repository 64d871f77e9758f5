"""Plain markdown links that read the same in JupyterLab and on the site.

JupyterLab (jupyterlab-myst) cannot resolve Sphinx roles: ``{cite}`` shows "Citation Not
Found", ``{term}`` links to ``#``, ``{doc}`` to a missing file, ``{py:obj}`` stays raw
text. So the chapters write plain links instead (tests/test_book.py forbids the roles in
notebooks):

* a citation: ``[Su et al., 2021](https://arxiv.org/abs/2104.09864)``, the paper itself,
  or ``[label](references.md#cite-KEY)`` for a work with no address (the source
  tutorials);
* a glossary term: ``[token](glossary.md#term-token)``;
* the API: ``[`rope.apply_rotary`](api.md#companion.rope.apply_rotary)``.

MyST resolves ``file.md#anchor`` only where the anchor is a heading. This post-transform
runs just before MyST's resolver and resolves the others against the ids the target page
really has (a term, a documented function, a bibliography entry); an anchor the page
lacks is left to MyST, whose warning fails the build. Links to a work in
``references.bib`` (by its url, doi or arXiv id) get the full reference as their
tooltip, as the citations had, and the bibliography lists every entry with the stable id
``cite-KEY``.
"""

from __future__ import annotations

from docutils import nodes
from pybtex.database import parse_file
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.config import Config
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util.nodes import make_refnode


def entry_url(fields) -> str | None:
    """The address a chapter links a work by: its url, else DOI, else arXiv id."""
    if fields.get("url"):
        return fields["url"]
    if fields.get("doi"):
        return "https://doi.org/" + fields["doi"]
    if fields.get("eprint"):
        return "https://arxiv.org/abs/" + fields["eprint"]
    return None


def _tooltip(entry) -> str:
    people = entry.persons.get("author") or entry.persons.get("editor") or []
    names = ", ".join(" ".join(p.last_names) for p in people[:3])
    names = names.replace("{", "").replace("}", "")
    if len(people) > 3:
        names += " et al."
    title = entry.fields.get("title", "").replace("{", "").replace("}", "")
    year = entry.fields.get("year", "n.d.")
    names = names.replace("others", "et al.").rstrip(".")
    return f"{names}. {title}. {year}."


class ResolveAnchors(SphinxPostTransform):
    default_priority = 8  # before MyST's resolver (9)

    def run(self, **kwargs) -> None:
        ids: dict[str, set[str]] = {}
        for node in list(self.document.findall(addnodes.pending_xref)):
            if node.get("reftype") != "myst" or node.get("refdomain") != "doc":
                continue
            docname, anchor = node["reftarget"], node.get("reftargetid")
            if not anchor or docname not in self.env.all_docs:
                continue
            if anchor in self.env.metadata[docname].get("myst_slugs", {}):
                continue  # a heading: MyST's own resolver does it
            if docname not in ids:
                tree = self.env.get_doctree(docname)
                ids[docname] = set(
                    tree.ids
                )  # bibliography entries are not in the tree yet
                ids[docname].update(
                    i for n in tree.findall(nodes.Element) for i in n["ids"]
                )
            if anchor not in ids[docname]:
                continue  # MyST warns: local id not found
            inner = nodes.inline("", "", *node[0].children, classes=["std", "std-ref"])
            fromdoc = node.get("refdoc", self.env.docname)
            node.replace_self(
                make_refnode(self.app.builder, fromdoc, docname, anchor, inner)
            )


def _tooltips(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    titles = app.env.plain_links_titles
    for ref in doctree.findall(nodes.reference):
        uri = ref.get("refuri", "")
        key = uri.rsplit("#cite-", 1)[-1] if "#cite-" in uri else None
        title = titles.get(uri) or (key and titles.get("cite-" + key))
        if title and "reftitle" not in ref:
            ref["reftitle"] = title


def _configure(app: Sphinx, config: Config) -> None:
    config.bibtex_cite_id = "cite-{key}"


def _load_titles(app: Sphinx) -> None:
    from docutils.nodes import make_id

    titles = {}
    for bibfile in app.config.bibtex_bibfiles:
        for key, entry in parse_file(app.srcdir / bibfile).entries.items():
            text = _tooltip(entry)
            titles[make_id("cite-" + key)] = text
            if entry_url(entry.fields):
                titles[entry_url(entry.fields)] = text
    app.env.plain_links_titles = titles


def setup(app: Sphinx) -> dict:
    app.connect("config-inited", _configure)
    app.connect("builder-inited", _load_titles)
    app.connect("doctree-resolved", _tooltips)
    app.add_post_transform(ResolveAnchors)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
