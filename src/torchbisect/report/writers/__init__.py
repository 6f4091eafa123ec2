"""The report's writers: each output of a page, rendered from the page model (torchbisect/page/).

A writer has a name (the file it writes beside the page) and one `render(page)`, the page
(`page.parts.Page`) being the view and the runs and bisections it was decided from.  `WRITERS`
lists them once, in the order a render writes and names them: a new output is a module here and
one entry there.  A finished bisection's own text, the terminal's and a job summary's, is written
by bisection_text.py's two writers (`BISECTION_WRITERS`), whose page is the bisection.
"""

from __future__ import annotations

from typing import Protocol, TypeVar

from .bisection_text import BisectionMarkdownWriter, BisectionTextWriter
from .html import HtmlWriter
from .markdown import MarkdownWriter
from .osv import OsvWriter
from .results_json import ResultsJsonWriter

__all__ = ["BISECTION_WRITERS", "WRITERS", "Writer"]

P_contra = TypeVar("P_contra", contravariant=True)


class Writer(Protocol[P_contra]):
    """One output: its name, and its text rendered from what it is about."""

    name: str

    def render(self, page: P_contra, /) -> str: ...


WRITERS = (HtmlWriter(), ResultsJsonWriter(), MarkdownWriter(), OsvWriter())
BISECTION_WRITERS = (BisectionTextWriter(), BisectionMarkdownWriter())
