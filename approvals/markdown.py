"""Markdown for descriptions, always through a sanitizer: model and tool text is untrusted."""

import nh3
from markdown_it import MarkdownIt

_md = MarkdownIt("commonmark", {"html": False, "linkify": False})
_ALLOWED_SCHEMES = {"http", "https", "mailto"}


def render_markdown(text: str) -> str:
    return nh3.clean(_md.render(text or ""), url_schemes=_ALLOWED_SCHEMES, link_rel="noopener noreferrer")
