"""Old path of ``atroposlib.datagen.export``, kept so existing imports work: this name is that module."""

import sys

from atroposlib.datagen import export as _moved

sys.modules[__name__] = _moved
