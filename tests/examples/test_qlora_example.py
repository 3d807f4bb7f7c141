"""The QLoRA example runs as shipped (short mode, in a subprocess): adapters learn, the base stays bitwise."""

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_qlora_example_fine_tunes_adapters_on_a_quantized_base(tmp_path):
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=str(ROOT))   # this tree's ggrad
    args = ["--corpus", argparse.__file__, "--pretrain-steps", "60", "--steps", "60", "--d-model", "32",
            "--layers", "1", "--heads", "2", "--context", "32", "--batch", "16", "--lr", "1e-2", "--type", "q4_0",
            "--out", str(tmp_path)]
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "qlora_char_gpt.py"), *args], capture_output=True,
                         text=True, timeout=300, env=env, cwd=ROOT)
    assert out.returncode == 0, f"{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    assert "base parameters bit for bit unchanged: True" in out.stdout
    first, last = map(float, re.search(r"first \d+ steps ([\d.]+), last \d+ ([\d.]+)", out.stdout).groups())
    assert last < first, out.stdout
    val = re.search(r"validation loss: float ([\d.]+), q4_0 ([\d.]+), q4_0 \+ LoRA ([\d.]+)", out.stdout)
    v_float, v_quant, v_tuned = map(float, val.groups())
    assert v_tuned < v_quant and abs(v_quant - v_float) < 0.1, out.stdout
