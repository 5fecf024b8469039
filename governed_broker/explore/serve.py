"""The explorer's server process: Solara's app behind the access token.

``Explorer`` (``explore.server``) starts ``python -m governed_broker.explore.serve --host H
--port P --cull-after S`` with the directory to show and the token in its environment. This
module does what ``solara run --production`` does for the app (Solara's Starlette app, in
production mode, without usage telemetry) and puts ``access.TokenGate`` in front of it.

Sessions: a browser tab that closes ends its WebSocket; Solara keeps that session's state for
``--cull-after`` seconds (so a page that reloads or loses its connection for a moment comes
back as it was) and then frees it. Solara's default is 24 hours, which kept about 230 MB per
closed tab of a 2,000-household run; here it is minutes (``CULL_AFTER_S``).
"""

from __future__ import annotations

import argparse
import os
import sys

from governed_broker.explore.access import ENV_TOKEN, TokenGate, cookie_name

#: The Solara app the server serves.
APP = "governed_broker.explore.app"
#: Seconds a closed browser session is kept before it is freed.
CULL_AFTER_S = 120


def main(argv: list[str] | None = None) -> int:
    """Serve the explorer until terminated (SIGTERM, SIGINT)."""
    parser = argparse.ArgumentParser(prog="python -m governed_broker.explore.serve")
    parser.add_argument("--host", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--cull-after", type=float, default=CULL_AFTER_S)
    args = parser.parse_args(argv)
    token = os.environ.pop(ENV_TOKEN, "")  # not inherited by anything started from here
    if not token:
        print(f"{ENV_TOKEN} is not set: start the explorer with `governed-broker explore`",
              file=sys.stderr)
        return 2
    # what `solara run --production` sets, before Solara reads its settings
    os.environ.update({
        "SOLARA_APP": APP, "SOLARA_MODE": "production",
        "SOLARA_TELEMETRY_MIXPANEL_ENABLE": "False",
        "SOLARA_KERNEL_CULL_TIMEOUT": f"{args.cull_after:g}s",
        "SERVER_NAME": args.host, "SERVER_PORT": str(args.port)})
    import uvicorn
    from solara.server.starlette import app

    gated = TokenGate(app, token, cookie_name(args.port))
    # no access log: the first request's address holds the token
    uvicorn.run(gated, host=args.host, port=args.port, log_level="warning", access_log=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
