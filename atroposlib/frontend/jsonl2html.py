"""Old path of ``atroposlib.report.jsonl2html``, kept so existing imports work: this name is that module."""

import sys

from atroposlib.report import jsonl2html as _moved

sys.modules[__name__] = _moved
