"""docs/install.rst lists every extra that setup.cfg declares."""

from __future__ import annotations

import configparser
import re

from process_support import REPO


def test_every_extra_of_setup_cfg_is_in_the_install_guide():
    config = configparser.ConfigParser(interpolation=None)
    config.read(REPO / "setup.cfg")
    extras = set(config["options.extras_require"])
    assert {"metrics", "otel", "spark", "dev"} <= extras
    guide = (REPO / "docs" / "install.rst").read_text()
    table = guide[guide.index("Extras\n------"):guide.index("Checking the install")]
    documented = set(re.findall(r"^``([a-z0-9_-]+)``\s+\S", table, re.MULTILINE))
    assert documented == extras
