"""atroposlib.cli package."""
