"""The contract files (JSON Schema, OpenAPI, examples), shipped as package data."""
