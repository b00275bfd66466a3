"""The bottom layer: the Explain API contract itself (spec facts, schema, rules, validator)."""
