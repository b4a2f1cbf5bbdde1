"""Old path of ``atroposlib.viewer.app``, kept so existing imports work: this name is that module."""

import sys

from atroposlib.viewer import app as _moved

sys.modules[__name__] = _moved
