"""Example models bundled with fixitem, used by ``fixitem demo``."""
