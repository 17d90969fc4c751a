"""The Django project: settings, URL routes, the ASGI entry point that hands /mcp
requests to mcp_bridge, and the uvicorn launcher. It imports the apps;
no app imports it."""
