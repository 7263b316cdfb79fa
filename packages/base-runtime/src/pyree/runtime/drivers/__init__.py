"""The local CPU drivers, written with the Python driver SDK and registered like any other driver."""
