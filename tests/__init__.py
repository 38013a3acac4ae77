"""The test suite: fixtures in conftest.py, plain helpers in helpers.py."""
