"""The Markdown report as one self-contained HTML page, for a pipeline's artifacts.

The report is written once, as Markdown (:meth:`.report.SuiteReport.markdown`); this renders the
few forms it uses (headings, paragraphs, lists, tables, fenced code, ``**bold**``, ``code``) into
a page with its style inline and nothing to fetch: no script, no font, no image. Everything the
target sent is escaped, so a body holding markup shows as text.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator

STYLE = """
body { font: 15px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 75em; padding: 0 1em;
       color: #1f2328; }
h1 { font-size: 1.6em; } h2 { font-size: 1.3em; margin-top: 1.6em; } h3 { font-size: 1.05em; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border: 1px solid #d0d7de; padding: 4px 8px; vertical-align: top; text-align: left; }
th { background: #f6f8fa; }
code, pre { font: 13px/1.4 ui-monospace, monospace; }
pre { background: #f6f8fa; padding: 0.8em; overflow-x: auto; white-space: pre-wrap; }
body > p:first-of-type strong { color: #9a6700; }
body[data-outcome="passed"] > p:first-of-type strong { color: #1a7f37; }
body[data-outcome="failed"] > p:first-of-type strong,
body[data-outcome="interrupted"] > p:first-of-type strong { color: #cf222e; }
"""

_BOLD = re.compile(r"\*\*(.+?)\*\*")
_CODE = re.compile(r"`([^`]+)`")
_BREAK = "&lt;br&gt;"  # the report's line break inside a table cell, once escaped


def _inline(text: str) -> str:
    """Escaped text with the report's inline forms: ``code`` first (nothing inside it is bold)."""
    pieces = _CODE.split(html.escape(text, quote=False))
    out = []
    for i, piece in enumerate(pieces):
        if i % 2:
            out.append(f"<code>{piece}</code>")
        else:
            out.append(_BOLD.sub(r"<strong>\1</strong>", piece))
    return "".join(out)


def _cells(row: str) -> list[str]:
    """A table row's cells: split on the pipes the report did not escape as ``\\|``."""
    cells = re.split(r"(?<!\\)\|", row.strip().strip("|"))
    return [_inline(c.strip().replace("\\|", "|")).replace(_BREAK, "<br>") for c in cells]


def _blocks(lines: list[str]) -> Iterator[str]:
    i = 0
    while i < len(lines):
        line = lines[i]
        if fence := re.match(r"`{3,}", line):  # closed by the same run, alone on a line
            end = next((j for j in range(i + 1, len(lines)) if lines[j] == fence[0]), len(lines))
            yield f"<pre><code>{html.escape(chr(10).join(lines[i + 1 : end]))}</code></pre>"
            i = end + 1
        elif heading := re.match(r"(#{1,3}) (.*)", line):
            level = len(heading[1])
            yield f"<h{level}>{_inline(heading[2])}</h{level}>"
            i += 1
        elif line.startswith("- "):
            items = []
            while i < len(lines) and lines[i].startswith("- "):
                items.append(f"<li>{_inline(lines[i][2:])}</li>")
                i += 1
            yield "<ul>" + "".join(items) + "</ul>"
        elif line.startswith("|"):
            rows = []
            while i < len(lines) and lines[i].startswith("|"):
                rows.append(lines[i])
                i += 1
            head, body = _cells(rows[0]), [_cells(r) for r in rows[2:]]
            cells = "".join(f"<th>{c}</th>" for c in head)
            trs = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in body)
            yield f"<table><thead><tr>{cells}</tr></thead><tbody>{trs}</tbody></table>"
        elif line.strip():
            yield f"<p>{_inline(line)}</p>"
            i += 1
        else:
            i += 1


def render(markdown: str, outcome: str) -> str:
    """The page: the report's Markdown rendered; ``outcome`` (passed, failed...) colours it."""
    lines = markdown.split("\n")  # its own line breaks only (not U+2028 or a form feed)
    title = html.escape(lines[0].lstrip("# ") if lines else "Explain API contract report")
    body = "\n".join(_blocks(lines))
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{title}</title>\n<style>{STYLE}</style>\n</head>\n"
        f'<body data-outcome="{html.escape(outcome)}">\n{body}\n</body>\n</html>\n'
    )
