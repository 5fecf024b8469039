"""Who may use an explorer server: the holder of its access token (Jupyter's pattern).

Each server makes a random token when it starts (``new_token``) and prints its address with it
(``http://127.0.0.1:8765/?token=...``). The first request that carries the token gets it back
as a cookie (HttpOnly, SameSite=Lax, named after the port: two explorers on one machine keep
their own) and is redirected to the same address without the token, so the token leaves the
address bar and the browser's history; every later request, the page's WebSocket included,
carries the cookie. A request with neither is refused: HTTP with 403 and a page that asks for
the token, a WebSocket with close code 1008. Only ``/readyz`` (which says that the server is
up, and nothing about the run) is open, for the start-up check.

On a shared login node this keeps other users, who can reach the loopback port but never see
the terminal the address was printed in, away from the run's prompts and replies. The token
reaches the server process through its environment (``ENV_TOKEN``), which other users cannot
read, never through its command line, which they can (``ps``).
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from http.cookies import CookieError, SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode

#: Environment variable carrying the token from ``Explorer`` to its server process.
ENV_TOKEN = "GOVERNED_BROKER_EXPLORE_TOKEN"
#: The query parameter that carries the token.
TOKEN_PARAM = "token"
#: Paths served without the token (say nothing about the run).
OPEN_PATHS = frozenset({"/readyz"})

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_REFUSED_PAGE = b"""<!doctype html><meta charset="utf-8"><title>governed_broker explorer</title>
<p>This explorer needs its access token. Open the address that <code>governed-broker
explore</code> (or <code>run --explore</code>) printed when it started; it ends in
<code>?token=...</code>. Or paste the token here:</p>
<form method="get"><input name="token" type="password" size="50" autofocus>
<button type="submit">Open</button></form>
"""


def new_token() -> str:
    """A fresh random token (256 bits, URL-safe)."""
    return secrets.token_urlsafe(32)


def cookie_name(port: int) -> str:
    """The cookie holding the token of the server on ``port``."""
    return f"governed_broker_explore_{int(port)}"


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an ``--host`` value) reaches this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class TokenGate:
    """ASGI middleware that passes only requests carrying the token (module documentation).

    Args:
        app: The application behind it (Solara's Starlette app).
        token: The server's token.
        cookie: The name of the cookie that carries it (``cookie_name``).
    """

    def __init__(self, app: ASGIApp, token: str, cookie: str) -> None:
        if len(token) < 16:
            raise ValueError("the explorer's token is missing or too short")
        self.app, self.cookie = app, cookie
        self._token = token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on, set the cookie, or refuse it (class documentation)."""
        if scope["type"] not in ("http", "websocket") or scope.get("path") in OPEN_PATHS:
            await self.app(scope, receive, send)  # the lifespan, the liveness probe
            return
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"),
                          keep_blank_values=True)
        given = [v for k, v in query if k == TOKEN_PARAM]
        if scope["type"] == "http" and given and self._valid(given[-1]):
            await self._admit(scope, send, [(k, v) for k, v in query if k != TOKEN_PARAM])
        elif self._valid(self._cookie(scope)):
            await self.app(scope, receive, send)
        elif scope["type"] == "websocket":
            await receive()  # websocket.connect
            await send({"type": "websocket.close", "code": 1008})
        else:
            await _respond(send, 403, _REFUSED_PAGE, [(b"content-type", b"text/html")])

    def _valid(self, presented: str | None) -> bool:
        return presented is not None and hmac.compare_digest(presented.encode(), self._token)

    def _cookie(self, scope: Scope) -> str | None:
        for name, value in scope.get("headers", []):
            if name != b"cookie":
                continue
            jar: SimpleCookie = SimpleCookie()
            try:
                jar.load(value.decode("latin-1"))
            except CookieError:
                continue
            if self.cookie in jar:
                return jar[self.cookie].value
        return None

    async def _admit(self, scope: Scope, send: Send, rest: list[tuple[str, str]]) -> None:
        """Set the cookie and send the browser to the same address without the token."""
        # this server's own path only: "//host" would send the browser elsewhere
        path = "/" + (scope.get("root_path", "") + scope["path"]).lstrip("/")
        location = quote(path, safe="/")
        if rest:
            location += "?" + urlencode(rest)
        cookie = (f"{self.cookie}={self._token.decode()}; Path=/; HttpOnly; SameSite=Lax")
        await _respond(send, 303, b"", [(b"location", location.encode("latin-1")),
                                        (b"set-cookie", cookie.encode("latin-1")),
                                        (b"cache-control", b"no-store")])


async def _respond(send: Send, status: int, body: bytes,
                   headers: list[tuple[bytes, bytes]]) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [*headers, (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
