"""ASGI entry point: `uvicorn taproot_site.asgi:application --lifespan on`.

Django's ASGI handler refuses lifespan events, so a small dispatcher sits on top: it
answers the lifespan protocol itself and hands every HTTP request to Django.
"""

import os
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "taproot_site.settings")

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


class TaprootASGI:
    def __init__(self) -> None:
        self.django_app = get_asgi_application()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.lifespan(receive, send)
            return
        await self.django_app(scope, receive, send)

    async def lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return


def build_application() -> TaprootASGI:
    """A fresh application (tests build one per server)."""
    return TaprootASGI()


application = build_application()
