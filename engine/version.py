"""The package's version, in a module of its own: modules below `engine/__init__` read it from here, so none imports
the package's public face (which lists every layer) to learn it."""
__version__ = "0.1.0"
