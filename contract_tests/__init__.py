"""The contract suite: checks of a live Explain API (or the bundled mock) over HTTP."""
