"""The board history as the app shows it: the site's own history plot (:func:`grebench.site._plots.history_svg`)
embedded in an ``<img>`` as a data URI, or a line saying there is no history yet.

An ``<img>`` never runs what an SVG holds, and a data URI needs no file route (the app serves no file of the data
dir), so the figure is exactly the site's ``boards/<slug>-history.svg`` with nothing else to trust.
"""

from __future__ import annotations

import base64
import html

from grebench.site._plots import history_svg
from grebench.site._timeline import board_histories
from grebench.store import Store

#: What the app says for a board published in fewer than two board versions.
NO_HISTORY = "No history yet: a board's history is drawn once two board versions have published it."

CAPTION = ("Board history over the published board versions (serve, run or a replay's simulated days): per version, "
           "each candidate's score (band: 95% CI) and rank (band: 95% rank interval, from the same bootstrap over "
           "papers); the legend gives the rank and its interval in the latest version.")


def history_html(store: Store, board_id: str, title: str) -> str:
    """The history figure of board ``board_id`` (``title`` names it in the image's alt text), or
    :data:`NO_HISTORY` in a paragraph."""
    rows = board_histories(store, board_id).get(board_id)
    if not rows:
        return f'<p class="history-none">{html.escape(NO_HISTORY, quote=False)}</p>'
    data = base64.b64encode(history_svg(rows).encode("utf-8")).decode("ascii")
    alt = html.escape(f"Board history over the published board versions for {title}: score with its 95% CI and "
                      "rank with its 95% rank interval per candidate", quote=True)
    return (f'<figure class="board-history"><img src="data:image/svg+xml;base64,{data}" alt="{alt}" '
            f'style="max-width:100%;height:auto"><figcaption>{html.escape(CAPTION, quote=False)}</figcaption></figure>')
