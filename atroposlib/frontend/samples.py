"""Old path of ``atroposlib.viewer.samples``, kept so existing imports work: this name is that module."""

import sys

from atroposlib.viewer import samples as _moved

sys.modules[__name__] = _moved
