"""Rules and the engine that runs them."""
