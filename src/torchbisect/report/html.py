"""index.html: the page view through the Jinja2 templates in `torchbisect/templates/`.

Autoescaping is on for every template and no template marks data `|safe`: every string from a
probe, a log or a file name is untrusted.  The page also carries a Content-Security-Policy that
forbids scripts, so a mistake in escaping would be blocked (and logged) rather than run.
"""

from __future__ import annotations

from functools import cache

import jinja2
from markupsafe import Markup, escape

from .page import PageView


def code_spans(text: str) -> Markup:
    """Our own sentences mark commands with backticks, as in Markdown: each pair becomes a
    <code> element and every part is escaped, so no backtick is shown literally."""
    parts = str(text).split("`")
    if len(parts) % 2 == 0:  # an unpaired backtick: no span to draw, show the text as it is
        return escape(text)
    return Markup("").join(Markup("<code>%s</code>") % p if i % 2 else escape(p)
                           for i, p in enumerate(parts))


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
    return env


def render_html(page: PageView) -> str:
    return environment().get_template("index.html.j2").render(page=page)


def render_fold_pages(page: PageView) -> dict[str, str]:
    """The page of each folded run of nightlies, by its path relative to index.html."""
    template = environment().get_template("nightlies.html.j2")
    return {fold.href: template.render(section=section, fold=fold, columns=page.columns,
                                       generated=page.generated, page_title=page.title)
            for section in page.sections for group in section.groups
            for fold in group.folds if fold.folded}
