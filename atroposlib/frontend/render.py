"""Old path of ``atroposlib.report.render``, kept so existing imports work: this name is that module."""

import sys

from atroposlib.report import render as _moved

sys.modules[__name__] = _moved
