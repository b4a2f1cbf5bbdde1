"""Old path of ``atroposlib.report.html``, kept so existing imports work: this name is that module."""

import sys

from atroposlib.report import html as _moved

sys.modules[__name__] = _moved
