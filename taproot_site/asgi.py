"""ASGI entry point: `uvicorn taproot_site.asgi:application --lifespan on`.

A small dispatcher sits on top of Django. It answers the lifespan protocol itself
(Django refuses it), refusing to start on a recall index of the other profile, on an
embedder that cannot load or on vectors another embedder made, and keeps
the MCP endpoint serving for the life of the process; it sends `/mcp` to that endpoint
(mcp_bridge.admission, which admits each request before the MCP SDK sees it) and
everything else to Django through the edge's gate (taproot_site.edge, which bounds what a
request may send before Django reads it).
"""

import os
from contextlib import AsyncExitStack

from asgiref.sync import sync_to_async
from django.core.asgi import get_asgi_application
from django.db import connections

from mcp_bridge.admission import Receive, Scope, Send

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "taproot_site.settings")


class StartupRefused(Exception):
    """The server must not start; the message says what to do."""


def _recover_interrupted_imports() -> None:
    """Undo the imports a process that is gone left half-written (memories.services.
    import_runs): the store is as it was before each of them."""
    from memories.services import recover_interrupted_imports

    try:
        recover_interrupted_imports()
    finally:
        connections.close_all()


def _warm_recent_owners() -> None:
    """Read ahead the common words of the accounts likely to call soon (memories.recall.
    warming), before the worker serves: read beside the first calls, it slowed them."""
    from memories.recall import warm_recent_owners

    try:
        warm_recent_owners()
    finally:
        connections.close_all()


def _recall_index_problem() -> str | None:
    """Why recall cannot serve as configured: the index's profile, or the embedder (checked
    here; its model loads on first use)."""
    from django.conf import settings

    from memories.recall import embedder_problem, index_mismatch

    try:
        return index_mismatch() or embedder_problem(settings.TAPROOT_EMBEDDER)
    finally:
        connections.close_all()


class TaprootASGI:
    def __init__(self) -> None:
        self.django_app = get_asgi_application()
        # Imported after Django is set up: the MCP bridge uses models and settings.
        from django.urls import reverse

        from mcp_bridge.admission import McpAdmission
        from taproot_site.edge import BodyGate

        self.mcp = McpAdmission()
        self.edge = BodyGate(self.django_app, import_path=reverse("dashboard:import"))
        self._lifespan_stack = AsyncExitStack()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.lifespan(receive, send)
            return
        if scope["type"] == "http" and scope["path"] == self.mcp.path:
            await self.mcp(scope, receive, send)
            return
        await self.edge(scope, receive, send)

    async def lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    await self.start()
                except StartupRefused as error:
                    await send({"type": "lifespan.startup.failed", "message": str(error)})
                    return
                except Exception as error:
                    await send({"type": "lifespan.startup.failed", "message": repr(error)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self._lifespan_stack.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def start(self) -> None:
        # Here rather than as a system check: `migrate` runs the checks first, and the
        # command that repairs the index needs the migrated tables.
        problem = await sync_to_async(_recall_index_problem, thread_sensitive=True)()
        if problem:
            raise StartupRefused(problem)
        await sync_to_async(_recover_interrupted_imports, thread_sensitive=True)()
        await sync_to_async(_warm_recent_owners, thread_sensitive=True)()
        await self._lifespan_stack.enter_async_context(self.mcp.serving())


def build_application() -> TaprootASGI:
    """A fresh application (tests build one per server)."""
    return TaprootASGI()


application = build_application()
