from fixitem.cli import entry

entry()
