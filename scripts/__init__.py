"""The project's scripts: the local stand-ins, the benchmarks and the demo, each run as a module from the
repository's root (``python -m scripts.bench``, ``python -m scripts.standin --help``)."""
