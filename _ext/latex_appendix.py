"""The PDF (``make pdf``, tools/pdf.py): the back matter as appendices A, B, C, ...

sphinx-jupyterbook-latex turns each caption of ``_toc.yml`` into a LaTeX part and
numbers every chapter on from the one before, so the pages after the last chapter would
be chapters 19 to 22. This hook starts LaTeX's appendix (``\\appendix``) right after
the title of the part that ``latex_appendix_part`` names (tools/pdf_config.yml sets it),
so the chapters keep their numbers 1 to 18, as the book's table of contents has them,
and the back matter is lettered. Only the LaTeX builders are affected; a caption that
names no part is a warning.
"""

from __future__ import annotations

from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.builders.latex import LaTeXBuilder
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util import logging

logger = logging.getLogger(__name__)


class AppendixAfterPart(SphinxPostTransform):
    # After sphinx-jupyterbook-latex's LatexRootDocPostTransforms (700) made the parts.
    default_priority = 710

    def run(self, **kwargs) -> None:
        caption = self.config.latex_appendix_part
        if not caption or not isinstance(self.app.builder, LaTeXBuilder):
            return
        for section in self.document.findall(nodes.section):
            title = section.next_node(nodes.title)
            if section.get("docname") == caption and title is not None:
                title.parent.insert(
                    title.parent.index(title) + 1,
                    nodes.raw("", "\\appendix\n", format="latex"),
                )
                return
        if next(self.document.findall(addnodes.start_of_file), None) is None:
            return  # one page on its own, not the whole book
        logger.warning(
            "latex_appendix_part: no part of the PDF is captioned %r; set it to a "
            "caption of _toc.yml (tools/pdf_config.yml)",
            caption,
        )


def setup(app: Sphinx) -> dict:
    app.add_config_value("latex_appendix_part", "", "env", [str])
    app.add_post_transform(AppendixAfterPart)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
