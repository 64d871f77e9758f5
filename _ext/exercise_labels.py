"""Each exercise box shows its label, and solution headers link without a leading space.

* The label. INSTRUCTORS.md lists assignments by the exercises' labels
  (``ch07-rotate-by-hand``), the grader reports them, and the student notebooks name them in
  each stub; the boxes showed only a number ("Exercise 7.1"). The title now reads
  "Exercise 7.1 ``ch07-rotate-by-hand``", the label a link to the box itself (on the site),
  in both editions.
* sphinx-exercise writes a solution's header as "Solution to" followed by a link whose text
  starts with a space (" Exercise 7.1"), so the underline starts with a blank. The space is
  moved out of the link.
"""

from __future__ import annotations

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx_exercise.nodes import (
    exercise_enumerable_node,
    exercise_node,
    solution_node,
    solution_start_node,
)

LABEL_CLASS = "exercise-label"


class LabelExercisesAndTidySolutions(SphinxPostTransform):
    # After sphinx-exercise has written the titles (20 exercises, 21 solutions, 22 links).
    default_priority = 23

    def run(self, **kwargs) -> None:
        html = self.app.builder.format == "html"
        for node in self.document.findall(
            lambda n: isinstance(n, (exercise_node, exercise_enumerable_node))
        ):
            label = node.get("label")
            title = node.children[0] if node.children else None
            if not label or not isinstance(title, nodes.title):
                continue
            if any(LABEL_CLASS in c.get("classes", []) for c in title.children
                   if isinstance(c, nodes.Element)):
                continue
            code = nodes.literal(label, label)
            if html:
                mark = nodes.reference(
                    "", "", code, refid=label, classes=[LABEL_CLASS],
                    reftitle="The exercise's label, as the grader and the "
                             "instructor's guide name it",
                )
            else:
                mark = nodes.inline("", "", code, classes=[LABEL_CLASS])
            if title.astext().strip():  # else the number ("Exercise 7.1 ") comes later
                title += nodes.Text(" ")
            title += mark
        for node in self.document.findall(
            lambda n: isinstance(n, (solution_node, solution_start_node))
        ):
            title = node.children[0] if node.children else None
            if isinstance(title, nodes.title):
                _move_leading_space_out_of_links(title)


def _move_leading_space_out_of_links(title: nodes.title) -> None:
    for index, child in enumerate(list(title.children)):
        if not isinstance(child, nodes.reference) or not child.children:
            continue
        first = child.children[0]
        if isinstance(first, nodes.Text) and first.astext().startswith(" "):
            rest = first.astext().lstrip(" ")
            child.replace(first, nodes.Text(rest))
            previous = title.children[index - 1] if index else None
            if isinstance(previous, nodes.Text):
                title.replace(previous, nodes.Text(previous.astext().rstrip(" ") + " "))
            else:
                title.insert(index, nodes.Text(" "))


def setup(app: Sphinx) -> dict:
    app.setup_extension("sphinx_exercise")
    app.add_post_transform(LabelExercisesAndTidySolutions)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
