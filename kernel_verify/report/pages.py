"""A tiny page model rendered twice: Markdown (for reading in a repository) and self-contained
HTML (inline CSS, images by relative path, no script, no external request)."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from pathlib import Path

from kernel_verify.verify.atomic import write_text

CSS = """body{font-family:sans-serif;max-width:1100px;margin:1.5em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;font-size:13px;margin:.5em 0}td,th{border:1px solid #ccc;
padding:2px 6px;text-align:left;vertical-align:top}th{background:#f0f0f0}
img{max-width:100%;border:1px solid #ddd}.cap{font-style:italic;color:#555;margin:.2em 0 1em}
code,pre{background:#f6f6f6;font-size:12px}pre{padding:.5em;overflow-x:auto}
.FAIL{color:#b00;font-weight:bold}.pass{color:#070}.flagged{color:#c60;font-weight:bold}
.nt{color:#666}"""


@dataclass
class Page:
    title: str
    blocks: list[tuple] = field(default_factory=list)

    def h(self, text: str) -> None:
        self.blocks.append(("h2", text))

    def p(self, text: str) -> None:
        self.blocks.append(("p", text))

    def ul(self, items: list[str]) -> None:
        self.blocks.append(("ul", items))

    def table(self, header: list[str], rows: list[list[str]]) -> None:
        self.blocks.append(("table", header, rows))

    def img(self, src: str, caption: str) -> None:
        self.blocks.append(("img", src, caption))

    def code(self, text: str) -> None:
        self.blocks.append(("code", text))


def _md_cell(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def to_markdown(page: Page) -> str:
    out = [f"# {page.title}", ""]
    for b in page.blocks:
        if b[0] == "h2":
            out += [f"## {b[1]}", ""]
        elif b[0] == "p":
            out += [b[1], ""]
        elif b[0] == "ul":
            out += [f"- {i}" for i in b[1]] + [""]
        elif b[0] == "table":
            out.append("| " + " | ".join(_md_cell(h) for h in b[1]) + " |")
            out.append("|" + "---|" * len(b[1]))
            out += ["| " + " | ".join(_md_cell(c) for c in r) + " |" for r in b[2]]
            out.append("")
        elif b[0] == "img":
            out += [f"![{b[2]}]({b[1]})", "", f"*{b[2]}*", ""]
        elif b[0] == "code":
            out += ["```", b[1], "```", ""]
    return "\n".join(out)


#: [text](href); the text may hold one level of brackets (map names like ``gerf[iid]``)
_LINK = re.compile(r"\[((?:[^\[\]]|\[[^\]]*\])+)\]\(([^)\s]+)\)")
_CODE = re.compile(r"`([^`]+)`")
_BOLD = re.compile(r"\*\*([^*]+)\*\*")


def _inline(s: str) -> str:
    """Escape, then render the Markdown subset the pages use: links, `code`, **bold**."""
    t = html.escape(s, quote=False)
    t = _CODE.sub(lambda m: f"<code>{m.group(1)}</code>", t)
    t = _BOLD.sub(lambda m: f"<b>{m.group(1)}</b>", t)

    def link(m: re.Match) -> str:
        href = m.group(2)
        if href.endswith(".md"):
            href = href[:-3] + ".html"
        return f'<a href="{html.escape(href)}">{m.group(1)}</a>'

    t = _LINK.sub(link, t)
    for word, cls in (("FAIL", "FAIL"), ("flagged", "flagged"), ("not tested", "nt")):
        t = t.replace(f"<b>{word}</b>", f'<b class="{cls}">{word}</b>')
    return t


def to_html(page: Page) -> str:
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           f"<title>{html.escape(page.title)}</title><style>{CSS}</style></head><body>",
           f"<h1>{html.escape(page.title)}</h1>"]
    for b in page.blocks:
        if b[0] == "h2":
            out.append(f"<h2>{_inline(b[1])}</h2>")
        elif b[0] == "p":
            out.append(f"<p>{_inline(b[1])}</p>")
        elif b[0] == "ul":
            out.append("<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in b[1]) + "</ul>")
        elif b[0] == "table":
            out.append("<table><tr>" + "".join(f"<th>{_inline(h)}</th>" for h in b[1]) + "</tr>")
            out += ["<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in r) + "</tr>"
                    for r in b[2]]
            out.append("</table>")
        elif b[0] == "img":
            out.append(f'<p><img src="{html.escape(b[1])}" alt="{html.escape(b[2])}"></p>'
                       f'<p class="cap">{_inline(b[2])}</p>')
        elif b[0] == "code":
            out.append(f"<pre>{html.escape(b[1])}</pre>")
    out.append("</body></html>")
    return "\n".join(out)


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (:func:`kernel_verify.verify.atomic.write_text`)."""
    write_text(path, text)


def write_page(page: Page, folder: Path, stem: str) -> None:
    write_atomic(folder / f"{stem}.md", to_markdown(page))
    write_atomic(folder / f"{stem}.html", to_html(page))
