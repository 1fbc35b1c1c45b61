"""One place that runs a stdlib HTTP handler on 127.0.0.1 (ephemeral port) in a daemon thread, for every fake."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class LoopbackServer:
    """A ``ThreadingHTTPServer`` bound to loopback only, served until :meth:`close`."""

    def __init__(self, handler: type[BaseHTTPRequestHandler], poll_interval: float = 0.5) -> None:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": poll_interval},
                                        daemon=True)
        self._thread.start()

    @property
    def port(self) -> int:
        """The bound port."""
        return int(self.httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.port}"

    def close(self, join_timeout: float = 5.0) -> None:
        """Stop serving and release the port."""
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(timeout=join_timeout)
