"""mypy understands zope.interface: the mypy-zope plugin is configured (``pyproject.toml``
``[tool.mypy] plugins``) and installed with the dev extras, so an ``@implementer`` class is
accepted where its interface is expected, an interface's methods are called without a false
"missing self" error, and a class that does not implement the interface is still refused.

Without the plugin mypy reports every such use in the Twisted layers (``IPushProducer``,
``IStreamHost`` ...) as an error, which hides the real ones."""

from __future__ import annotations

import configparser

from mypy import api
from process_support import REPO

SOURCE = '''
from zope.interface import Interface, implementer


class IGreeter(Interface):
    def greet(name: str) -> str:
        """Say hello to name."""


@implementer(IGreeter)
class Greeter:
    def greet(self, name: str) -> str:
        return "hello " + name


def use(greeter: IGreeter) -> str:
    return greeter.greet("you")


use(Greeter())
use(object())
'''


def test_mypy_with_the_project_config_checks_zope_interfaces():
    stdout, stderr, status = api.run([
        "--config-file", str(REPO / "pyproject.toml"), "--cache-dir", "/dev/null",
        "--no-error-summary", "-c", SOURCE])
    assert not stderr, stderr
    errors = [line for line in stdout.splitlines() if ": error:" in line]
    # only the object() that does not provide IGreeter (line 21 of SOURCE)
    assert errors == ['<string>:21: error: Argument 1 to "use" has incompatible type "object"; '
                      'expected "IGreeter"  [arg-type]'], stdout
    assert status == 1


def test_the_dev_extras_install_the_plugin():
    config = configparser.ConfigParser(interpolation=None)
    config.read(REPO / "setup.cfg")
    dev = config["options.extras_require"]["dev"]
    assert any(line.strip().startswith("mypy-zope") for line in dev.splitlines())
