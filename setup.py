"""Build the optional C column scanner (skillaudit/_scan.c); the metadata lives in pyproject.toml.

`optional=True`: without a C compiler the install still succeeds and run logs are read with
msgspec alone (slower, same results).
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("skillaudit._scan", ["skillaudit/_scan.c"], optional=True)])
