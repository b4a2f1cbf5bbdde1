"""atroposlib.envs package."""
