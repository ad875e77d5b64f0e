#!/usr/bin/env python3
"""Every relative link of the built guide (and of the README and the guide's sources) leads to a
file that exists, and every `#anchor` to an id that page has. External links are not fetched.

    python3 scripts/check-links.py docs/book
"""
import html.parser
import pathlib
import re
import sys
import urllib.parse


class Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.links, self.ids = [], set()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.add(attrs["id"])
        if tag == "a" and attrs.get("name"):
            self.ids.add(attrs["name"])
        for key in ("href", "src"):
            if attrs.get(key):
                self.links.append(attrs[key])


def external(link):
    return re.match(r"^[a-z][a-z0-9+.-]*:", link) is not None


def main():
    book = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "docs/book")
    root = pathlib.Path(__file__).resolve().parent.parent
    problems, checked = [], 0
    pages = {}
    for path in book.rglob("*.html"):
        parser = Page()
        parser.feed(path.read_text(encoding="utf-8"))
        pages[path.resolve()] = parser
    if not pages:
        sys.exit(f"{book}: no HTML pages (run `mdbook build docs` first)")
    for path, parser in pages.items():
        for link in parser.links:
            if external(link) or link.startswith("//"):
                continue
            target, _, anchor = link.partition("#")
            target = urllib.parse.unquote(target)
            dest = (path.parent / target).resolve() if target else path
            checked += 1
            if not dest.exists():
                problems.append(f"{path.relative_to(book.resolve())}: {link}: no such file")
            elif anchor and dest.suffix == ".html" and anchor not in pages.get(dest, Page()).ids:
                problems.append(f"{path.relative_to(book.resolve())}: {link}: no #{anchor} there")
    # Markdown links of the README and the sources (what GitHub shows without the book).
    for md in [root / "README.md", *sorted((root / "docs/src").rglob("*.md"))]:
        for link in re.findall(r"\]\(([^)\s]+)\)", md.read_text(encoding="utf-8")):
            if external(link) or link.startswith("#"):
                continue
            target = urllib.parse.unquote(link.partition("#")[0])
            checked += 1
            if not (md.parent / target).exists():
                problems.append(f"{md.relative_to(root)}: {link}: no such file")
    for problem in problems:
        print(problem)
    print(f"{checked} links checked, {len(problems)} broken")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
