"""The mock's model, framework-free: sessions, steps, scripts, scenarios, verdicts."""
