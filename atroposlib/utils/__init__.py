"""atroposlib.utils package."""
