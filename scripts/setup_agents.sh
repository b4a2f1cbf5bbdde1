#!/usr/bin/env bash
# Gives the agent-framework conformance suite (tests/agents, tests/real_vllm/test_proxy_agents.py) and the
# agent learning bench (bench/agent_learning.py) the real agent frameworks, each in its own environment
# (their dependency pins clash with each other and with the project's), torch-free, outside the repo so
# that repeated runs on one machine reuse them. One venv per framework, each with its own switches:
#   - ATROPOS_AGENT_PYTHON_<NAME> set (NAME upper-cased, '-' as '_': ATROPOS_AGENT_PYTHON_OPENAI_AGENTS):
#     that Python is used for the framework; nothing is installed.
#   - ATROPOS_SKIP_AGENTS=1: nothing is installed (the suite skips).
#   - otherwise: into ${ATROPOS_AGENTS_DIR:-$HOME/.cache/atroposlib/agents}/<name>-<version> (20 s to
#     2.5 minutes and 70-750 MB each, the first time).
# `bash scripts/setup_agents.sh NAME...` installs only those. A failed install never fails the caller: the
# reason goes to install-failed.txt in that folder, is printed, and that framework's tests skip with it;
# delete that file to try again.
# Keep the names and versions equal to FRAMEWORKS in atroposlib/interop/agents/frameworks.py (a test checks).
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="${ATROPOS_AGENTS_DIR:-$HOME/.cache/atroposlib/agents}"

# name|version|pip specs|import check
FRAMEWORKS=(
  "openai|3.57.0|openai==3.57.0|import openai"
  "openai-agents|0.24.0|openai-agents==0.24.0|import agents"
  "smolagents|1.26.0|smolagents[openai]==1.26.0|import smolagents, openai"
  "mini-swe-agent|2.4.6|mini-swe-agent==2.4.6 litellm==1.110.2|import minisweagent, litellm"
  "langchain-openai|1.7.4|langchain-openai==1.7.4 langgraph==1.2.22|import langchain_openai, langgraph"
  "hermes-agent|0.19.0|hermes-agent==0.19.0|import importlib.metadata as m; m.version('hermes-agent')"
)

install_one() {
  local name=$1 version=$2 specs=$3 check=$4 var
  var="ATROPOS_AGENT_PYTHON_$(echo "$name" | tr 'a-z-' 'A-Z_')"
  # shellcheck source=lib_cached_venv.sh
  source "$HERE/lib_cached_venv.sh"
  cached_venv_start setup_agents "$name" "$var" ATROPOS_SKIP_AGENTS "the $name conformance tests"
  cached_venv_begin "$ROOT/$name-$version" .atroposlib-agent-ok
  cached_venv_create 2 "$specs" "under three minutes"
  # shellcheck disable=SC2086  # several specs, split on purpose
  cached_venv_pip_install $specs
  cached_venv_verify "$name==$version" "$VENV/bin/python" -c \
    "$check; import importlib.util as u; assert u.find_spec('torch') is None, 'torch came in'"
  cached_venv_done
}

wanted=("$@")
for entry in "${FRAMEWORKS[@]}"; do
  IFS='|' read -r name version specs check <<<"$entry"
  if [ ${#wanted[@]} -gt 0 ] && [[ ! " ${wanted[*]} " == *" $name "* ]]; then
    continue
  fi
  # a subshell: the library exits when a framework is done, skipped or failed
  ( install_one "$name" "$version" "$specs" "$check" )
done
exit 0
