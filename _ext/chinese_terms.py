"""Chinese text on the site is marked as Chinese, and the glossary's Chinese terms get
anchors that say what they are.

* ``lang="zh"``: every run of Chinese characters in a page's text (the glossary's terms,
  titles in the references) is wrapped in ``<span lang="zh">``, so that a screen reader
  reads it as Chinese and the browser picks a Chinese font, not a Japanese one, for the
  shared characters. HTML builders only; code, math and raw HTML are left alone.
* Anchors: Sphinx makes a glossary term's anchor from its text, and a term with no Latin
  letters gets a number (``#term-0``). Each Chinese term gets the anchor of the English term
  it translates, with ``-zh``: ``注意力`` is ``#term-attention-zh``. Its cross-references and
  index entry follow.
"""

from __future__ import annotations

import re

from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.transforms import SphinxTransform
from sphinx.transforms.post_transforms import SphinxPostTransform

# CJK punctuation, ideographs (with extension A) and full-width forms.
CJK = re.compile(r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef]+")
SKIP = (nodes.literal, nodes.literal_block, nodes.math, nodes.math_block, nodes.raw,
        nodes.comment)


def has_cjk(text: str) -> bool:
    return bool(CJK.search(text))


class ChineseTermAnchors(SphinxTransform):
    default_priority = 500

    def apply(self, **kwargs) -> None:
        std = self.env.get_domain("std")
        for glossary in self.document.findall(addnodes.glossary):
            for item in glossary.findall(nodes.definition_list_item):
                terms = [t for t in item.children if isinstance(t, nodes.term)]
                english = next((t for t in terms if not has_cjk(t.astext())), None)
                if english is None or not english["ids"]:
                    continue
                for term in terms:
                    if term is english or not has_cjk(term.astext()) or not term["ids"]:
                        continue
                    self._rename(std, term, english["ids"][0] + "-zh")

    def _rename(self, std, term: nodes.term, new: str) -> None:
        old = term["ids"][0]
        if new in self.document.ids:
            return  # two Chinese terms for one English term: keep the numbers
        term["ids"][0] = new
        self.document.ids.pop(old, None)
        self.document.ids[new] = term
        text = term.astext()
        std.objects["term", text] = (self.env.docname, new)
        std._terms[text.lower()] = (self.env.docname, new)
        for index in term.findall(addnodes.index):
            index["entries"] = [
                (kind, value, new if target == old else target, main, key)
                for kind, value, target, main, key in index["entries"]
            ]


class MarkChineseText(SphinxPostTransform):
    default_priority = 900  # after references are resolved
    builders = ("html", "dirhtml", "singlehtml")

    def run(self, **kwargs) -> None:
        for text in list(self.document.findall(nodes.Text)):
            value = text.astext()
            if not has_cjk(value) or _inside(text, SKIP):
                continue
            pieces, at = [], 0
            for match in CJK.finditer(value):
                if match.start() > at:
                    pieces.append(nodes.Text(value[at:match.start()]))
                chinese = match.group(0)
                pieces.append(nodes.raw(
                    chinese, f'<span lang="zh">{_escape(chinese)}</span>', format="html"
                ))
                at = match.end()
            if at < len(value):
                pieces.append(nodes.Text(value[at:]))
            parent = text.parent
            index = parent.index(text)
            parent[index:index + 1] = pieces


def _inside(node: nodes.Node, kinds) -> bool:
    parent = node.parent
    while parent is not None:
        if isinstance(parent, kinds):
            return True
        parent = parent.parent
    return False


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def setup(app: Sphinx) -> dict:
    app.add_transform(ChineseTermAnchors)
    app.add_post_transform(MarkChineseText)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
