"""Where per-call state lives: the state interface, the journal, the limiter, memory and Redis."""
