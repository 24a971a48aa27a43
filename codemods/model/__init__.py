"""The semantic model: what fixitem knows about values, calls and devices (see README.md)."""
