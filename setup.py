"""setuptools does not accept `cffi_modules` in pyproject.toml, so it is declared here."""
from setuptools import setup

setup(cffi_modules=["build_ffi.py:ffibuilder"])
