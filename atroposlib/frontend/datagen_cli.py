"""Old path of ``atroposlib.datagen.cli``, kept so existing imports work: this name is that module."""

import sys

from atroposlib.datagen import cli as _moved

sys.modules[__name__] = _moved
