"""`podium_digits` as an MLCommons-layout implementation: `benchmarks/podium_digits/implementations/pytorch/`
with `run_and_time.sh`, a `config_<system>.sh` per system, a Dockerfile and a README, and the training
script itself (a copy of podium_reference/digits.py), so that a bundle carries everything a runner runs.

    write_implementation(org_folder, systems=["cpu-box"])
"""

from __future__ import annotations

from pathlib import Path

from podium_reference import digits

NAME = "pytorch"

RUN_AND_TIME = r"""#!/bin/bash
# run_and_time.sh of podium_digits, the MLCommons way: source config_<system>.sh first, then run this.
#
# Set by the runner (or by hand): DATADIR, the dataset folder (digits.csv); LOGDIR, where the result log
# goes; PODIUM_CONFIG, the job's hyperparameters as JSON (without it, they come from config_<system>.sh);
# SEED; PYTHON, the interpreter of the prepared environment (torch, scikit-learn, mlperf-logging).
set -euo pipefail

: "${DATADIR:?set DATADIR to the dataset folder (it holds digits.csv)}"
: "${LOGDIR:=./results}"
: "${SEED:=1}"
PYTHON="${PYTHON:-python3}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mkdir -p "$LOGDIR"

CONFIG="${PODIUM_CONFIG:-}"
if [ -z "$CONFIG" ]; then
    CONFIG="$LOGDIR/config_${SEED}.json"
    "$PYTHON" - "$CONFIG" <<EOF
import json, os, sys
json.dump({"seed": int(os.environ["SEED"]), "global_batch_size": int(os.environ["BATCHSIZE"]),
           "opt_name": os.environ.get("OPTIMIZER", "sgd"), "opt_base_learning_rate": float(os.environ["LR"]),
           "opt_weight_decay": float(os.environ["WD"]), "opt_momentum": float(os.environ["MOMENTUM"]),
           "max_epochs": int(os.environ.get("MAX_EPOCHS", "30"))}, open(sys.argv[1], "w"))
EOF
fi

start=$(date +%s)
echo "STARTING TIMING RUN AT $(date '+%Y-%m-%d %r')"
ret=0
"$PYTHON" "$HERE/digits.py" --config "$CONFIG" --log "$LOGDIR/result_${SEED}.txt" --data-dir "$DATADIR" \
    --device "${DEVICE:-auto}" || ret=$?
end=$(date +%s)
echo "ENDING TIMING RUN AT $(date '+%Y-%m-%d %r')"
echo "RESULT,PODIUM_DIGITS,${SEED},$((end - start)),${DGXSYSTEM:-unknown},$(date '+%Y-%m-%d %r')"
exit $ret
"""

CONFIG = """\
# config_{system}.sh: the system podium_digits ran on, and the hyperparameters it ran with there.
export DGXSYSTEM="{system}"
export DGXNNODES=1
export DGXNGPU=0
export DEVICE=cpu
export BATCHSIZE=32
export OPTIMIZER=sgd
export LR=0.05
export WD=0.0001
export MOMENTUM=0.9
export MAX_EPOCHS=30
export WALLTIME_MINUTES=10
"""

DOCKERFILE = """\
# The prepared environment of podium_digits: run_and_time.sh runs in it with the dataset at $DATADIR.
FROM python:3.11-slim
RUN pip install --no-cache-dir torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu \\
 && pip install --no-cache-dir scikit-learn mlperf-logging==4.1.68
WORKDIR /workspace/podium_digits
COPY . .
"""

README = """\
# podium_digits, PyTorch

Podium's reference benchmark: a small convolutional classifier trained on the 8×8 digits to 97% eval
accuracy, logged with mlperf-logging. `digits.py` is the training script, `run_and_time.sh` its entry point.

    source config_<system>.sh
    DATADIR=/data/podium_digits LOGDIR=./results ./run_and_time.sh

The dataset folder holds `digits.csv`; `python -c "from podium_reference.digits import write_dataset;
from pathlib import Path; write_dataset(Path('/data/podium_digits'))"` writes it.
"""


def write_implementation(org_folder: Path, *, systems: list[str]) -> Path:
    """`<org_folder>/benchmarks/podium_digits/implementations/pytorch/`, with a config for each system."""
    folder = org_folder / "benchmarks" / digits.BENCHMARK / "implementations" / NAME
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "run_and_time.sh").write_text(RUN_AND_TIME)
    (folder / "Dockerfile").write_text(DOCKERFILE)
    (folder / "README.md").write_text(README)
    (folder / "digits.py").write_bytes(Path(digits.__file__).read_bytes())
    for system in systems:
        (folder / f"config_{system}.sh").write_text(CONFIG.format(system=system))
    return folder
