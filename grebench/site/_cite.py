"""The foot of every page of the site and of the app: how to cite GRE-bench (BibTeX: the reference of the
repository's ``CITATION.cff``), the licence of the reviews and of the code, a contact and the source.

What only the operator knows (the contact, where the source is published, the licence of the data they ingested)
comes from the ``[site]`` settings; with none set the foot says so rather than inventing an address.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

import grebench
from grebench.settings import SiteSettings

#: The reference, as CITATION.cff gives it (a test keeps the two in step).
TITLE = "GRE-bench: a contamination-resistant leaderboard of LLMs writing peer reviews, scored with GEM-S"
AUTHORS = "GRE-bench developers"
YEAR = 2026
CODE_LICENCE = "AGPL-3.0-or-later"
#: Where a licence named in ``site_data_licence`` is read in full (spelled out on the page).
LICENCE_URLS = {"CC BY 4.0": "https://creativecommons.org/licenses/by/4.0/"}


@dataclass(frozen=True)
class Colophon:
    """What the foot of a page says (:func:`colophon`)."""

    contact: str
    source_url: str
    data_licence: str
    version: str

    @property
    def bibtex(self) -> str:
        """The BibTeX entry (``@software``), the source URL in it when one is set."""
        fields = [("title", "{" + TITLE.replace("GRE-bench", "{GRE-bench}").replace("LLMs", "{LLMs}")
                   .replace("GEM-S", "{GEM-S}") + "}"),
                  ("author", "{{" + AUTHORS + "}}"), ("year", "{" + str(YEAR) + "}"),
                  ("version", "{" + self.version + "}"), ("license", "{" + CODE_LICENCE + "}")]
        if self.source_url:
            fields.append(("url", "{" + self.source_url + "}"))
        body = ",\n".join(f"  {key} = {value}" for key, value in fields)
        return f"@software{{grebench,\n{body}\n}}"

    @property
    def data_licence_url(self) -> str | None:
        """Where the data's licence is read in full, when it is one this module knows."""
        return LICENCE_URLS.get(self.data_licence.strip())

    @property
    def licence_text(self) -> str:
        """The licence line, in words."""
        named = f"{self.data_licence} ({self.data_licence_url})" if self.data_licence_url else self.data_licence
        return (f"Reviews: {named}, by their (anonymous) reviewers, from OpenReview.net; papers' titles "
                f"and abstracts are their authors'. Code: {CODE_LICENCE}.")

    @property
    def contact_text(self) -> str:
        """The contact line, in words."""
        return f"Contact: {self.contact}" if self.contact else "Contact: none set by this site's operator."

    @property
    def source_text(self) -> str:
        """The source line, in words (:meth:`html` links the URL)."""
        return (f"Source: {self.source_url} (grebench {self.version}, {CODE_LICENCE})" if self.source_url else
                f"Source: grebench {self.version} ({CODE_LICENCE}); this site's operator has set no source URL.")

    def html(self) -> str:
        """The foot as HTML, escaped here (the app shows it as is; the site's base template includes it): the
        BibTeX folded, then the licence, contact and source lines.  Only the source is a link, and only an
        http(s) URL the operator set: the site links nothing else outside itself."""
        e = html.escape
        if self.source_url.startswith(("https://", "http://")):
            source = f'Source: <a href="{e(self.source_url)}">{e(self.source_url)}</a> (grebench {e(self.version)})'
        else:  # no URL set, or not a web address: said in words, never made a link
            source = e(self.source_text)
        return (f'<div class="colophon"><details class="cite"><summary>Cite GRE-bench (BibTeX)</summary>'
                f'<pre class="bibtex" tabindex="0" style="overflow-x: auto; max-width: 100%">{e(self.bibtex)}</pre>'
                '</details>'
                f'<p class="licence">{e(self.licence_text)}</p><p class="contact">{e(self.contact_text)}</p>'
                f'<p class="source">{source}</p></div>')


def colophon(site: SiteSettings | None = None) -> Colophon:
    """The foot of the pages from the ``[site]`` settings (None: the defaults: no contact, no source URL)."""
    if site is None:
        return Colophon(contact="", source_url="", data_licence=str(SiteSettings.site_data_licence.default),
                        version=grebench.__version__)
    return Colophon(contact=site.site_contact.strip(), source_url=site.site_source_url.strip(),
                    data_licence=site.site_data_licence.strip() or str(SiteSettings.site_data_licence.default),
                    version=grebench.__version__)
