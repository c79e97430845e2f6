"""Offline checks of a built static site: every internal link resolves, nothing loads from a network.

For each HTML page of the site (``_static/`` holds files, not pages), every ``href`` and ``src`` that
is not an external address must name a file of the site and, when it has a ``#fragment`` into an
HTML page, an ``id`` (or ``<a name>``) in that page. Scripts, stylesheets, images and other
resources a page loads by itself (anything but an ``<a>`` link) must come from the site, not from a
network address.

>>> import tempfile, pathlib
>>> site = pathlib.Path(tempfile.mkdtemp())
>>> _ = (site / "a.html").write_text('<h1 id="top">A</h1><a href="b.html#x">b</a><a href="#top">up</a>')
>>> _ = (site / "b.html").write_text('<p id="y"></p><script src="https://cdn.example/m.js"></script>')
>>> for problem in broken_links(site): print(problem)
a.html: link b.html#x: no id 'x' in b.html
b.html: loads https://cdn.example/m.js from the network
"""

from __future__ import annotations

import posixpath
import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

__all__ = ["page_links", "broken_links"]

EXTERNAL = re.compile(r"^(?:[a-zA-Z][a-zA-Z0-9+.-]*:|//)")
LINKING = {"a": "href", "link": "href", "img": "src", "script": "src", "iframe": "src", "source": "src",
           "video": "src", "audio": "src", "embed": "src", "object": "data"}


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.links: list[tuple[str, str]] = []  # (tag, address)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        for key in ("id", "name") if tag == "a" else ("id",):
            if values.get(key):
                self.ids.add(values[key])
        address = values.get(LINKING.get(tag, ""))
        if address:
            self.links.append((tag, address.strip()))
        if tag == "img" and values.get("srcset"):
            self.links += [("img", part.split()[0]) for part in values["srcset"].split(",") if part.strip()]


def page_links(path: Path) -> tuple[set[str], list[tuple[str, str]]]:
    """The ids of the HTML page at ``path`` and its links, as ``(tag, address)`` pairs."""
    page = _Page()
    page.feed(path.read_text(encoding="utf-8", errors="replace"))
    return page.ids, page.links


def broken_links(site: Path) -> list[str]:
    """One line per problem in the HTML files under ``site`` (empty: every internal link resolves
    and every resource comes from the site)."""
    pages = {p.relative_to(site).as_posix(): page_links(p) for p in sorted(site.rglob("*.html"))
             if p.relative_to(site).parts[0] != "_static"}  # _static/*.html: a theme's template macros
    problems = []
    for name, (ids, links) in pages.items():
        for tag, address in links:
            if address.startswith(("mailto:", "javascript:", "data:")):
                continue
            if EXTERNAL.match(address):
                if tag != "a":
                    problems.append(f"{name}: loads {address} from the network")
                continue
            parts = urlsplit(address)
            target = posixpath.normpath(posixpath.join(posixpath.dirname(name), unquote(parts.path))) \
                if parts.path else name
            if target.startswith("..") or not (site / target).exists():
                problems.append(f"{name}: link {address}: no file {target}")
                continue
            if (site / target).is_dir():
                target = posixpath.join(target, "index.html")
                if target not in pages:
                    problems.append(f"{name}: link {address}: a folder without index.html")
                    continue
            fragment = unquote(parts.fragment)
            if fragment and target in pages and fragment not in pages[target][0]:
                problems.append(f"{name}: link {address}: no id {fragment!r} in {target}")
    return problems
