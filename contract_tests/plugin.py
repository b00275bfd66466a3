"""The pytest plugin registered under ``pytest11``: thin hooks and fixtures over the library."""

from __future__ import annotations
