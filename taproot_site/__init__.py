"""The Django project: settings, URL routes, the ASGI entry point that admits /mcp
requests and hands them to mcp_bridge, and the uvicorn launcher. It imports the apps;
no app imports it."""
