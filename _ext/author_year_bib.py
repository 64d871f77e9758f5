"""Label the bibliography as the text cites it: "Vaswani et al., 2017", not "[VSP+17]".

sphinxcontrib-bibtex's author-year references make the citations in the text read "Vaswani
et al. (2017)"; the labels of the list of references come from a pybtex style, and pybtex
ships only numeric and alphabetic ones. This registers:

* ``author_year`` (``bibtex_default_style``): pybtex's ``unsrt`` formatting, which prints URLs
  and DOIs as links, with author-year labels, listed in the order of their labels. Two works
  with the same label get "2023a", "2023b".
* ``author_year_et_al`` (``bibtex_reference_style``): sphinxcontrib-bibtex's ``author_year``,
  except that BibTeX's "and others" reads "et al." in the text, as it does in the labels,
  instead of "Grattafiori and others".
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from string import ascii_lowercase

from pybtex.plugin import register_plugin
from pybtex.richtext import Text
from pybtex.style.formatting.unsrt import Style as UnsrtStyle
from pybtex.style.labels import BaseLabelStyle
from pybtex.style.sorting import BaseSortingStyle
from sphinx.application import Sphinx
from sphinxcontrib.bibtex.plugin import register_plugin as register_bibtex_plugin
from sphinxcontrib.bibtex.style.referencing import PersonStyle
from sphinxcontrib.bibtex.style.referencing.author_year import AuthorYearReferenceStyle
from sphinxcontrib.bibtex.style.template import field as entry_field
from sphinxcontrib.bibtex.style.template import first_of, join, node, optional, tag

NAME = "author_year"
OTHERS = "others"  # BibTeX's "and others"


def _last_name(person) -> str:
    return Text(*person.rich_last_names).render_as("text").replace("{", "").replace("}", "")


def author_year_label(entry) -> str:
    """ "Su et al., 2021", "Chen and Tian, 2023" or "Dao, 2024" for one pybtex entry."""
    people = entry.persons.get("author") or entry.persons.get("editor") or []
    names = [_last_name(p) for p in people]
    if not names:
        who = entry.fields.get("key", entry.key)
    elif len(names) > 2 or names[-1] == OTHERS:
        who = f"{names[0]} et al."
    elif len(names) == 2:
        who = f"{names[0]} and {names[1]}"
    else:
        who = names[0]
    return f"{who}, {entry.fields.get('year', 'n.d.')}"


class AuthorYearLabelStyle(BaseLabelStyle):
    def format_labels(self, sorted_entries):
        entries = list(sorted_entries)
        labels = [author_year_label(e) for e in entries]
        counts, seen = Counter(labels), Counter()
        for label in labels:
            if counts[label] > 1:
                yield label + ascii_lowercase[seen[label]]
                seen[label] += 1
            else:
                yield label


class LabelSortingStyle(BaseSortingStyle):
    def sorting_key(self, entry):
        return (author_year_label(entry).casefold(), entry.fields.get("title", "").casefold())

    def sort(self, entries):
        return sorted(entries, key=self.sorting_key)


class AuthorYearStyle(UnsrtStyle):
    default_label_style = AuthorYearLabelStyle
    default_sorting_style = LabelSortingStyle


@node
def names_et_al(children, data, role, et_al, other=None, **join_options):
    """sphinxcontrib-bibtex's ``names`` node, reading a final "others" as `et_al`."""
    assert not children
    persons = data["entry"].persons[role]
    style = data["style"]
    shown = [p for p in persons if _last_name(p) != OTHERS]
    formatted = [style.person.style_plugin.format(p, style.person.abbreviate) for p in shown]
    if len(shown) < len(persons):
        return join[formatted[0], et_al].format_data(data)
    return join(other=other, **join_options)[formatted].format_data(data)


@node
def author_or_editor_or_title_et_al(children, data, **kwargs):
    """sphinxcontrib-bibtex's ``author_or_editor_or_title``, with :func:`names_et_al`."""
    assert not children
    return first_of[
        optional[names_et_al("author", **kwargs)],
        optional[names_et_al("editor", **kwargs)],
        tag("em")[entry_field("title")],
    ].format_data(data)


@dataclass
class EtAlPersonStyle(PersonStyle):
    def _options(self, full: bool) -> dict:
        return {"et_al": self.other, "sep": self.sep, "sep2": self.sep2, "last_sep": self.last_sep,
                "other": None if full else self.other}

    def names(self, role: str, full: bool):
        return names_et_al(role=role, **self._options(full))

    def author_or_editor_or_title(self, full: bool):
        return author_or_editor_or_title_et_al(**self._options(full))


@dataclass
class AuthorYearEtAlReferenceStyle(AuthorYearReferenceStyle):
    person: PersonStyle = field(default_factory=EtAlPersonStyle)


def setup(app: Sphinx) -> dict:
    register_plugin("pybtex.style.labels", NAME, AuthorYearLabelStyle, force=True)
    register_plugin("pybtex.style.formatting", NAME, AuthorYearStyle, force=True)
    register_bibtex_plugin("sphinxcontrib.bibtex.style.referencing", f"{NAME}_et_al", AuthorYearEtAlReferenceStyle, force=True)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
