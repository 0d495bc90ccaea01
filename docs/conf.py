"""Sphinx configuration of the rsocket_tx documentation (build: ``make docs``)."""

import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, ROOT)

import rsocket_tx  # noqa: E402 - after the checkout is on sys.path

project = "rsocket_tx"
author = "the rsocket_tx authors"
copyright = "the rsocket_tx authors, Apache-2.0"
release = rsocket_tx.__version__  # the one source of the version (setup.cfg reads it too)
version = release

extensions = [
    "sphinx.ext.autodoc",
]

# Docstrings are plain reST (:param:, :returns:, :raises:), no napoleon.
autodoc_default_options = {
    "members": True,
    "show-inheritance": True,
    "member-order": "bysource",
}
autodoc_typehints = "signature"

nitpicky = False
exclude_patterns = ["_build"]
root_doc = "index"
highlight_language = "python3"

html_theme = "alabaster"
html_title = f"rsocket_tx {release}"
html_theme_options = {
    "description": "RSocket 1.0 for Twisted",
    "fixed_sidebar": True,
}
