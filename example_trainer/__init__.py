"""The example GRPO trainer and the end-to-end CPU demo."""
