"""Calling endpoints we do not control: the SSRF guard, the pinned transport and the key vault.

A submitted model endpoint is fetched from inside our network, so its URL is checked server-side
(:func:`check_url`: https only, public addresses only, none of the product's own services, no numeric tricks),
its address is pinned (:func:`pinned_transport`: every connection goes to the checked address, no second DNS
lookup, no redirect), and its API key is sealed at rest (:class:`KeyVault`).  The LLM client (:mod:`grebench.llm`)
and the submission queue (:mod:`grebench.submissions`) use these; nothing here imports a stage.
"""

from grebench.endpoints._neterror import CAUSE_TEXT, describe_network_error, network_cause
from grebench.endpoints._pinned import pinned_async_transport, pinned_transport
from grebench.endpoints._secrets import KeyUnreadable, KeyVault, Secret
from grebench.endpoints._urlcheck import (
    PinnedEndpoint,
    Resolver,
    URLRejected,
    check_redirect,
    check_submitted_url,
    check_url,
    own_service_urls,
)

__all__ = ["CAUSE_TEXT", "KeyUnreadable", "KeyVault", "PinnedEndpoint", "Resolver", "Secret", "URLRejected",
           "check_redirect", "check_submitted_url", "check_url", "describe_network_error", "network_cause",
           "own_service_urls", "pinned_async_transport", "pinned_transport"]
