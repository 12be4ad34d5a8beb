"""What every run report and view page draws with: matplotlib on the file-only backend, the
shared bar and citation-vs-inclusion figures, and the self-contained HTML page (the Markdown
report, then the figures as embedded PNGs) that the grid, the studies and the perspectives view
write."""

from __future__ import annotations

import base64
import html
import io
from typing import Any

from xlrag.outputs import document_kind
from xlrag.text import strip_controls

__all__ = ["HTML_PAGE", "citation_inclusion_figure", "grouped_bars", "html_document", "png", "pyplot"]


def pyplot() -> Any:
    """matplotlib.pyplot on the file-only Agg backend, or None when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def png(fig: Any) -> bytes:
    """The figure as PNG bytes; the figure is closed."""
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=110)
    pyplot().close(fig)
    return buf.getvalue()


def grouped_bars(groups: list[str], series: dict[str, list[float | None]], *, top: float,
                 ylabel: str | None = None) -> bytes:
    """One bar per series in each group (a missing value draws as 0)."""
    fig, ax = pyplot().subplots(figsize=(max(4, (0.5 + 0.35 * len(series)) * len(groups) + 2), 3))
    width = 0.8 / len(series)
    for i, (label, values) in enumerate(series.items()):
        ax.bar([j + i * width for j in range(len(groups))], [v or 0 for v in values], width, label=label)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(groups))], groups)
    ax.set_ylim(0, top)
    if ylabel:
        ax.set_ylabel(ylabel)
    ax.legend(fontsize=7)
    return png(fig)


def citation_inclusion_figure(civ: dict[str, dict], title: str) -> bytes:
    """Citation rate against inclusion rate, one point per passage language (BordIRlines §4.1):
    above the diagonal, a language is cited more often than it is shown."""
    fig, ax = pyplot().subplots(figsize=(3.6, 3.2))
    for lang, v in civ.items():
        if v["inclusion_rate"] is not None and v["citation_rate"] is not None:
            ax.scatter(v["inclusion_rate"], v["citation_rate"])
            ax.annotate(lang, (v["inclusion_rate"], v["citation_rate"]))
    ax.plot([0, 1], [0, 1], linestyle=":", color="grey")
    ax.set_xlabel("inclusion rate")
    ax.set_ylabel("citation rate")
    ax.set_title(title, fontsize=7)
    return png(fig)


_PAGE_HEAD = "<!doctype html><html><head><meta charset='utf-8'><title>"
_PAGE_STYLE = ("</title><style>body{font-family:sans-serif;max-width:70em;margin:auto}pre{white-space:pre-wrap}"
               "figure{display:inline-block;margin:.5em}</style>")


def _our_page(text: str) -> str | None:
    title_end = text.find("</title>")
    ours = text.startswith(_PAGE_HEAD) and title_end >= 0 and text.startswith(_PAGE_STYLE, title_end)
    return None if ours else "it is not a page xlrag wrote"


# what html_document's pages are (ask --perspectives --html): a file of anything else is refused, not replaced
HTML_PAGE = document_kind("an HTML page", "view.html", _our_page)


def html_document(title: str, md: str, figs: dict[str, bytes]) -> str:
    """A self-contained page: the Markdown report, then the figures as embedded PNGs. Corpus and
    model text reach it (a perspectives page, a report's answers): its control characters are
    dropped, since html.escape leaves an ESC or a NUL as it is."""
    title, md = strip_controls(title), strip_controls(md)
    body = "<pre>" + html.escape(md) + "</pre>"
    imgs = "".join(
        f'<figure><img alt="{html.escape(name)}" src="data:image/png;base64,{base64.b64encode(png).decode()}">'
        f"<figcaption>{html.escape(name)}</figcaption></figure>" for name, png in figs.items())
    return f"{_PAGE_HEAD}{html.escape(title)}{_PAGE_STYLE}</head><body>{body}{imgs}</body></html>"
