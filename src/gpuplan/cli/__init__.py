"""The command-line interface: parses, calls the library, renders. It never computes."""
