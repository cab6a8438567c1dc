"""The glossary: every term of art the lessons use, defined once (GET /glossary), and at its
first use in a lesson's lede or steps an inline definition that a hover, a keyboard focus or a
tap shows, with a link to the entry (``define_terms``, the ``define_terms`` filter that
templates/episode.html runs over the lesson's prose).

A term is found by its ``pattern`` (a regular expression over the prose's text, outside tags,
links, code, headings, figures and controls); tests/app/test_glossary.py checks that every term
a lesson uses is defined at its first use there. The terms themselves are the
app/glossary_terms package's (``GLOSSARY``, each a ``Term``, by topic), re-exported here.
"""

import re

from markupsafe import (
    Markup,
    escape,  # what Jinja escapes with: one escaping for every page
)

from app.glossary_terms import GLOSSARY, Term
from app.settings import url

# Text inside these elements is never a first use: links, code, headings, live figures'
# own markup, controls, and the definitions themselves.
_SKIP = {"a", "code", "pre", "h1", "h2", "h3", "h4", "script", "style", "button", "summary",
         "label", "select", "option", "textarea", "sub", "sup", "abbr", "svg"}
_TAG = re.compile(r"(<[^>]*>)")
_NAME = re.compile(r"</?\s*([a-zA-Z0-9]+)")


def _wrap(term: Term, text: str, inner: str = "dfn") -> str:
    """The inline definition: the word as written, its definition in a tip that hover, focus
    or a tap (focus) shows, and a link to the glossary entry. Its id, ``term-<slug>``, is where
    the glossary's "Taught in" link lands (app/glossary_taught.py: one first use a page).
    Inside a lesson's own <dfn> the word is a <span> (a <dfn> holds no <dfn>)."""
    return (f'<span class="term" id="term-{term.slug}" tabindex="0">'
            f'<{inner} data-term="{term.slug}">{text}</{inner}>'
            f'<span class="term-tip" role="tooltip"><strong>{escape(term.term)}</strong>: '
            f'{escape(term.definition)} <a href="{url("/glossary")}#{term.slug}">Glossary'
            "</a></span></span>")


def _first_match(text: str, terms) -> tuple[int, int, Term] | None:
    found = None
    for term in terms:
        match = term.regex.search(text)
        if match and (found is None or (match.start(), -match.end()) < (found[0], -found[1])):
            found = (match.start(), match.end(), term)
    return found


def define_terms(html: str, seen: set[str] | None = None) -> Markup:
    """``html`` with each glossary term's first use (not already in ``seen``) wrapped in its
    inline definition; ``seen`` gains the terms wrapped, so a page's lede and steps share it."""
    seen = set() if seen is None else seen
    out: list[str] = []
    skipping: list[str] = []
    in_dfn = 0  # inside the lesson's own <dfn>: the term it defines gets its tip too
    for part in _TAG.split(str(html)):
        if part.startswith("<"):
            name = _NAME.match(part)
            tag = name.group(1).lower() if name else ""
            if tag == "dfn" and not skipping:
                in_dfn += -1 if part.startswith("</") else 1
            if part.startswith("</"):
                if skipping and skipping[-1] == tag:
                    skipping.pop()
            elif (tag in _SKIP and not part.endswith("/>")) or (skipping and tag == skipping[-1]):
                skipping.append(tag)
            out.append(part)
            continue
        if skipping:
            out.append(part)
            continue
        while part:
            found = _first_match(part, [t for t in GLOSSARY if t.slug not in seen])
            if found is None:
                break
            start, end, term = found
            out.append(part[:start] + _wrap(term, part[start:end], "span" if in_dfn else "dfn"))
            seen.add(term.slug)
            part = part[end:]
        out.append(part)
    return Markup("".join(out))

