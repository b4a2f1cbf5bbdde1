"""atroposlib.frontend package."""
