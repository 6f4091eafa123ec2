"""index.html: the page view through the Jinja2 templates in `torchbisect/templates/`.

Autoescaping is on for every template and no template marks data `|safe`: every string from a
probe, a log or a file name is untrusted.  The page also carries a Content-Security-Policy that
forbids scripts, so a mistake in escaping would be blocked (and logged) rather than run.
"""

from __future__ import annotations

from functools import cache

import jinja2

from .page import PageView


@cache
def environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("torchbisect", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render_html(page: PageView) -> str:
    return environment().get_template("index.html.j2").render(page=page)
