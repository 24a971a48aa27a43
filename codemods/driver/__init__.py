"""Running rules over files: discovery, the engine, notebooks, one fix at a time."""
