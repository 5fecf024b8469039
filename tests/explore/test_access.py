"""The explorer's access token (explore.access) in front of a small ASGI app.

Driven with ASGI messages directly; and the warning for a server bound beyond this machine.
"""

from __future__ import annotations

import asyncio

import pytest

from governed_broker.explore.access import TokenGate, cookie_name, is_loopback
from governed_broker.explore.server import exposure_warning

TOKEN = "t" * 43
SECRET = b"every prompt of the run"


async def _app(scope, receive, send) -> None:
    """The run's pages: anything it serves is the run's content."""
    if scope["type"] == "websocket":
        await receive()
        await send({"type": "websocket.accept"})
        await send({"type": "websocket.send", "bytes": SECRET})
        return
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": SECRET})


def _call(path: str, query: str = "", cookie: str | None = None, kind: str = "http"):
    """(status or close code, headers, body) of one request through the gate."""
    headers = [(b"cookie", cookie.encode())] if cookie else []
    scope = {"type": kind, "path": path, "query_string": query.encode(), "headers": headers,
             "root_path": ""}
    sent = []
    incoming = [{"type": "websocket.connect"} if kind == "websocket" else
                {"type": "http.request", "body": b""}]

    async def receive():
        return incoming.pop(0) if incoming else {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    asyncio.run(TokenGate(_app, TOKEN, cookie_name(8765))(scope, receive, send))
    start = sent[0]
    code = start.get("status", start.get("code", 1000 if start["type"].endswith("accept")
                                         else None))
    head = {k.decode(): v.decode() for k, v in start.get("headers", [])}
    body = b"".join(m.get("body", b"") or m.get("bytes", b"") for m in sent[1:])
    return code, head, body


def test_without_the_token_nothing_of_the_run_is_served() -> None:
    for path, query in (("/", ""), ("/", "tab=decisions"), ("/static/main.js", ""),
                        ("/", "token=" + "x" * 43), ("/resourcez", "")):
        code, _, body = _call(path, query)
        assert code == 403 and b"needs its access token" in body and SECRET not in body
    code, _, body = _call("/", cookie=f"{cookie_name(8765)}={'x' * 43}")
    assert code == 403
    code, _, body = _call("/jupyter/api/kernels/k/channels", kind="websocket")
    assert code == 1008 and SECRET not in body
    assert _call("/readyz")[0] == 200  # says only that the server is up


def test_the_token_becomes_a_cookie_and_leaves_the_address() -> None:
    code, head, body = _call("/", f"tab=decisions&token={TOKEN}&status=rejected")
    assert code == 303 and SECRET not in body
    assert head["location"] == "/?tab=decisions&status=rejected"
    assert head["set-cookie"].startswith(f"{cookie_name(8765)}={TOKEN};")
    assert "HttpOnly" in head["set-cookie"] and "SameSite=Lax" in head["set-cookie"]
    cookie = f"other=1; {cookie_name(8765)}={TOKEN}"
    assert _call("/", "tab=decisions", cookie=cookie)[2] == SECRET
    assert _call("/jupyter/api/kernels/k/channels", cookie=cookie, kind="websocket")[2] == SECRET
    # another server's cookie opens nothing here
    assert _call("/", cookie=f"{cookie_name(8766)}={TOKEN}")[0] == 403


def test_the_redirect_never_leaves_this_server() -> None:
    assert _call("//evil.example/", f"token={TOKEN}")[1]["location"] == "/evil.example/"


def test_a_short_token_is_refused() -> None:
    with pytest.raises(ValueError, match="token"):
        TokenGate(_app, "", cookie_name(1))


@pytest.mark.parametrize("host, loopback", [("127.0.0.1", True), ("127.0.0.2", True),
                                            ("::1", True), ("localhost", True),
                                            ("0.0.0.0", False), ("::", False),
                                            ("10.1.2.3", False), ("login1", False)])
def test_binding_beyond_this_machine_is_warned_about(host, loopback) -> None:
    assert is_loopback(host) is loopback
    warning = exposure_warning(host)
    assert (warning is None) is loopback
    if warning:
        assert f"--host {host}" in warning and "token" in warning and "SSH tunnel" in warning
