"""Serving the app: the mock's own asyncio HTTP/1.1 server, and --workers."""
