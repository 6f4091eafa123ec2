"""index.html: the page view through the Jinja2 templates in `torchbisect/templates/`.

Autoescaping is on for every template and no template marks data `|safe`: every string from a
probe, a log or a file name is untrusted.  The page also carries a Content-Security-Policy that
forbids scripts, so a mistake in escaping would be blocked (and logged) rather than run.
"""

from __future__ import annotations

import re
from functools import cache

import jinja2
from markupsafe import Markup, escape

from ...page.parts import Page, PageView
from ...utils.words import visible


def code_spans(text: str) -> Markup:
    """Our own sentences mark commands with backticks, as in Markdown: each pair becomes a
    <code> element and every part is escaped, so no backtick is shown literally."""
    parts = str(text).split("`")
    if len(parts) % 2 == 0:  # an unpaired backtick: no span to draw, show the text as it is
        return escape(text)
    return Markup("").join(
        Markup("<code>%s</code>") % p if i % 2 else escape(p) for i, p in enumerate(parts)
    )


_AFTER = re.compile(r"(?<=[/?&=])|(?<=[-:])(?!\d)")  # not inside a date, time or version
_HEX = re.compile(r"([0-9a-f]{24,})")


def breaks(text: str) -> Markup:
    """`text` escaped, with line-break opportunities (<wbr>) where a reader expects a long
    token to break: after a path's or URL's separators, and every 16 digits of a long hash, so
    a narrow sheet never breaks `2026-11-29` or a version in the middle."""
    pieces = []
    for part in _AFTER.split(str(text)):
        for chunk in _HEX.split(part):
            if _HEX.fullmatch(chunk):
                pieces += [chunk[i : i + 16] for i in range(0, len(chunk), 16)]
            elif chunk:
                pieces.append(chunk)
    return Markup("<wbr>").join(escape(p) for p in pieces)


def capitalize_first(text: str) -> str:
    text = str(text)
    return text[:1].upper() + text[1:]


@cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("torchbisect", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["code_spans"] = code_spans
    env.filters["breaks"] = breaks
    env.filters["capitalize_first"] = capitalize_first
    return env


def render_html(page: PageView, site_home: str = "") -> str:
    """`site_home`: the index of a site of several regressions, relative to the page, or ""."""
    # visible: no control code or lone surrogate from a probe, log or path reaches the page raw
    return visible(
        environment().get_template("index.html.j2").render(page=page, site_home=site_home)
    )


def render_fold_pages(page: PageView) -> dict[str, str]:
    """The page of each folded run of nightlies, by its path relative to index.html."""
    template = environment().get_template("nightlies.html.j2")
    return {
        fold.href: visible(
            template.render(
                section=section,
                fold=fold,
                columns=page.columns,
                generated=page.generated,
                page_title=page.title,
            )
        )
        for section in page.sections
        for group in section.groups
        for fold in group.folds
        if fold.folded
    }


class HtmlWriter:
    """index.html, the page a reader opens (the pages of folded nightlies go beside it)."""

    name = "index.html"

    def render(self, page: Page) -> str:
        return render_html(page.view, page.site_home)
