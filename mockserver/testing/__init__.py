"""The mock for tests: over real HTTP, or in-process for httpx (respx) and requests (responses)."""
