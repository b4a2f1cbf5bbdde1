"""Old path of ``atroposlib.viewer.sources``, kept so existing imports work: this name is that module."""

import sys

from atroposlib.viewer import sources as _moved

sys.modules[__name__] = _moved
