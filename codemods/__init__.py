"""Rules and the engine that runs them."""

if __name__ != "fixitem.codemods":  # imported by its folder name from the repository root
    from fixitem._one_copy import alias_package

    alias_package(__name__, "fixitem.codemods")
