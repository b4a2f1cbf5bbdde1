"""atroposlib.inference package."""
