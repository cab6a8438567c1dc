"""A glossary entry (``Term``): its anchor, its name, how lessons write it, its definition and
where the definition comes from."""

import re
from dataclasses import dataclass
from functools import cached_property


@dataclass(frozen=True)
class Term:
    slug: str  # the entry's anchor: /glossary#<slug>
    term: str  # as the glossary lists it
    pattern: str  # how lessons write it (a regular expression)
    definition: str
    # Where the definition comes from, shown under the entry on /glossary (every term added
    # since round 19 names one: tests/app/test_glossary_words.py).
    source: str = ""

    @cached_property  # built once per term (issue 31: a page's define_terms asked ~18,000 times)
    def regex(self) -> re.Pattern:
        # An apostrophe as written, or as Jinja escapes it in a macro's text (&#39;); a word
        # that starts lower case also matches at a sentence's or heading's start ("Strong
        # scaling", round-5 reading: such first uses went unmarked); a space between words
        # also matches a line break and the template's indent ("mean time between /
        # interruptions" across two lines of EP11's source went unmarked).
        pattern = re.sub(r"\\b([a-z])", lambda m: rf"\b[{m[1]}{m[1].upper()}]", self.pattern)
        pattern = re.sub(r" (?![?*+{])", r"\\s+", pattern)
        return re.compile(pattern.replace("'", "(?:'|&#39;)"))
