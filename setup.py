"""Build the optional C extensions: the run-log column scanner (skillaudit/runs/_scan.c) and the
permutation test's inner loop (skillaudit/analysis/_perm.c); the metadata lives in pyproject.toml.

`optional=True`: without a C compiler the install still succeeds and run logs are read with
msgspec alone and the permutation test with numpy (slower, same results).
"""

from setuptools import Extension, setup

setup(ext_modules=[
    Extension("skillaudit.runs._scan", ["skillaudit/runs/_scan.c"], optional=True),
    # no FMA contraction: its sums must be numpy's, bit for bit (library_effect.heterogeneity_tests)
    Extension("skillaudit.analysis._perm", ["skillaudit/analysis/_perm.c"], optional=True, extra_compile_args=["-ffp-contract=off"]),
])
