"""fixitem: find and rewrite host syncs and graph breaks in PyTorch code."""
