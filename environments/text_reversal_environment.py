"""Text reversal: reverse a short phrase character by character — procedural, no data needed.

The same machinery as letter counting (``letter_counting_environment.py``): phrases of 1-3 words from
reasoning-gym's word list, the answer inside ``<answer></answer>``; reward 1.0 for the exact reversed
text, 0.0 otherwise.

    python environments/text_reversal_environment.py process --env.tokenizer_name MODEL_DIR \\
        --openai.base_url http://127.0.0.1:9001/v1 --env.total_steps 2
"""

from letter_counting_environment import TextReversalEnv

__all__ = ["TextReversalEnv"]

if __name__ == "__main__":
    TextReversalEnv.cli()
